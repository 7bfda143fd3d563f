"""design = "interleaved" without a server: what the file may combine it with, the groups a run
is cut into, the figures computed from a server's counters at the turns' ends, the idle-work
warning, and what a calibration of the other design may plan. The real thing is
tests/integration/test_interleave_real.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from perflab import spec
from perflab.cli import calibrated
from perflab.errors import SpecError, UsageError
from perflab.run import interleave
from perflab.run.observers.status import STATEMENTS
from perflab.run.scheduler import interleave_groups
from perflab.spec.aa import aa_experiment
from perflab.store import calibration
from tests.unit.test_calibration import HOST, NOW, _doc, _write
from tests.unit.test_spec import by_path, only_problem

BASE = """
[experiment]
name = "il"
duration = "10s"
warmup = "5s"
repeats = 3
design = "interleaved"
{extra}
[workload]
threads = [1, 2]

[variants.alloc]
glibc = {{}}
jemalloc = {{ preload = "jemalloc" }}
tcmalloc = {{ preload = "tcmalloc" }}
{rest}
"""


def text(extra: str = "", rest: str = "") -> str:
    return BASE.format(extra=extra, rest=rest)


def test_without_a_design_it_is_interleaved_where_it_can_measure_the_file():
    plain = spec.parse(text().replace('design = "interleaved"\n', ""))
    assert plain.file.experiment.design == "interleaved" and "the default" in plain.design_reason
    for rest, why in (("\n[observe]\nperf = true\n", "[observe] perf"), ("\n[observe]\npmp = true\n", "[observe] pmp"),
                      ("\n[observe]\nhost_speed = true\n", "host_speed"), ("\n[observe]\nalloc = true\n", "alloc")):
        exp = spec.parse(text("", rest).replace('design = "interleaved"\n', ""))
        assert exp.file.experiment.design == "sequential" and why in exp.design_reason, rest
    pinned = spec.parse(text("pin = true\n").replace('design = "interleaved"\n', ""))
    assert pinned.file.experiment.design == "sequential" and "pin" in pinned.design_reason
    named = spec.parse(text().replace('design = "interleaved"', 'design = "sequential"'))
    assert named.file.experiment.design == "sequential" and named.design_reason == 'design = "sequential" in the file'
    exp = spec.parse(text('slice = "2s"\n'))
    assert exp.file.experiment.design == "interleaved" and exp.file.experiment.slice == 2.0
    assert spec.parse(text()).file.experiment.slice == 0.1  # 100 ms turns unless the file says
    for fraction in ("100ms", "125ms", "200ms", "250ms", "500ms"):  # turns that end every second
        assert spec.parse(text(f'slice = "{fraction}"\n')).file.experiment.slice < 1


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ('slice = "300ms"', "a tenth to a half of a second that divides it"),
        ('slice = "50ms"', "a tenth to a half of a second"),
        ('slice = "750ms"', "whole seconds from 1s to 60s"),
        ('slice = "61s"', "whole seconds from 1s to 60s"),
        ('slice = "1.5s"', "whole seconds from 1s"),
        ("slice = 0", "whole seconds from 1s to 60s"),
    ],
)
def test_a_bad_slice_is_named(extra: str, expected: str):
    problem = only_problem(text(extra + "\n"))
    assert problem.path == "experiment.slice" and expected in problem.expected, problem.render()


def test_a_slice_with_the_sequential_design_is_refused():
    problem = only_problem(text('slice = "2s"\n').replace('design = "interleaved"', 'design = "sequential"'))
    assert problem.path == "experiment.slice" and 'design = "interleaved"' in problem.expected


def test_a_design_of_another_name_is_refused():
    problem = only_problem(text().replace('"interleaved"', '"alternating"'))
    assert problem.path == "experiment.design" and "interleaved" in problem.render()


def test_what_the_interleaved_design_cannot_run_is_named_at_once():
    rest = "\n[observe]\nperf = true\npmp = true\nalloc = true\nhost_speed = true\n"
    with pytest.raises(SpecError) as info:
        spec.parse(text("pin = true\n", rest))
    problems = by_path(info.value.problems)
    assert set(problems) == {"experiment.pin", "observe.perf", "observe.pmp", "observe.alloc", "observe.host_speed"}
    assert "others' turns" in problems["observe.perf"].hint
    assert "every variant alike" in problems["observe.host_speed"].hint


def test_postgresql_is_not_interleaved_yet():
    pg = text().replace('design = "interleaved"', 'design = "interleaved"\nserver = "postgresql"')
    pg = pg.replace("[workload]\n", '[workload]\ntool = "pgbench"\ntest = "select-only"\n')
    pg = pg.replace("[variants.alloc]", "[dataset]\nscale = 1\n\n[variants.alloc]")
    problem = only_problem(pg)
    assert problem.path == "experiment.design" and "MariaDB" in problem.expected


def test_groups_are_a_rounds_cells_of_one_thread_count_in_run_order():
    cells = dataclasses.replace(spec.parse(text()), seed=11).cells()
    groups = interleave_groups(cells)
    assert len(groups) == 3 * 2 and all(len(g) == 3 for g in groups)
    assert sorted(c.order for g in groups for c in g) == [c.order for c in cells]
    assert [g[0].order for g in groups] == sorted(g[0].order for g in groups)  # in the order they start
    for group in groups:
        assert len({(c.repeat, c.threads) for c in group}) == 1
        assert [c.order for c in group] == sorted(c.order for c in group)  # the round's drawn order: the turns'
    firsts = {g[0].variant["alloc"] for g in groups}
    assert len(firsts) > 1, "the seed draws who takes the first turn"


def counters(questions: float, commits: float, selects: float = 0.0, updates: float = 0.0) -> dict[str, float]:
    return {"Questions": questions, "Com_commit": commits, "Com_select": selects, "Com_update": updates}


def test_intervals_are_seconds_of_running_time_from_the_counters():
    points = [
        (0, 0.0, counters(100, 10)),
        (1, 1.0, counters(100 + 16_000 + STATEMENTS, 1010, 14_000)),  # 1 s: 16,000 statements, 1,000 commits
        (2, 2.02, counters(100 + 32_000 + 2 * STATEMENTS, 2010, 28_000, 100)),  # 1.02 s running
        (2, 2.02, counters(100 + 32_000 + 3 * STATEMENTS, 2010, 28_000, 100)),  # no running time: skipped
        (3, 3.02, counters(100 + 40_000 + 4 * STATEMENTS, 2510, 35_000, 100)),
    ]
    series = interleave.intervals(points, warmup=2)
    assert [iv["t"] for iv in series] == [1.0, 2.0, 3.0]
    assert [iv["warmup"] for iv in series] == [1, 1, 0]
    assert series[0]["qps"] == 16_000 and series[0]["tps"] == 1000 and series[0]["reads"] == 14_000
    assert series[0]["other"] == 2000 and series[0]["writes"] == 0
    assert series[1]["qps"] == pytest.approx(16_000 / 1.02, abs=0.01) and series[1]["writes"] == pytest.approx(98.04)
    assert series[2]["qps"] == pytest.approx(8000, abs=0.01)  # from the last point before it
    assert all(iv["p95_ms"] is None for iv in series)  # no latency histograms given


def test_the_summary_counts_the_window_less_the_samplers_statements():
    window = [
        (5, 5.0, counters(1000, 100)),
        (6, 6.0, counters(1000 + 16_000 + STATEMENTS, 1100)),
        (7, 7.0, counters(1000 + 32_000 + 2 * STATEMENTS, 2100)),
    ]
    figures = interleave.summary(window)
    assert figures["queries"] == 32_000 and figures["transactions"] == 2000
    assert figures["qps"] == 16_000 and figures["tps"] == 1000 and figures["total_time_s"] == 2.0
    assert set(figures["latency_ms"]) == {"min", "avg", "max", "p50", "p95", "p99"}
    assert not any(figures["latency_ms"].values())


def test_a_workload_without_commit_counts_a_statement_as_a_transaction():
    window = [(1, 1.0, counters(0, 0)), (2, 2.0, counters(5000 + STATEMENTS, 0))]
    figures = interleave.summary(window)
    assert figures["transactions"] == figures["queries"] == 5000 and figures["tps"] == figures["qps"]
    assert interleave.intervals(window, warmup=0)[0]["tps"] == 5000


@pytest.mark.parametrize(("idle", "warned"), [(None, False), (0.0, False), (0.05, False), (0.12, True)])
def test_a_paused_server_that_keeps_working_is_warned_of(idle: float | None, warned: bool):
    said = interleave.idle_warning(idle)
    assert bool(said) is warned
    if warned:
        assert "0.12 cores" in said and "design = sequential" in said


def test_the_calibration_of_an_interleaved_file_runs_interleaved_without_the_canary():
    aa = aa_experiment(spec.parse(text()), rounds=4)
    assert aa.file.experiment.design == "interleaved" and aa.file.observe.host_speed is False
    assert len(interleave_groups(aa.cells())) == 4  # one group (A and B) per round


def test_a_calibration_of_another_design_does_not_plan_the_run(tmp_path: Path):
    sequential = _write(calibration.path_for(tmp_path, HOST, "abc"), _doc())  # no "design": the sequential one
    with pytest.raises(UsageError, match="design: the calibration measured the sequential design"):
        calibration.check(sequential, HOST, "abc", "f" * 64, NOW, "interleaved")
    doc, note = calibration.find(tmp_path, HOST, "abc", "f" * 64, NOW, "interleaved")
    assert doc is None and "no calibration matched" in note  # each design has a file of its own
    interleaved = calibration.path_for(tmp_path, HOST, "abc", "interleaved")
    assert interleaved.name == f"{sequential.stem}-interleaved.json"
    _write(interleaved, _doc(design="sequential"))  # copied by hand under the other name: still refused
    doc, note = calibration.find(tmp_path, HOST, "abc", "f" * 64, NOW, "interleaved")
    assert doc is None and "this run is interleaved" in note
    _write(interleaved, _doc(design="interleaved"))
    assert calibration.find(tmp_path, HOST, "abc", "f" * 64, NOW, "interleaved")[0]["design"] == "interleaved"
    assert calibration.find(tmp_path, HOST, "abc", "f" * 64, NOW)[0]["file"] == str(sequential)  # both kept
    with pytest.raises(UsageError, match="design: the calibration measured the interleaved design"):
        calibration.check(interleaved, HOST, "abc", "f" * 64, NOW)


def test_an_interleaved_run_does_not_take_the_calibrated_canary():
    slope = {"slope": 0.49, "se": 0.05, "r": 0.85, "cells": 40, "rounds": 20}
    exp = spec.parse(text().replace("repeats = 3", 'repeats = "auto"'))
    planned, used = calibrated.apply(exp, _doc(design="interleaved", host_speed=slope), "using /x.json")
    assert not planned.file.observe.host_speed and "host_speed" not in used


def test_an_interleaved_cells_overhead_is_its_share_of_the_group():
    from perflab.cli.calibrate import overhead_s

    def cell(start: str, end: str, group: list[int] | None) -> dict:
        design = {"name": "interleaved", "group": group} if group else None
        return {"status": "ok", "started_at": start, "ended_at": end, "design": design}

    both = [cell("2026-11-26T10:00:00+00:00", "2026-11-26T10:00:32+00:00", [0, 1])] * 2
    assert overhead_s(both, 10) == 6.0  # 32 s for two cells of 10 s windows (and 5 s warm-ups)
    alone = [cell("2026-11-26T10:00:00+00:00", "2026-11-26T10:00:16+00:00", None)]
    assert overhead_s(alone, 10) == 6.0


class _TurnTaker:
    """A seat as _rotate drives it: the turns it was given, in order."""

    live = True

    def __init__(self, name: str, log: list[tuple[str, float]]) -> None:
        self.name, self.log = name, log

    def turn(self, seconds: float, others: list[object], measured: bool) -> None:
        self.log.append((self.name, seconds))


@pytest.mark.parametrize(
    ("slice_s", "seconds", "expected"),
    [
        (2.0, 5, [2.0, 2.0, 1.0]),  # whole seconds: the last turn is what is left
        (1.0, 3, [1.0, 1.0, 1.0]),
        (0.25, 2, [0.25] * 8),  # a fraction: k turns a second, exactly (no float drift)
        (0.1, 3, [0.1] * 30),
    ],
)
def test_turns_share_the_seconds_in_the_seats_order(slice_s: float, seconds: int, expected: list[float]):
    log: list[tuple[str, float]] = []
    seats = [_TurnTaker("a", log), _TurnTaker("b", log)]
    interleave._rotate(seats, seconds, slice_s, measured=True)  # type: ignore[arg-type]
    assert [n for n, _ in log] == ["a", "b"] * len(expected)  # alternating, a first
    assert [s for n, s in log if n == "a"] == pytest.approx(expected)
    assert sum(s for n, s in log if n == "b") == pytest.approx(seconds)
