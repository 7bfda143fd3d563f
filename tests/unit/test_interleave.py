"""design = "interleaved" without a server: what the file may combine it with, the groups a run
is cut into, the figures computed from a server's counters at the turns' ends, the idle-work
warning, and what a calibration of the other design may plan. The real thing is
tests/integration/test_interleave_real.py."""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from perflab import servers, spec
from perflab.cli import calibrated
from perflab.errors import SpecError, UsageError
from perflab.run import interleave, turn_series
from perflab.observers.status import LEAN_SELECTS, LEAN_STATEMENTS, SELECTS, STATEMENTS
from perflab.places.here import HERE
from perflab.places.proc import Child
from perflab.places.procfs import ProcCounters
from perflab.run.ends import Turns
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
    for rest, why in (
        ("\n[observe]\npmp = true\n", "[observe] pmp"),
        ("\n[observe]\nhost_speed = true\n", "host_speed"),
    ):
        exp = spec.parse(text("", rest).replace('design = "interleaved"\n', ""))
        assert exp.file.experiment.design == "sequential" and why in exp.design_reason, rest
    # on-CPU profiles and allocation counts are per seat (observers/seats.py): still interleaved
    for rest in (
        "\n[observe]\nperf = true\n",
        "\n[observe]\nalloc = true\n",
        "\n[observe]\nperf = true\nalloc = true\n",
    ):
        exp = spec.parse(text("", rest).replace('design = "interleaved"\n', ""))
        assert exp.file.experiment.design == "interleaved" and "the default" in exp.design_reason, rest
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
    assert set(problems) == {"experiment.pin", "observe.pmp", "observe.host_speed"}
    assert "idle threads" in problems["observe.pmp"].hint
    assert "every variant alike" in problems["observe.host_speed"].hint


def test_postgresql_with_sysbench_or_pgbench_is_interleaved_and_go_tpc_is_not_yet():
    pg = text().replace('design = "interleaved"', 'design = "interleaved"\nserver = "postgresql"')
    assert spec.parse(pg).file.experiment.design == "interleaved"  # sysbench's wrapper counts the turns
    plain = spec.parse(pg.replace('design = "interleaved"\n', ""))
    assert plain.file.experiment.design == "interleaved" and "the default" in plain.design_reason
    pgbench = pg.replace("[workload]\n", '[workload]\ntool = "pgbench"\ntest = "select-only"\n')
    pgbench = pgbench.replace("[variants.alloc]", "[dataset]\nscale = 1\n\n[variants.alloc]")
    assert spec.parse(pgbench).file.experiment.design == "interleaved"  # pgbench's log counts them
    chosen = spec.parse(pgbench.replace('design = "interleaved"\n', ""))
    assert chosen.file.experiment.design == "interleaved" and "the default" in chosen.design_reason
    tpcc = text().replace("[workload]\n", '[workload]\ntool = "go-tpc"\ntest = "tpcc"\nwarehouses = 1\n')
    problem = only_problem(tpcc)
    assert problem.path == "workload.tool" and "pgbench" in problem.expected and problem.found == "go-tpc"
    chosen = spec.parse(tpcc.replace('design = "interleaved"\n', ""))
    assert chosen.file.experiment.design == "sequential" and "go-tpc" in chosen.design_reason


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
    # every sample's own statements are in Questions, and its SELECTs in Com_select (the reads)
    points = [
        (0, 0.0, counters(100, 10)),
        (1, 1.0, counters(100 + 16_000 + STATEMENTS, 1010, 14_000 + SELECTS)),  # 1 s: 16,000 statements
        (2, 2.02, counters(100 + 32_000 + 2 * STATEMENTS, 2010, 28_000 + 2 * SELECTS, 100)),  # 1.02 s running
        (2, 2.02, counters(100 + 32_000 + 3 * STATEMENTS, 2010, 28_000 + 3 * SELECTS, 100)),  # no time: skipped
        (3, 3.02, counters(100 + 40_000 + 4 * STATEMENTS, 2510, 35_000 + 4 * SELECTS, 100)),
    ]
    series = turn_series.intervals(points, warmup=2)
    assert [iv["t"] for iv in series] == [1.0, 2.0, 3.0]
    assert [iv["warmup"] for iv in series] == [1, 1, 0]
    assert series[0]["qps"] == 16_000 and series[0]["tps"] == 1000 and series[0]["reads"] == 14_000
    assert series[0]["other"] == 2000 and series[0]["writes"] == 0
    assert series[1]["qps"] == pytest.approx(16_000 / 1.02, abs=0.01) and series[1]["writes"] == pytest.approx(98.04)
    assert series[2]["qps"] == pytest.approx(8000, abs=0.01)  # from the last point before it
    assert series[0]["reads"] == 14_000 and series[2]["reads"] == pytest.approx(7000, abs=0.01)
    # the reads are the client's alone (they were qps + 1 on point selects with the lean sampler)
    lean = [(0, 0.0, counters(0, 0)), (1, 1.0, counters(5000 + LEAN_STATEMENTS, 0, 5000 + LEAN_SELECTS))]
    [second] = turn_series.intervals(lean, warmup=0, statements=LEAN_STATEMENTS, selects=LEAN_SELECTS)
    assert second["reads"] == second["qps"] == 5000 and second["other"] == 0
    assert all(iv["p95_ms"] is None for iv in series)  # no latency histograms given


def test_the_summary_counts_the_window_less_the_samplers_statements():
    window = [
        (5, 5.0, counters(1000, 100)),
        (6, 6.0, counters(1000 + 16_000 + STATEMENTS, 1100)),
        (7, 7.0, counters(1000 + 32_000 + 2 * STATEMENTS, 2100)),
    ]
    figures = turn_series.summary(window)
    assert figures["queries"] == 32_000 and figures["transactions"] == 2000
    assert figures["qps"] == 16_000 and figures["tps"] == 1000 and figures["total_time_s"] == 2.0
    assert set(figures["latency_ms"]) == {"min", "avg", "max", "p50", "p95", "p99"}
    assert not any(figures["latency_ms"].values())


def test_a_workload_without_commit_counts_a_statement_as_a_transaction():
    window = [(1, 1.0, counters(0, 0)), (2, 2.0, counters(5000 + STATEMENTS, 0))]
    figures = turn_series.summary(window)
    assert figures["transactions"] == figures["queries"] == 5000 and figures["tps"] == figures["qps"]
    assert turn_series.intervals(window, warmup=0)[0]["tps"] == 5000


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


class _Runner:
    """What a Seat asks of its runner before it opens: a row, a log directory, the time-out."""

    def __init__(self, logs: Path) -> None:
        self.results = SimpleNamespace(log_dir=lambda order: logs)
        experiment = SimpleNamespace(timeout_margin=5.0)
        self.exp = SimpleNamespace(file=SimpleNamespace(experiment=experiment, workload=SimpleNamespace(tool="sysbench")))
        self.kind = servers.kind("mariadb")
        self.server_host, self.server_place = None, HERE  # its servers here

    def new_row(self, cell: object) -> dict:
        return {}

    def stage(self) -> object:
        return None  # a seat opened by the test itself

    def client_end(self, cell: object) -> object:
        return SimpleNamespace(password=None, pid=lambda child: child.pid)  # its clients here


class _Server:
    """A started server as a Seat reads it: a live process (a real one, so /proc has it)."""

    def __init__(self, child: Child) -> None:
        self.child, self.pid = child, child.pid

    def alive(self) -> bool:
        return self.child.poll() is None


class _Sampler:
    """SHOW GLOBAL STATUS without a server: counters that grow by 1000 statements a sample."""

    statements = STATEMENTS

    def __init__(self) -> None:
        self.samples: list[tuple[float, dict[str, float]]] = []

    def sample(self) -> None:
        self.samples.append((0.0, counters(1000.0 * (len(self.samples) + 1), 0)))

    def abort(self) -> None:
        pass


def _seat(tmp_path: Path, order: int, stack: contextlib.ExitStack) -> interleave.Seat:
    seat = interleave.Seat(_Runner(tmp_path), SimpleNamespace(order=order), None, tmp_path)  # type: ignore[arg-type]
    seat.server = _Server(stack.enter_context(Child(["sleep", "60"])))  # type: ignore[assignment]
    seat.child = stack.enter_context(Child(["sleep", "60"]))
    seat.turns = Turns(seat.child, None)  # SIGSTOP and SIGCONT here, as a client here's
    seat.sampler = _Sampler()  # type: ignore[assignment]
    return seat


@pytest.mark.parametrize(("slice_s", "per_second"), [(0.25, 4), (0.5, 2), (1.0, 1)])
def test_proc_is_read_only_around_the_turns_that_end_a_second(tmp_path: Path, monkeypatch, slice_s, per_second):
    """The real Seat.turn, on real (sleeping) processes: every file read under /proc is logged
    with the turn it falls in. Reads between 100 ms turns made the servers' QPS noisier
    (docs/methodology.md#nothing-read-between-turns): a turn that does not complete a second
    of its seat's running time must read nothing; one that does reads the steal and the other
    seat's server (its idle work) and its own server (alive?)."""
    log: list[list[str]] = []  # one list of /proc paths per turn, in order
    turns: list[tuple[interleave.Seat, float]] = []
    real_open, real_listdir, real_turn = builtins.open, os.listdir, interleave.Seat.turn

    def logged_open(path, *args, **kwargs):
        if log and str(path).startswith("/proc"):
            log[-1].append(str(path))
        return real_open(path, *args, **kwargs)

    def logged_listdir(path="."):
        if log and str(path).startswith("/proc"):
            log[-1].append(str(path))
        return real_listdir(path)

    def logged_turn(seat, seconds, others, measured):
        turns.append((seat, seconds))
        log.append([])
        return real_turn(seat, seconds, others, measured)

    with contextlib.ExitStack() as stack:
        seats = [_seat(tmp_path, 0, stack), _seat(tmp_path, 1, stack)]
        monkeypatch.setattr(builtins, "open", logged_open)
        monkeypatch.setattr(os, "listdir", logged_listdir)
        monkeypatch.setattr(interleave.Seat, "turn", logged_turn)
        interleave._rotate(seats, 1, slice_s, measured=True)
        monkeypatch.undo()
    assert [s for s, _ in turns] == seats * per_second and all(not s.error for s in seats)
    for i, ((seat, _), reads) in enumerate(zip(turns, log, strict=True)):
        other = next(s for s in seats if s is not seat)
        if (i // 2 + 1) % per_second:  # the seat's 1st..(k-1)th turn of a second
            assert reads == [], f"turn {i} of {slice_s} s read {reads}"
        else:
            assert "/proc/stat" in reads and f"/proc/{other.server.pid}/stat" in reads, (i, reads)
            assert f"/proc/{seat.server.pid}/stat" in reads, (i, reads)
    assert [len(s.points) for s in seats] == [1, 1]  # a sample at the second's end
    assert all(s.idle_s > 0 and s.steal_sampled_s > 0 for s in seats)


def test_window_use_is_the_window_less_the_idle_rate_over_the_others_turns(monkeypatch):
    """10 s of window, 6 s of them the seat's own turns: its server's use is the window's less
    4 s of its idle rate (0.5 CPU s and 200 faults over 2 s sampled: 0.25 cores, 100 a second);
    the context switches are the window's (the idle samples read none)."""
    end = ProcCounters(user_s=14.0, sys_s=3.0, minor_faults=1500, major_faults=12,
                                  voluntary_ctx=900, involuntary_ctx=90)  # fmt: skip
    monkeypatch.setattr(ProcCounters, "read", staticmethod(lambda pid, threads=True: end))
    seat = object.__new__(interleave.Seat)
    seat.runner = SimpleNamespace(kind=servers.kind("mariadb"), server_place=HERE)  # type: ignore[assignment]
    seat.server = SimpleNamespace(pid=1, alive=lambda: True)
    seat.server_start = ProcCounters(10.0, 2.0, 500, 2, 100, 10)
    seat.idle_used, seat.idle_s = ProcCounters(0.4, 0.1, 200, 4, 0, 0), 2.0
    seat.window_t0 = time.monotonic() - 10.0
    used = seat.window_use(6.0)
    assert used is not None
    # whole window: 4.0 user, 1.0 sys, 1000 minor, 10 major; idle over 4 s: 0.8, 0.2, 400, 8
    assert used.user_s == pytest.approx(3.2, abs=0.01) and used.sys_s == pytest.approx(0.8, abs=0.01)
    assert used.minor_faults == pytest.approx(600, abs=3) and used.major_faults == 2
    assert (used.voluntary_ctx, used.involuntary_ctx) == (800, 80)
    seat.idle_used = ProcCounters(5.0, 5.0, 5000, 50, 0, 0)  # more than the window had: none left
    assert ProcCounters(0.0, 0.0, 0, 0, 800, 80) == seat.window_use(6.0)
    seat.idle_s = 0.0  # never sampled: the whole window is its own
    assert seat.window_use(6.0) == end.minus(seat.server_start)
    seat.server_start = None  # not started: nothing to say
    assert seat.window_use(6.0) is None
