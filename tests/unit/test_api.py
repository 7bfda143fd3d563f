"""The Python API (perflab/api.py, docs/api.md): perflab.open(DIR) gives the JSON export's figures
and verdicts as DataFrames, with the columns and dtypes docs/api.md lists, versioned with the export.

Built from recorded results, no server: the real tiny run (tests/data/report/tiny) and the 2 x 2
matrix cloned from it (tests/unit/test_exports.build_matrix: sort_buffer=32M about 0.7x as fast)."""

from __future__ import annotations

import json
import math
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import perflab
from perflab import api
from perflab.analyze import compare, summary
from perflab.errors import ResultsFormatError
from perflab.report import csv_export, export
from perflab.store.results import Results
from perflab.variants import variant_key
from tests.conftest import ROOT
from tests.conftest import perflab as perflab_cli
from tests.unit.test_exports import DATA, build_matrix

DOC = ROOT / "docs" / "api.md"
TINY_QPS = 15357.8  # the recorded tiny run's first cell (glibc, round 1)


@pytest.fixture()
def matrix(tmp_path: Path) -> Path:
    return build_matrix(tmp_path / "matrix")


def document(directory: Path) -> dict:
    with Results(directory) as results:
        return export.document(results)


def plain(value: object) -> object:
    """A frame's or SQLite's value as plain Python: missing -> None, flags and numbers -> float."""
    if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, int | float) or hasattr(value, "dtype"):
        return float(value)
    return value


def test_cells_are_the_exports_cells(matrix: Path):
    run = perflab.open(matrix)
    doc = document(matrix)
    assert len(run.cells) == 12 and list(run.cells.id) == [c["id"] for c in doc["cells"]]
    for row, cell in zip(run.cells.itertuples(), doc["cells"], strict=True):
        assert (row.allocator, row.sort_buffer) == (cell["variant"]["allocator"], cell["variant"]["sort_buffer"])
        assert (row.threads, row.repeat, row.status, row.key) == (cell["threads"], cell["repeat"], "ok", cell["key"])
        assert row.qps == cell["summary"]["qps"] and row.tps == cell["summary"]["tps"]
        assert row.latency_p95_ms == cell["summary"]["latency_ms"]["p95"]
        assert row.minor_faults_per_txn == cell["resources"]["minor_faults_per_txn"]
        assert row.alloc_mmap_per_txn == cell["alloc"]["syscalls_per_txn"]["mmap"]
        assert row.stalls == len(cell["stalls"]) and row.settled and row.analyzed
        assert row.started_at == pd.Timestamp(cell["started_at"])
    first = run.cells.iloc[0]  # glibc, 2M, round 1: the recorded cell's QPS x 1.01
    assert (first.variant, first.qps) == ("allocator=glibc,sort_buffer=2M", pytest.approx(TINY_QPS * 1.01))
    by_buffer = run.cells.groupby("sort_buffer").qps.mean()
    assert by_buffer["32M"] < 0.8 * by_buffer["2M"]


def test_cells_and_seconds_equal_the_sql_views(matrix: Path):
    """The frames' CSV columns hold what cells_flat and seconds_flat (SQL json_extract over the
    tables, another implementation) hold, value for value."""
    run = perflab.open(matrix)
    with sqlite3.connect(matrix / "results.db") as db:
        flat = pd.read_sql("SELECT * FROM cells_flat ORDER BY id", db)
        seconds = pd.read_sql("SELECT * FROM seconds_flat ORDER BY cell_id, t", db)
    assert list(run.cells.columns[: len(flat.columns)]) == list(flat.columns)
    assert list(run.seconds.columns) == list(seconds.columns)
    for ours, theirs in ((run.cells[flat.columns], flat), (run.seconds, seconds)):
        assert [[plain(v) for v in row] for row in ours.itertuples(index=False)] == [
            [plain(v) for v in row] for row in theirs.itertuples(index=False)
        ]
    assert len(run.seconds) == sum(len(c["intervals"]) for c in document(matrix)["cells"]) > 12


def test_comparisons_are_the_reports_verdicts(matrix: Path):
    run = perflab.open(matrix)
    with Results(matrix) as results:
        meta, cells = summary.load(results)
    expected = compare.verdicts(meta, cells).comparisons  # what perflab report and compare judge
    assert len(run.comparisons) == len(expected) == len(document(matrix)["comparisons"]) > 0
    for row, c in zip(run.comparisons.itertuples(), expected, strict=True):
        assert (row.kind, row.metric, row.threads, row.verdict) == (c.kind, c.metric, c.threads, c.verdict)
        assert (row.allocator, row.sort_buffer) == (c.variant["allocator"], c.variant["sort_buffer"])
        assert row.baseline == variant_key(c.baseline) and row.method == c.method
        assert (row.ratio, row.ci_low, row.ci_high) == (c.ratio, c.ci_low, c.ci_high)
        assert plain(row.rounds_needed) == plain(c.rounds_needed) and row.evidence == c.to_dict()["evidence"]
    qps = run.comparisons[(run.comparisons.metric == "qps") & (run.comparisons.kind == "variant")]
    assert set(qps.baseline) == {"allocator=glibc,sort_buffer=2M"}
    slow = qps[qps.sort_buffer == "32M"]
    assert len(slow) == 2 and set(slow.verdict) == {"slower"} and (slow.ci_high < 0.8).all()
    assert slow.explanation.str.contains("mmap").all()  # why: the 32M buffers come from mmap


def test_groups_and_meta_are_the_exports(matrix: Path):
    with Results(matrix) as results:
        results.set_meta(design="sequential", design_reason="test: the reason")
    run = perflab.open(matrix)
    doc = document(matrix)
    assert run.format == doc["format"] == export.FORMAT and run.format_version == int(export.FORMAT.split("/")[1])
    assert run.meta["format"] == run.format and run.meta["design"] == "sequential"
    assert run.meta["design_reason"] == "test: the reason" and run.meta["status"] == doc["run"]["status"]
    assert run.meta["experiment"] == doc["experiment"] and run.meta["variance"] == doc["variance"]
    assert not set(run.meta) & {"cells", "groups", "comparisons", "run"}
    assert run.axes == {"allocator": "allocator", "sort_buffer": "sort_buffer"}
    assert list(run.groups.qps_mean) == [g["qps_mean"] for g in doc["groups"]]
    assert list(run.groups.cells) == [g["cells"] for g in doc["groups"]]
    base = run.groups[run.groups.baseline]
    assert list(base.variant) == ["allocator=glibc,sort_buffer=2M"] and base.ratio.iloc[0] == 1.0


def test_a_retry_takes_the_place_of_the_cell_it_measured_again(matrix: Path):
    with Results(matrix) as results:
        old = results.cells()[5]  # glibc, 32M, round 2
        intervals, rss = results.intervals(5), results.rss_samples(5)
        results.commit_cell({**old, "settled": False, "unsettled_reason": "drift"}, intervals, rss)
        retry = {**old, "id": 12, "key": old["key"] + "/retry-of-5", "retry_of": 5}
        results.commit_cell(retry, intervals, rss)
    cells = perflab.open(matrix).cells.set_index("id")
    assert cells.loc[12, "retry_of"] == 5 and cells.loc[12, "key"].endswith("/retry-of-5")
    assert not cells.loc[5, "settled"] and cells.loc[5, "unsettled_reason"] == "drift"
    assert (cells.loc[5, "analyzed"], cells.loc[12, "analyzed"]) == (False, True)
    assert cells.retry_of.isna().sum() == 12 and int(cells.analyzed.sum()) == 12
    groups = perflab.open(matrix).groups
    again = groups[groups.measured_again > 0]
    assert list(again.variant) == ["allocator=glibc,sort_buffer=32M"] and again.cells.iloc[0] == [1, 9, 12]


def test_design_fields_of_interleaved_cells(matrix: Path):
    with Results(matrix) as results:
        for cell in results.cells()[:4]:  # round 1 as one interleaved group
            design = {
                "name": "interleaved",
                "slice_s": 0.1,
                "group": [0, 1, 2, 3],
                "turn": 3 - cell["id"],
                "active_s": 3.5,
                "warning": None,
                "latency_spanned": 0.0007,
            }
            resources = {**cell["resources"], "idle_cpu_cores": 0.01}
            changed = {**cell, "design": design, "resources": resources}
            results.commit_cell(changed, results.intervals(cell["id"]), results.rss_samples(cell["id"]))
    cells = perflab.open(matrix).cells
    grouped = cells[cells.design == "interleaved"]
    assert list(grouped.id) == [0, 1, 2, 3] and list(grouped.design_turn) == [3, 2, 1, 0]
    assert grouped.design_group.iloc[2] == [0, 1, 2, 3] and set(grouped.design_slice_s) == {0.1}
    assert set(grouped.idle_cpu_cores) == {0.01} and set(grouped.design_latency_spanned) == {0.0007}
    rest = cells[cells.design.isna()]
    assert len(rest) == 8 and rest.design_turn.isna().all() and rest.idle_cpu_cores.isna().all()


def test_the_recorded_run_and_its_export_give_the_same_frames(tmp_path: Path):
    """The real tiny run, opened and read from `perflab export`'s JSON: the same frames."""
    copy = tmp_path / "tiny"
    shutil.copytree(DATA / "tiny", copy)
    run = perflab.open(copy)
    assert repr(run) == f"<perflab.api.Run {copy}: {export.FORMAT}, 6 cells, 2 comparisons>"
    assert run.cells.qps.iloc[0] == TINY_QPS and run.cells.allocator.tolist() == ["glibc", "jemalloc"] * 3
    done = perflab_cli("export", str(copy))
    assert done.returncode == 0, done.stderr
    exported = json.loads(done.stdout)
    again = api.from_export(exported)
    assert again.directory is None and again.format == run.format and again.meta == run.meta
    for name in api.FRAMES:
        pd.testing.assert_frame_equal(getattr(again, name), getattr(run, name))
    assert list(run.comparisons.verdict) == [c["verdict"] for c in exported["comparisons"]]
    assert list(run.comparisons.rounds_needed) == [c["rounds_needed"] for c in exported["comparisons"]]
    with pytest.raises(ResultsFormatError, match="perflab-results/9"):
        api.from_export({**exported, "format": "perflab-results/9"})


def test_dtypes_are_fixed_whatever_the_data(tmp_path: Path):
    """No [observe] alloc, no retries, no design: those columns are still float64, Int64, ..."""
    copy = tmp_path / "tiny"
    shutil.copytree(DATA / "tiny", copy)
    run = perflab.open(copy)
    cells = run.cells.dtypes
    assert cells["alloc_mmap_per_txn"] == "float64" and run.cells.alloc_mmap_per_txn.isna().all()
    assert (cells["id"], cells["retry_of"], cells["design_turn"]) == ("Int64", "Int64", "Int64")
    assert (cells["settled"], cells["analyzed"], cells["error"], cells["allocator"]) == (
        "boolean",
        "boolean",
        "string",
        "string",
    )
    assert str(cells["started_at"]).startswith("datetime64") and "UTC" in str(cells["started_at"])
    assert (run.seconds.dtypes["warmup"], run.seconds.dtypes["t"]) == ("boolean", "float64")
    comparisons = run.comparisons.dtypes
    assert (comparisons["rounds_needed"], comparisons["adjusted"], comparisons["unadjusted_ratio"]) == (
        "Int64",
        "boolean",
        "float64",
    )
    assert run.groups.dtypes["baseline"] == "boolean" and run.groups.dtypes["memory"] == "string"


def test_an_axis_named_like_a_column_gets_its_own_in_every_frame(tmp_path: Path):
    directory = build_matrix(tmp_path / "odd", {"build": ["glibc", "jemalloc"], "design": ["2M", "32M"]})
    run = perflab.open(directory)
    assert run.axes == {"build": "build", "design": "axis_design"}  # `build`: as in the CSVs
    assert list(run.cells.columns[3:5]) == ["build", "axis_design"] and run.cells.design.isna().all()
    assert set(run.cells.axis_design) == {"2M", "32M"} and set(run.seconds.axis_design) == {"2M", "32M"}
    assert set(run.comparisons.axis_design) == {"2M", "32M"} and "axis_design" in run.groups


def test_importing_perflab_does_not_import_pandas():
    """The CLI starts without pandas: only perflab.open imports it."""
    code = "import sys, perflab, perflab.cli; print('pandas' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "False"


def test_docs_name_the_format_and_every_column(matrix: Path):
    """docs/api.md is the contract: it names this format and every fixed column of every frame."""
    text = DOC.read_text(encoding="utf-8")
    assert f"`{export.FORMAT}`" in text
    run = perflab.open(matrix)
    documented = set(re.findall(r"`([a-z0-9_]+)`", text))
    for name in api.FRAMES:
        fixed = [c for c in getattr(run, name).columns if c not in run.axes.values()]
        assert set(fixed) <= documented, (name, sorted(set(fixed) - documented))
    assert set(csv_export.COMPARISON_COLUMNS) <= set(run.comparisons.columns)
