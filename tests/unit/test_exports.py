"""Exports for users' tools: the CSVs (one column per axis, per-second, comparisons), the SQL
views in results.db (queried with plain sqlite3 and checked against the JSON export), and
`perflab report --format json`.

The two-axis results directory is built from the recorded tiny run (tests/data/report/tiny):
every cell is a real stored cell with its variant, figures and per-second series changed, so
sort_buffer=32M is about 0.7x as fast, as it is on this machine for glibc (issue 11)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from perflab.analyze import compare, summary
from perflab.report import csv_export, export
from perflab.store import views
from perflab.store.results import Results
from perflab.store.schema import SCHEMA_VERSION
from perflab.variants import variant_key
from tests.conftest import perflab

DATA = Path(__file__).resolve().parent.parent / "data" / "report"
AXES = {"allocator": ["glibc", "jemalloc"], "sort_buffer": ["2M", "32M"]}
SPEED = {("glibc", "2M"): 1.0, ("jemalloc", "2M"): 1.01, ("glibc", "32M"): 0.69, ("jemalloc", "32M"): 0.75}


def build_matrix(directory: Path, axes: dict[str, list[str]] = AXES, scale: float = 1.0) -> Path:
    """A complete 2 x 2 x 3-repeat results directory cloned from the recorded tiny cells, every
    variant's QPS times `scale` (a second run, slower or faster)."""
    copy = directory.parent / f"{directory.name}-template"
    shutil.copytree(DATA / "tiny", copy)
    with Results(copy) as tiny:
        meta, template = tiny.meta(), tiny.cells()[0]
        intervals = tiny.intervals(template["id"])
        rss = tiny.rss_samples(template["id"])
    names = list(axes)
    with Results(directory, create=True) as results:
        results.set_meta(**{**meta, "experiment": {**meta["experiment"], "axes": axes}, "cell_count": 12})
        cid = 0
        for repeat in (1, 2, 3):
            for first in axes[names[0]]:
                for second in axes[names[1]]:
                    factor = SPEED[(first, second)] * (1 + 0.01 * repeat) * scale
                    variant = {names[0]: first, names[1]: second}
                    cell = _clone(template, cid, variant, repeat, factor)
                    scaled = [{**iv, "qps": iv["qps"] * factor, "tps": iv["tps"] * factor} for iv in intervals]
                    results.commit_cell(cell, scaled, rss)
                    cid += 1
    return directory


def _clone(template: dict, cid: int, variant: dict, repeat: int, factor: float) -> dict:
    figures = dict(template["summary"])
    figures.update(qps=figures["qps"] * factor, tps=figures["tps"] * factor)
    figures["latency_ms"] = {k: v / factor for k, v in figures["latency_ms"].items()}
    key = ",".join(f"{a}={lbl}" for a, lbl in variant.items()) + f"/t2/r{repeat}"
    stalls = [{"start_s": 1, "end_s": 2, "min_qps": 10.0, "kind": "low"}] if cid == 5 else []
    big = "32M" in variant.values()
    resources = {**template["resources"], "minor_faults_per_txn": 64.0 if big else 0.0}
    alloc = {  # as [observe] alloc stores it: the 32M sort buffers come from mmap, per query
        "calls_per_txn": {"malloc": 12.0, "calloc": 0.0, "realloc": 1.0, "free": 13.0, "memalign": 0.0, "new": 4.0,
                          "delete": 4.0},
        "bytes_per_txn": 33554432.0 if big else 2097152.0,
        "syscalls_per_txn": {"mmap": 1.0 if big else 0.0, "munmap": 1.0 if big else 0.0, "mprotect": 0.0,
                             "madvise": 0.0, "brk": 0.0},
        "by_size_class": [],
    }  # fmt: skip
    return {
        **template,
        "id": cid,
        "key": key,
        "variant": variant,
        "repeat": repeat,
        "summary": figures,
        "stalls": stalls,
        "resources": resources,
        "error": None,
        "alloc": alloc,
    }


@pytest.fixture()
def matrix(tmp_path: Path) -> Path:
    return build_matrix(tmp_path / "matrix")


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def as_csv(value: object) -> str:
    """How csv.writer writes a value read back from SQLite."""
    return "" if value is None else str(value)


def test_cells_csv_has_one_column_per_axis(matrix: Path):
    with Results(matrix) as results:
        table = rows(csv_export.cells_csv(results))
        doc = export.document(results)
    header = list(table[0])
    assert header[:5] == ["id", "order", "variant", "allocator", "sort_buffer"]
    assert len(table) == 12
    for row, cell in zip(table, doc["cells"], strict=True):
        assert (row["allocator"], row["sort_buffer"]) == (cell["variant"]["allocator"], cell["variant"]["sort_buffer"])
        assert row["variant"] == f"allocator={row['allocator']},sort_buffer={row['sort_buffer']}"
        assert float(row["qps"]) == cell["summary"]["qps"]
        assert float(row["other_cpu_cores"]) == cell["resources"]["other_cpu_cores"]
        assert int(row["stalls"]) == len(cell["stalls"])
    # grouped by one axis, as a pandas user would: 32M is slower for both allocators
    by = {}
    for row in table:
        by.setdefault(row["sort_buffer"], []).append(float(row["qps"]))
    assert sum(by["32M"]) / 6 < 0.8 * sum(by["2M"]) / 6


def test_seconds_csv_carries_every_interval_with_axes(matrix: Path):
    with Results(matrix) as results:
        table = rows(csv_export.seconds_csv(results))
        doc = export.document(results)
    expected = [(c["id"], iv["t"], iv["qps"], int(iv["warmup"])) for c in doc["cells"] for iv in c["intervals"]]
    found = [(int(r["cell_id"]), float(r["t"]), float(r["qps"]), int(r["warmup"])) for r in table]
    assert found == expected and len(found) > 12
    assert {r["sort_buffer"] for r in table} == {"2M", "32M"} and "threads" in table[0]


def test_comparisons_csv_equals_the_json_comparisons(matrix: Path):
    with Results(matrix) as results:
        table = rows(csv_export.comparisons_csv(results))
        doc = export.document(results)
    assert len(table) == len(doc["comparisons"]) > 0
    for row, c in zip(table, doc["comparisons"], strict=True):
        assert (row["kind"], row["metric"], int(row["threads"])) == (c["kind"], c["metric"], c["threads"])
        assert (row["allocator"], row["sort_buffer"]) == (c["variant"]["allocator"], c["variant"]["sort_buffer"])
        assert row["baseline"] == variant_key(c["baseline"])
        assert float(row["ratio"]) == pytest.approx(c["ratio"]) and row["verdict"] == (c["verdict"] or "")
    slow = [r for r in table if r["metric"] == "qps" and r["kind"] == "variant" and r["sort_buffer"] == "32M"]
    assert slow and all(r["verdict"] == "slower" for r in slow)


def query(directory: Path, sql: str) -> list[sqlite3.Row]:
    """Read results.db as a user's script would: plain sqlite3, no perflab code."""
    db = sqlite3.connect(directory / "results.db")
    db.row_factory = sqlite3.Row
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def test_views_equal_the_csv_and_the_json_export(matrix: Path):
    with Results(matrix) as results:
        cells_csv, seconds_csv = csv_export.cells_csv(results), csv_export.seconds_csv(results)
        doc = export.document(results)
    flat = query(matrix, "SELECT * FROM cells_flat ORDER BY id")
    assert [list(r.keys()) for r in flat[:1]] == [list(rows(cells_csv)[0])]
    for row, line in zip(flat, rows(cells_csv), strict=True):
        assert {k: as_csv(v) for k, v in dict(row).items()} == line
    for row, cell in zip(flat, doc["cells"], strict=True):
        assert row["allocator"] == cell["variant"]["allocator"] and row["qps"] == cell["summary"]["qps"]
        assert row["latency_p95_ms"] == cell["summary"]["latency_ms"]["p95"]
        assert row["minor_faults_per_txn"] == cell["resources"]["minor_faults_per_txn"]
    seconds = query(matrix, "SELECT * FROM seconds_flat ORDER BY cell_id, t")
    assert [{k: as_csv(v) for k, v in dict(r).items()} for r in seconds] == rows(seconds_csv)
    (stall,) = query(matrix, "SELECT * FROM stalls_flat")
    assert (stall["cell_id"], stall["start_s"], stall["kind"]) == (5, 1, "low") and stall["sort_buffer"] == "32M"
    assert len(query(matrix, "SELECT * FROM rss_flat")) == sum(len(c["rss_samples"]) for c in doc["cells"])


def test_views_group_by_axis_in_sql(matrix: Path):
    got = query(matrix, "SELECT sort_buffer, avg(minor_faults_per_txn) AS f FROM cells_flat GROUP BY 1 ORDER BY 1")
    assert [(r["sort_buffer"], r["f"]) for r in got] == [("2M", 0.0), ("32M", 64.0)]
    mmap = query(matrix, "SELECT sort_buffer, avg(alloc_mmap_per_txn) AS m, max(alloc_bytes_per_txn) AS b"
                         " FROM cells_flat GROUP BY 1 ORDER BY 1")  # fmt: skip
    assert [(r["sort_buffer"], r["m"], r["b"]) for r in mmap] == [("2M", 0.0, 2097152.0), ("32M", 1.0, 33554432.0)]


def test_views_are_created_once_and_kept_out_of_the_schema_version(matrix: Path):
    names = {r["name"] for r in query(matrix, "SELECT name FROM sqlite_master WHERE type = 'view'")}
    assert names == {"cells_flat", "seconds_flat", "stalls_flat", "rss_flat"}
    with Results(matrix) as results:
        assert views.refresh(results.db, list(AXES)) is False  # same definition: nothing written
        assert results.meta()["schema_version"] == SCHEMA_VERSION
        results.db.execute("DROP VIEW cells_flat")
    with Results(matrix) as results:  # opening restores what is missing
        assert results.db.execute("SELECT count(*) FROM cells_flat").fetchone()[0] == 12


def test_views_of_an_existing_directory_without_them(tmp_path: Path):
    copy = tmp_path / "tiny"
    shutil.copytree(DATA / "tiny", copy)
    assert query(copy, "SELECT name FROM sqlite_master WHERE type = 'view'") == []  # recorded before views
    with Results(copy):
        pass
    assert [r["allocator"] for r in query(copy, "SELECT allocator FROM cells_flat ORDER BY id")][:2] == [
        "glibc",
        "jemalloc",
    ]


def test_axis_columns_never_collide():
    assert views.axis_columns(["allocator", "sort_buffer"]) == {"allocator": "allocator", "sort_buffer": "sort_buffer"}
    cols = views.axis_columns(["threads", "QPS", "a", "A", "axis_threads"])
    assert cols["threads"] == "axis_threads" and cols["QPS"] == "axis_QPS" and cols["a"] == "a"
    assert len({c.lower() for c in cols.values()}) == 5


def test_an_axis_named_like_a_column_gets_its_own(tmp_path: Path):
    directory = build_matrix(tmp_path / "odd", {"threads": ["glibc", "jemalloc"], "qps": ["2M", "32M"]})
    flat = query(directory, "SELECT threads, axis_threads, axis_qps, qps FROM cells_flat ORDER BY id")
    assert (flat[0]["threads"], flat[0]["axis_threads"], flat[0]["axis_qps"]) == (2, "glibc", "2M")
    with Results(directory) as results:
        header = list(rows(csv_export.cells_csv(results))[0])
    assert header[3:5] == ["axis_threads", "axis_qps"]


def test_report_json_holds_the_tables_and_findings(matrix: Path):
    with Results(matrix) as results:
        meta, cells = summary.load(results)
    doc = export.report_document(meta, cells, ["sort_buffer=32M"])
    assert doc["format"] == "perflab-report/1" and doc["baseline"] == {"allocator": "glibc", "sort_buffer": "32M"}
    assert len(doc["groups"]) == 4 and sum(g["baseline"] for g in doc["groups"]) == 1
    fast = [c for c in doc["comparisons"] if c["metric"] == "qps" and c["variant"]["sort_buffer"] == "2M"]
    assert fast and all(c["verdict"] == "faster" for c in fast if c["kind"] == "variant")
    expected = compare.verdicts(meta, cells, ["sort_buffer=32M"]).comparisons
    assert [c["ratio"] for c in doc["comparisons"]] == [c.ratio for c in expected]
    assert any(f["kind"] == "stall" for f in doc["findings"])
    json.dumps(doc)  # serialisable as it is


def test_cli_export_formats(matrix: Path):
    for fmt, first in (
        ("csv", "id,order,variant,allocator,sort_buffer"),
        ("seconds-csv", "cell_id,variant,allocator"),
        ("comparisons-csv", "kind,metric,threads,axis,variant,allocator"),
    ):
        done = perflab("export", str(matrix), "--format", fmt)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(first) and done.stdout.endswith("\n") and not done.stdout.endswith("\n\n")
    bad = perflab("export", str(matrix), "--format", "xlsx")
    assert bad.returncode == 2 and "seconds-csv" in bad.stderr


def test_views_refresh_while_another_process_writes(matrix: Path):
    """Another connection holds the write lock and commits while the views are refreshed (a run and
    `perflab export` opening the same directory): the refresh waits for it, never 'database is locked'
    (a deferred transaction's read snapshot goes stale when the other commits: CI, 2026-11-28)."""
    import threading
    import time

    with Results(matrix) as results:
        results.db.execute("DROP VIEW cells_flat")
    other = sqlite3.connect(matrix / "results.db", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('note', '1')")

    def commit_later() -> None:
        time.sleep(0.5)
        other.execute("COMMIT")

    writer = threading.Thread(target=commit_later)
    writer.start()
    try:
        with Results(matrix) as results:  # opening refreshes the views
            assert results.db.execute("SELECT count(*) FROM cells_flat").fetchone()[0] == 12
            assert results.meta()["note"] == 1
    finally:
        writer.join()
        other.close()
