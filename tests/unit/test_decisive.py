"""Issue 32: rounds until a verdict by default, retries of failed or unsettled cells, the design
chosen when the file names none (and the machine's room for it), the group-relative warm-up check
of the interleaved design, and Pocock-type spending."""

from __future__ import annotations

import math
import os
import random
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import special

from perflab import preflight, spec
from perflab.analyze import sequential, summary
from perflab.errors import EnvironmentProblem
from perflab.run import interleave, scheduler
from perflab.run.adaptive import max_rounds
from perflab.run.cell import CellRunner
from perflab.spec import Cell
from perflab.store.results import Results
from perflab.store.schema import SCHEMA_VERSION

SPEC = """
[experiment]
name = "t"
duration = "2s"
warmup = "1s"
design = "sequential"
{extra}
[variants.v]
a = {{}}
b = {{}}
"""


class Runner(CellRunner):
    """Cells that return at once: `b` 20% slower than `a`; the cells named in `bad` (key ->
    "failed" or "unsettled") come back that way the first time they run, every cell of the
    variant `never_settles` every time."""

    def __init__(self, exp: spec.Experiment, results: Results, bad: dict[str, str], never_settles: str = "") -> None:
        super().__init__(exp, results)
        self.rng = random.Random(3)
        self.bad = dict(bad)
        self.never_settles = never_settles  # a variant whose every cell, retries too, comes back unsettled
        self.ran: list[Cell] = []

    def run(self, cell: Cell, snapshot: Any, workdir: Path) -> dict[str, Any]:
        self.ran.append(cell)
        qps = (1000.0 if cell.variant["v"] == "a" else 800.0) * self.rng.gauss(1.0, 0.01)
        row = {"id": cell.order, "key": cell.key, "variant": cell.variant, "threads": cell.threads,
               "repeat": cell.repeat, "retry_of": cell.retry_of, "status": "ok", "settled": True, "stalls": [],
               "env": {}, "server_options": {},
               "summary": {"qps": qps, "tps": qps, "latency_ms": {"p95": 1.0}}, "resources": {}}  # fmt: skip
        what = self.bad.pop(cell.key, None) if cell.retry_of is None else None
        what = "unsettled" if cell.variant["v"] == self.never_settles else what
        if what == "failed":
            row.update(status="failed", error="server crashed")
        elif what == "unsettled":
            row.update(settled=False, unsettled_reason="the window climbs")
        self.results.commit_cell(row, [], [])
        return row


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """The run's work directory where the server's account (mysql: perflab as root) reaches it, as a
    run's on the tmpfs; pytest's tmp_path is under /tmp/pytest-of-root, 0700."""
    path = Path(tempfile.mkdtemp(prefix="decisive-", dir=os.environ.get("PERFLAB_TMPFS", "/dev/shm")))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_an_unsettled_cell_is_measured_once_more_in_its_round(tmp_path: Path, workdir: Path) -> None:
    exp = spec.parse(SPEC.format(extra='budget = "10m"'))
    with Results(tmp_path / "r", create=True) as results:
        runner = Runner(exp, results, {"v=a/t1/r2": "unsettled", "v=b/t1/r3": "unsettled"})
        scheduler.Scheduler(exp, results, runner=runner)._run_cells(workdir, False, [])
        stored = results.cells()
    retries = [c for c in stored if c["retry_of"] is not None]
    replaced = {c["id"]: c for c in stored if c["id"] in {r["retry_of"] for r in retries}}
    assert sorted(c["key"] for c in replaced.values()) == ["v=a/t1/r2", "v=b/t1/r3"]
    for retry in retries:  # the same round, right after it, in the place of the cell it replaces
        old = replaced[retry["retry_of"]]
        assert retry["repeat"] == old["repeat"] and retry["variant"] == old["variant"] and retry["id"] > old["id"]
        assert retry["key"] == f"{old['key']}/retry-of-{old['id']}"
    assert [c.key for c in runner.ran][4] == "v=a/t1/r2/retry-of-2"  # before round 3 starts
    groups = {g.key: g for g in summary.groups(stored)}
    assert len(groups["v=a"].qps) == len(groups["v=b"].qps) == 3  # every round counts
    assert groups["v=a"].unsettled == [] and groups["v=b"].unsettled == [] and groups["v=b"].replaced
    assert summary.rounds(groups["v=b"], "qps").keys() == {1, 2, 3}  # the retry pairs with its round's baseline
    # every cell kept: the rounds after a retry take the ids after it (a cell is stored by its id)
    assert [c["id"] for c in stored] == list(range(8)) and len({c["key"] for c in stored}) == 8


@pytest.mark.parametrize("repeats", ["repeats = 3", 'budget = "10m"'])
def test_measure_again_false_keeps_unsettled_and_failed_cells_as_they_came(
    tmp_path: Path, workdir: Path, repeats: str
) -> None:
    exp = spec.parse(SPEC.format(extra=f"{repeats}\nmeasure_again = false"))
    assert exp.file.experiment.measure_again is False
    with Results(tmp_path / "r", create=True) as results:
        runner = Runner(exp, results, {"v=a/t1/r2": "unsettled", "v=b/t1/r3": "failed", "v=b/t1/r1": "unsettled"})
        scheduler.Scheduler(exp, results, runner=runner)._run_cells(workdir, False, [])
        stored = results.cells()
    assert all(c["retry_of"] is None for c in stored) and all(c.retry_of is None for c in runner.ran)
    groups = {g.key: g for g in summary.groups(stored)}
    key = {c["id"]: c["key"] for c in stored}
    assert [key[i] for i in groups["v=a"].unsettled] == ["v=a/t1/r2"] and groups["v=b"].failed == 1
    assert [key[i] for i in groups["v=b"].unsettled] == ["v=b/t1/r1"] and not groups["v=b"].replaced


def test_a_retry_is_not_retried_and_a_resume_does_not_run_it_twice(tmp_path: Path, workdir: Path) -> None:
    exp = spec.parse(SPEC.format(extra='budget = "10m"'))
    with Results(tmp_path / "r", create=True) as results:
        # a failure of a variant that has not run well yet: not again (it would fail twice)
        runner = Runner(exp, results, {"v=a/t1/r1": "unsettled", "v=b/t1/r1": "failed"})
        sched = scheduler.Scheduler(exp, results, runner=runner)
        sched._run_cells(workdir, False, [])
        first = len(results.cells())
        runner.ran.clear()
        (tmp_path / "again").mkdir()
        sched._run_cells(workdir / "again", True, results.cells())  # a resume of a complete run
        assert len([c for c in runner.ran if c.retry_of is not None]) == 0
        assert len([c for c in results.cells() if c["retry_of"] is not None]) == 1 and first >= 7


def test_without_repeats_the_run_stops_on_a_verdict_within_its_budget(tmp_path: Path) -> None:
    exp = spec.parse(SPEC.format(extra='budget = "5m"'))
    assert max_rounds(exp) == 25  # 5 minutes of rounds of 2 cells of 1 + 2 + 3 s
    with Results(tmp_path / "r", create=True) as results:
        runner = Runner(exp, results, {})
        done: list[dict[str, Any]] = []
        scheduler.Scheduler(exp, results, runner=runner).run_adaptive(None, tmp_path, done)  # type: ignore[arg-type]
        adaptive = results.meta()["adaptive"]
    # a 20% slowdown with 1% noise: slower at the first look (round 3), Pocock-type spending
    assert adaptive["stop"] == "verdict" and adaptive["spending"] == "pocock" and adaptive["max_repeats"] == 25
    assert adaptive["rounds"] == 3 and adaptive["comparisons"][0]["verdict"] == "slower"
    assert adaptive["time_budget_s"] == 300.0


def test_pocock_type_spending_spends_more_early_and_all_at_the_end() -> None:
    for t in (0.1, 0.3, 0.6):
        assert sequential.spent(t, 0.025, sequential.POCOCK) > sequential.spent(t, 0.025)
    assert sequential.spent(1.0, 0.025, sequential.POCOCK) == 0.025
    assert sequential.spent(0.5, 0.025, sequential.POCOCK) == pytest.approx(0.025 * math.log1p((math.e - 1) / 2))


def test_pocock_boundaries_keep_the_level_on_fresh_paths() -> None:
    """Identical variants over 3..12 looks: the one-sided crossing rate of fresh simulated t paths
    stays at the level (2.5%), within the simulation's error."""
    a, k, paths = 0.025, 12, 40_000
    ns = tuple(range(3, k + 1))
    fractions = tuple(n / k for n in ns)
    lv = sequential.levels(ns, fractions, a, sequential.POCOCK)
    assert lv[0] > sequential.levels(ns, fractions, a)[0] * 10  # far more than O'Brien-Fleming's at round 3
    rng = np.random.default_rng(99)
    x = rng.standard_normal((paths, k))
    crossed = np.zeros(paths, bool)
    for j, n in enumerate(ns):
        v = x[:, :n]
        t = v.mean(1) / (v.std(1, ddof=1) / math.sqrt(n))
        crossed |= special.stdtr(n - 1, -t) <= lv[j]
    assert crossed.mean() == pytest.approx(a, abs=0.004)


def test_a_design_that_does_not_fit_the_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = '[experiment]\nname = "t"\n[dataset]\ntables = 4\ntable_size = 1000000\n[variants.v]\na = {}\nb = {}\n'
    exp = spec.parse(text)
    assert exp.file.experiment.interleaved
    monkeypatch.setattr(preflight, "memory_available", lambda: 2 << 30)  # 2 GiB: not for 2 servers of 1.6 GB
    fallback = preflight.fit_design(exp)
    assert fallback.file.experiment.design == "sequential"
    assert "2 servers at once need about" in fallback.design_reason and "2048 MiB available" in fallback.design_reason
    asked = spec.parse(text.replace('name = "t"', 'name = "t"\ndesign = "interleaved"'))
    with pytest.raises(EnvironmentProblem) as info:
        preflight.fit_design(asked)
    assert info.value.exit_code == 3 and info.value.problems[0].path == "experiment.design"
    assert "MiB of memory (2048 MiB available)" in info.value.problems[0].found
    monkeypatch.setattr(preflight, "memory_available", lambda: 64 << 30)
    assert preflight.fit_design(exp).file.experiment.design == "interleaved"


def _series(values: list[float]) -> list[dict[str, Any]]:
    return [{"t": float(i + 1), "qps": v} for i, v in enumerate(values)]


class _Seat:
    def __init__(self, values: list[float], settled: bool) -> None:
        self.series = _series(values)
        reason = None if settled else "the window climbs by +27%"
        self.row = {"status": "ok", "settled": settled, "unsettled_reason": reason}
        self.own_unsettled_reason = None


def test_a_seat_that_climbs_with_its_group_is_settled_relative_to_it() -> None:
    rng = random.Random(5)
    host = [1.0] * 3 + [0.8] * 4 + [1.0 + 0.03 * i for i in range(4)]  # the host speeds up in the window
    own = [1000 * h * rng.gauss(1, 0.01) for h in host]
    peer = [900 * h * rng.gauss(1, 0.01) for h in host]
    climbing, other = _Seat(own, False), _Seat(peer, True)
    interleave.settle_relative([climbing, other], 3, 0.5)  # type: ignore[list-item]
    assert climbing.row["settled"] is True and climbing.row["unsettled_reason"] is None
    assert climbing.own_unsettled_reason == "the window climbs by +27%"
    # its own warm-up, which the group does not share, stays
    warming = _Seat([300, 400, 500, 600, 700, 800, 900, 1000, 1000, 1000, 1000], False)
    flat = _Seat([1000 * rng.gauss(1, 0.01) for _ in range(11)], True)
    interleave.settle_relative([warming, flat], 3, 0.5)  # type: ignore[list-item]
    assert warming.row["settled"] is False and warming.own_unsettled_reason is None


def test_schema_8_gains_retry_of(tmp_path: Path) -> None:
    with Results(tmp_path, create=True):
        pass
    db = sqlite3.connect(tmp_path / "results.db")
    kept = ", ".join(r[1] for r in db.execute("PRAGMA table_info(cells)") if r[1] != "retry_of")
    db.execute(f"CREATE TABLE v8 AS SELECT {kept} FROM cells")  # the cells table as schema 8 had it
    db.execute("DROP TABLE cells")
    db.execute("ALTER TABLE v8 RENAME TO cells")
    db.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with Results(tmp_path) as results:
        assert results.meta()["schema_version"] == SCHEMA_VERSION == 10
    columns = {r[1] for r in sqlite3.connect(tmp_path / "results.db").execute("PRAGMA table_info(cells)")}
    assert "retry_of" in columns


def test_fixed_repeats_measure_an_unsettled_cell_again_so_n_rounds_give_n_pairs(tmp_path: Path, workdir: Path) -> None:
    exp = spec.parse(SPEC.format(extra="repeats = 3"))
    with Results(tmp_path / "r", create=True) as results:
        runner = Runner(exp, results, {"v=a/t1/r1": "unsettled", "v=b/t1/r2": "unsettled"})
        sched = scheduler.Scheduler(exp, results, runner=runner)
        sched._run_cells(workdir, False, [])
        stored = results.cells()
        runner.ran.clear()
        (tmp_path / "again").mkdir()
        sched._run_cells(workdir / "again", True, results.cells())  # a resume of a complete run: nothing
        assert runner.ran == [] and len(results.cells()) == len(stored)
    by_id = {c["id"]: c for c in stored}
    again = [c for c in stored if c["retry_of"] is not None]
    assert sorted(by_id[c["retry_of"]]["key"] for c in again) == ["v=a/t1/r1", "v=b/t1/r2"]
    assert all(c["repeat"] == by_id[c["retry_of"]]["repeat"] for c in again)  # within its round, before the next
    assert [c["key"] for c in stored][2] == "v=a/t1/r1/retry-of-0" and len(stored) == 8
    groups = {g.key: g for g in summary.groups(stored)}
    assert summary.rounds(groups["v=b"], "qps").keys() == summary.rounds(groups["v=a"], "qps").keys() == {1, 2, 3}
    assert groups["v=a"].unsettled == [] and groups["v=a"].replaced == [0]  # counted as measured_again


def test_a_fixed_repeats_cell_that_never_settles_is_measured_again_once(tmp_path: Path, workdir: Path) -> None:
    """The retry is not retried: a cell that never settles costs one cell more a round, not a
    loop, and both stay stored: the first as replaced, its retry counted unsettled."""
    exp = spec.parse(SPEC.format(extra="repeats = 2"))
    with Results(tmp_path / "r", create=True) as results:
        runner = Runner(exp, results, {}, never_settles="b")
        scheduler.Scheduler(exp, results, runner=runner)._run_cells(workdir, False, [])
        stored = results.cells()
    b = [c for c in stored if c["variant"] == {"v": "b"}]
    assert len(stored) == 6 and len(b) == 4 and all(c["settled"] in (False, 0) for c in b)
    assert len([c for c in b if c["retry_of"] is not None]) == 2  # once in each round
    group = {g.key: g for g in summary.groups(stored)}["v=b"]
    assert len(group.replaced) == 2 and len(group.unsettled) == 2 and group.qps == []


def test_a_failure_is_measured_again_where_its_variant_has_run_well(tmp_path: Path, workdir: Path) -> None:
    exp = spec.parse(SPEC.format(extra='budget = "10m"'))
    with Results(tmp_path / "r", create=True) as results:
        runner = Runner(exp, results, {"v=b/t1/r2": "failed", "v=a/t1/r1": "failed"})
        scheduler.Scheduler(exp, results, runner=runner)._run_cells(workdir, False, [])
        stored = results.cells()
    by_id = {c["id"]: c for c in stored}
    again = {by_id[c["retry_of"]]["key"] for c in stored if c["retry_of"] is not None}
    # b ran well in round 1, so its round-2 failure is no failure every run of b meets; a had not
    # run well when its round-1 cell failed, so that failure may be a's own: not measured again
    assert again == {"v=b/t1/r2"}
    retry = next(c for c in stored if c["retry_of"] is not None)
    assert retry["status"] == "ok" and retry["repeat"] == 2
    groups = {g.key: g for g in summary.groups(stored)}
    # b's retry in its failure's place; a's failure stays one (and a round more was run for it)
    failed_b = next(c["id"] for c in stored if c["key"] == "v=b/t1/r2")
    assert groups["v=b"].replaced == [failed_b] and groups["v=b"].failed == 0 and groups["v=a"].failed == 1
    assert len(groups["v=a"].qps) == len(groups["v=b"].qps) - 1


def test_needs_retry_reads_the_variant_s_other_cells() -> None:
    ok = {"id": 0, "variant": {"v": "a"}, "threads": 1, "status": "ok", "settled": True}
    failed = {"id": 1, "variant": {"v": "a"}, "threads": 1, "status": "failed"}
    other = {"id": 2, "variant": {"v": "b"}, "threads": 1, "status": "ok", "settled": True}
    assert scheduler.needs_retry(failed, [ok, failed]) and not scheduler.needs_retry(failed, [failed, other])
    assert not scheduler.needs_retry({**failed, "threads": 2}, [ok, failed])  # another thread count
    assert scheduler.needs_retry({**ok, "settled": False}, []) and not scheduler.needs_retry(ok, [ok])
