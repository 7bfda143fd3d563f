"""The adaptive loop with stop = "verdict" (run/scheduler.py, analyze/sequential.py), driving a
CellRunner whose cells return a drawn QPS: a comparison that crosses a sequential boundary
stops (its variant runs no more), the run stops when all have, and the report's verdicts are
the sequential ones."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from perflab import spec
from perflab.analyze import compare
from perflab.errors import SpecError
from perflab.report import findings
from perflab.run import scheduler
from perflab.run.cell import CellRunner
from perflab.spec import Cell
from perflab.store.results import Results

SPEC = """
[experiment]
name = "t"
design = "sequential"  # the scheduler\'s own loop, cells one at a time
duration = "2s"
warmup = "1s"
repeats = "auto"
stop = "verdict"
max_repeats = {max_repeats}
[variants.v]
base = {{}}
slow = {{}}
same = {{}}
"""
LEVEL = {"base": 1000.0, "slow": 800.0, "same": 1000.0}


class DrawingRunner(CellRunner):
    """Cells that return a drawn QPS at once: a round's level shared by its cells (5%), 1% own
    noise; `slow` is 20% slower."""

    def __init__(self, exp: spec.Experiment, results: Results, noise: float = 0.01) -> None:
        super().__init__(exp, results)
        self.rng = random.Random(11)
        self.levels: dict[int, float] = {}
        self.noise = noise

    def run(self, cell: Cell, snapshot: Any, workdir: Path) -> dict[str, Any]:
        level = self.levels.setdefault(cell.repeat, self.rng.gauss(1.0, 0.05))
        qps = LEVEL[cell.variant["v"]] * level * self.rng.gauss(1.0, self.noise)
        return {
            "id": cell.order,
            "key": cell.key,
            "variant": cell.variant,
            "threads": cell.threads,
            "repeat": cell.repeat,
            "status": "ok",
            "settled": True,
            "stalls": [],
            "summary": {"qps": qps, "tps": qps / 10, "latency_ms": {"p95": 1.0}},
            "resources": {},
        }


def run(tmp_path: Path, max_repeats: int = 12, noise: float = 0.01) -> tuple[list[dict], dict]:
    exp = spec.parse(SPEC.format(max_repeats=max_repeats))
    with Results(tmp_path / "r", create=True) as results:
        results.set_meta(experiment={"axes": {"v": ["base", "slow", "same"]}})
        done: list[dict] = []
        runner = DrawingRunner(exp, results, noise)
        scheduler.Scheduler(exp, results, runner=runner).run_adaptive(None, tmp_path, done)  # type: ignore[arg-type]
        return done, results.meta()


def test_a_resolved_comparison_stops_and_the_run_stops_when_all_have(tmp_path: Path) -> None:
    done, meta = run(tmp_path)
    adaptive = meta["adaptive"]
    by = {c["variant"]: c for c in adaptive["comparisons"]}
    assert adaptive["stop"] == "verdict" and adaptive["stop_reason"] == "every comparison has a verdict"
    assert by["v=slow"]["verdict"] == "slower" and by["v=same"]["verdict"] == "equivalent"
    assert by["v=slow"]["round"] < by["v=same"]["round"] == adaptive["rounds"] < 12
    ran = {v: sum(1 for c in done if c["variant"]["v"] == v) for v in LEVEL}
    assert ran == {"base": adaptive["rounds"], "slow": by["v=slow"]["round"], "same": adaptive["rounds"]}


def test_without_a_verdict_it_stops_at_max_repeats(tmp_path: Path) -> None:
    done, meta = run(tmp_path, max_repeats=4, noise=0.2)
    adaptive = meta["adaptive"]
    assert adaptive["stop_reason"] == "max_repeats (4) reached" and adaptive["rounds"] == 4
    assert {c["verdict"] for c in adaptive["comparisons"]} <= {"inconclusive", "slower"}
    assert len(done) == 12


def test_the_reports_verdicts_and_findings_are_the_sequential_ones(tmp_path: Path) -> None:
    done, meta = run(tmp_path)
    found = compare.verdicts(meta, done, metrics=("qps",))
    by = {r.variant["v"]: r for r in found.comparisons}
    assert by["slow"].verdict == "slower" and by["same"].verdict == "equivalent"
    stopped = meta["adaptive"]["comparisons"][0]["round"]
    assert f"stopped at round {stopped} of at most 12 on a sequential boundary" in (by["slow"].reason or "")
    text = " ".join(f.text for f in findings.collect(found.groups, done, meta))
    assert "sequential" in text and "2 of 2 comparisons" in text


def test_stop_is_validated() -> None:
    with pytest.raises(SpecError) as err:
        spec.parse(SPEC.format(max_repeats=5).replace('stop = "verdict"', 'stop = "ci"'))
    assert "experiment.stop: expected one of 'target_ci' or 'verdict'" in str(err.value)
    assert err.value.exit_code == 2
    with pytest.raises(SpecError, match=r'experiment.target_ci: expected stop = "target_ci" beside it'):
        spec.parse(SPEC.format(max_repeats=5).replace("max_repeats", 'target_ci = "2%"\nmax_repeats'))
    with pytest.raises(SpecError, match=r'experiment.stop: expected no fixed repeats beside it'):
        spec.parse(SPEC.format(max_repeats=5).replace('repeats = "auto"', "repeats = 3").replace("max_repeats = 5", ""))


def test_a_resumed_run_replays_its_looks_and_runs_the_same_cells(tmp_path: Path) -> None:
    full, meta = run(tmp_path / "full")
    exp = spec.parse(SPEC.format(max_repeats=12))
    with Results(tmp_path / "resumed", create=True) as results:
        runner = DrawingRunner(exp, results)
        done = [dict(row) for row in full[:11]]  # killed in round 4
        for row in full[:11]:  # draw the stored cells' values again, so the cells to come draw theirs
            runner.run(Cell(row["id"], row["variant"], 1, row["repeat"], None, {}, {}), None, tmp_path)
        scheduler.Scheduler(exp, results, runner=runner).run_adaptive(None, tmp_path, done)  # type: ignore[arg-type]
        resumed = results.meta()["adaptive"]
    assert [c["key"] for c in done] == [c["key"] for c in full]
    assert resumed["comparisons"] == meta["adaptive"]["comparisons"]
