"""The adaptive-repeats loop of the scheduler, driving a CellRunner whose cells return a
drawn QPS instead of a measured one: which groups get more rounds, and when the loop stops."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from perflab import spec
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
target_ci = "1%"
max_repeats = {max_repeats}
{budget}
[variants.v]
tight = {{}}
noisy = {{}}
"""


class DrawingRunner(CellRunner):
    """Cells that return a drawn QPS at once: `tight` varies 0.1%, `noisy` 10%."""

    def __init__(self, exp: spec.Experiment, results: Results, cell_seconds: float = 0.0) -> None:
        super().__init__(exp, results)
        self.rng = random.Random(7)
        self.cell_seconds = cell_seconds
        self.clock = 0.0

    def run(self, cell: Cell, snapshot: Any, workdir: Path) -> dict[str, Any]:
        self.clock += self.cell_seconds
        cv = 0.001 if cell.variant["v"] == "tight" else 0.10
        qps = self.rng.gauss(1000.0, 1000.0 * cv)
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


def run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_repeats: int = 6, budget: str = "", cell_seconds: float = 0.0
) -> tuple[list[dict], dict]:
    exp = spec.parse(SPEC.format(max_repeats=max_repeats, budget=budget))
    with Results(tmp_path / "r", create=True) as results:
        runner = DrawingRunner(exp, results, cell_seconds)
        monkeypatch.setattr(scheduler.time, "monotonic", lambda: runner.clock)
        done: list[dict] = []
        scheduler.Scheduler(exp, results, runner=runner).run_adaptive(None, tmp_path, done)  # type: ignore[arg-type]
        return done, results.meta()["adaptive"]


def test_only_groups_above_target_get_more_rounds(tmp_path, monkeypatch):
    done, adaptive = run(tmp_path, monkeypatch)
    keys = [c["key"] for c in done]
    assert keys[:6] == [
        "v=tight/t1/r1",
        "v=noisy/t1/r1",
        "v=tight/t1/r2",
        "v=noisy/t1/r2",
        "v=tight/t1/r3",
        "v=noisy/t1/r3",
    ]
    assert keys[6:] == [f"v=noisy/t1/r{r}" for r in range(4, 7)]  # the tight group met ±1% after 3
    assert [c["id"] for c in done] == list(range(9))  # run order stays dense
    assert adaptive["rounds"] == 6 and adaptive["stop_reason"] == "max_repeats (6) reached"
    met = {g["variant"]: g["met"] for g in adaptive["groups"]}
    assert met == {"v=tight": True, "v=noisy": False}


def test_stops_when_all_targets_are_met(tmp_path, monkeypatch):
    monkeypatch.setattr(DrawingRunner, "run", _tight_only(DrawingRunner.run))
    done, adaptive = run(tmp_path, monkeypatch)
    assert len(done) == 6 and adaptive["stop_reason"] == "all targets met" and adaptive["rounds"] == 3


def _tight_only(original):
    def run_cell(self, cell, snapshot, workdir):
        return original(
            self, Cell(cell.order, {"v": "tight"}, cell.threads, cell.repeat, None, {}, {}), snapshot, workdir
        ) | {"variant": cell.variant, "key": cell.key}

    return run_cell


def test_time_budget_stops_before_a_round_that_would_overrun(tmp_path, monkeypatch):
    # 10 s per cell: 3 rounds x 2 cells = 60 s; a 4th round (1 cell) would end at 70 s > 65 s
    done, adaptive = run(tmp_path, monkeypatch, max_repeats=10, budget='time_budget = "65s"', cell_seconds=10.0)
    assert len(done) == 6
    assert adaptive["stop_reason"].startswith("budget (1m05s) would be exceeded")
    done, adaptive = run(tmp_path / "b", monkeypatch, max_repeats=10, budget='time_budget = "75s"', cell_seconds=10.0)
    assert len(done) == 7 and adaptive["rounds"] == 4


def test_resumed_adaptive_run_replays_stored_rounds(tmp_path, monkeypatch):
    full, _ = run(tmp_path, monkeypatch)
    exp = spec.parse(SPEC.format(max_repeats=6, budget=""))
    with Results(tmp_path / "resumed", create=True) as results:
        sched = scheduler.Scheduler(exp, results, runner=DrawingRunner(exp, results))
        done = [dict(row) for row in full[:5]]  # killed in the middle of round 3
        sched.run_adaptive(None, tmp_path, done)  # type: ignore[arg-type]
    assert [c["key"] for c in done] == [c["key"] for c in full]
    assert [c["id"] for c in done] == list(range(9))
