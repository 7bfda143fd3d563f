"""The quiet modules' load guard (tests/integration/helpers.py, conftest.py): a quiet test that finds
the machine busy waits for quiet or fails naming the load (other_cpu_cores), never as a wrong verdict."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from perflab.report.findings import BUSY_CORES
from perflab.store.results import Results
from tests.conftest import _outputs
from tests.integration import helpers


def cell(i: int, other: float | None, status: str = "ok") -> dict[str, Any]:
    return {"id": i, "key": f"v=a/t1/r{i + 1}", "variant": {"v": "a"}, "threads": 1, "repeat": i + 1,
            "retry_of": None, "status": status, "settled": True, "stalls": [], "env": {}, "server_options": {},
            "summary": {"qps": 100.0, "tps": 100.0, "latency_ms": {"p95": 1.0}},
            "resources": {"other_cpu_cores": other}}  # fmt: skip


def test_busy_cells_are_the_ok_cells_beside_more_than_the_reports_busy_limit_worst_first():
    cells = [cell(0, 0.05), cell(1, 0.9), cell(2, None), cell(3, 2.0, status="failed"), cell(4, 1.2),
             cell(5, BUSY_CORES)]  # fmt: skip
    assert [(cores, c["id"]) for cores, c in helpers.busy_cells(cells)] == [(1.2, 4), (0.9, 1)]
    assert helpers.busy_cells([cell(0, 0.1), {"id": 1, "status": "ok"}]) == []  # no resources: not busy


def test_the_failure_names_the_load_not_a_verdict():
    said = helpers.load_message(helpers.busy_cells([cell(0, 1.2), cell(1, 0.01)]), 2, "/r")
    assert said.startswith("the machine was busy: 1 of 2 cells of /r") and "other_cpu_cores" in said
    assert "cell 0 v=a/t1/r1 1.20" in said and "not a wrong verdict" in said


def test_busy_runs_reads_the_cells_perflab_stored(tmp_path: Path):
    quiet, busy = tmp_path / "quiet", tmp_path / "cal" / "aa"
    for out, load in ((quiet, 0.05), (busy, 1.2)):
        with Results(out, create=True) as results:
            for i in range(2):
                results.commit_cell(cell(i, load if i else 0.0), [], [])
    assert helpers.busy_runs([quiet]) is None and helpers.busy_runs([tmp_path / "nowhere"]) is None
    said = helpers.busy_runs([quiet, tmp_path / "cal"])  # calibrate's -o holds its A/A results
    assert said is not None and "1 of 2 cells" in said and "1.20" in said and str(busy) in said


def test_waiting_for_quiet_ends_when_the_load_falls_or_gives_the_last_load_at_the_deadline():
    loads = iter([1.2, 0.9, 0.1, 3.0])
    clock = itertools.count(0.0, 10.0).__next__  # 10 s a measure
    assert helpers.wait_for_quiet(lambda: next(loads), BUSY_CORES, 300, clock) is None
    measured: list[float] = []

    def busy() -> float:
        measured.append(1.2)
        return 1.2

    assert helpers.wait_for_quiet(busy, BUSY_CORES, 30, itertools.count(0.0, 10.0).__next__) == 1.2
    assert len(measured) == 3  # the clock read after each: 10, 20, then 30 s, the deadline
    assert 0.0 <= helpers.other_cores(0.05) < 64  # the machine's own measure: cores, never negative


def test_the_runs_a_quiet_test_started_are_noted_by_their_output():
    assert _outputs(("run", "e.toml", "-o", "/r")) == [Path("/r")]
    assert _outputs(("run", "--resume", "/r")) == [Path("/r")]
    assert _outputs(("calibrate", "e.toml", "--rounds", "5", "-o", "/aa", "--format", "json")) == [Path("/aa")]
    assert _outputs(("export", "/r")) == [] and _outputs(("run", "e.toml", "--check")) == []
