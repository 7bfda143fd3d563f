"""perflab run against a real mariadbd and sysbench: a tiny matrix, end to end."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

from tests.conftest import perflab
from tests.integration.helpers import perflab_children, write_experiment

WARMUP, DURATION = 1, 3

MATRIX = f"""
[experiment]
name = "it-matrix"
duration = "{DURATION}s"
warmup = "{WARMUP}s"
repeats = 2

[dataset]
tables = 1
table_size = 2000

[workload]
test = "oltp_read_only"
threads = [1, 2]
options = {{ range_size = 100, rand_type = "uniform" }}

[variants.allocator]
glibc    = {{}}
jemalloc = {{ preload = "jemalloc" }}
glibc-nommap = {{ env = {{ MALLOC_MMAP_MAX_ = "0" }} }}

[variants.sort_buffer]
"2M" = {{ server_options = {{ sort_buffer_size = "2M" }} }}
"""


@pytest.fixture(scope="module")
def matrix_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    tmp = tmp_path_factory.mktemp("matrix")
    spec = write_experiment(tmp / "matrix.toml", MATRIX)
    out = tmp / "results"
    done = perflab("run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = perflab("export", str(out), "--format", "json")
    assert exported.returncode == 0, exported.stderr
    return out, json.loads(exported.stdout), done.stdout + done.stderr


def test_export_has_every_cell_in_interleaved_order(matrix_run):
    _, doc, _ = matrix_run
    assert doc["format"] == "perflab-results/3"
    cells = doc["cells"]
    assert len(cells) == 3 * 2 * 2  # allocators x threads x repeats
    assert all(c["status"] == "ok" for c in cells), [c["error"] for c in cells]
    assert [c["order"] for c in cells] == list(range(len(cells)))
    # repeat 1 of every variant and thread count runs before any repeat 2
    repeats = [c["repeat"] for c in cells]
    assert repeats == sorted(repeats)
    first = [c["variant"]["allocator"] for c in cells[:3]]
    assert first == ["glibc", "jemalloc", "glibc-nommap"]


def test_allocator_is_really_mapped_and_versioned(matrix_run):
    _, doc, _ = matrix_run
    for cell in doc["cells"]:
        if cell["variant"]["allocator"] == "jemalloc":
            assert "libjemalloc.so" in cell["allocator_library"]
            assert cell["allocator_version"].startswith("libjemalloc2 ")
        else:
            assert os.path.basename(cell["allocator_library"]).startswith("libc.so")
            assert cell["allocator_version"].startswith("glibc 2.")
    nommap = [c for c in doc["cells"] if c["variant"]["allocator"] == "glibc-nommap"]
    assert all(c["env"] == {"MALLOC_MMAP_MAX_": "0"} for c in nommap)
    assert all(c["server_options"]["sort_buffer_size"] == "2M" for c in doc["cells"])


def summary_qps(cell: dict) -> float:
    return cell["summary"]["qps"]


def test_intervals_summary_and_warmup_agree(matrix_run):
    _, doc, _ = matrix_run
    for cell in doc["cells"]:
        intervals = cell["intervals"]
        warm = [iv for iv in intervals if iv["warmup"]]
        steady = [iv for iv in intervals if not iv["warmup"]]
        assert len(warm) == WARMUP
        # sysbench may end a run just before printing its last per-second line
        assert DURATION - 1 <= len(steady) <= DURATION
        assert cell["window_start_s"] == WARMUP
        # the detected warm-up: MSER on the whole series, in whole reported seconds
        if len(intervals) >= 4:
            assert cell["warmup_method"] == "mser-1" and cell["warmup_s"] in {iv["t"] for iv in intervals} | {0.0}
        else:  # too short to judge: said, not flagged
            assert cell["warmup_method"] == "none" and cell["warmup_s"] is None and cell["settled"]
        assert isinstance(cell["settled"], bool) and isinstance(cell["stalls"], list)
        assert cell["steady"]["qps_mean"] == summary_qps(cell)
        assert all(iv["t"] <= WARMUP for iv in warm) and all(iv["t"] > WARMUP for iv in steady)
        summary = cell["summary"]
        # the checkpoint reset sysbench's counters: the summary covers the window, not the warm-up
        assert summary["total_time_s"] == pytest.approx(DURATION, abs=0.25)
        assert summary["tps"] * summary["total_time_s"] == pytest.approx(summary["transactions"], rel=0.01)
        # oltp_read_only with default query counts: 10 point + 4 range selects + BEGIN/COMMIT
        assert summary["qps"] / summary["tps"] == pytest.approx(16, rel=0.01)
        assert all(iv["qps"] / iv["tps"] == pytest.approx(16, rel=0.02) for iv in intervals if iv["tps"])
        lat = summary["latency_ms"]
        assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]


def test_resources_are_measured(matrix_run):
    _, doc, _ = matrix_run
    for cell in doc["cells"]:
        res = cell["resources"]
        assert res["rss_end_bytes"] > 50 * 2**20  # mariadbd with a buffer pool is not tiny
        assert res["rss_peak_bytes"] >= res["rss_end_bytes"]
        assert len(cell["rss_samples"]) >= DURATION
        assert res["server_cpu_s"] > 0.1 and res["client_cpu_s"] > 0.05
        assert res["server_cpu_s"] == pytest.approx(res["server_user_s"] + res["server_sys_s"], abs=0.002)
        assert res["minor_faults_per_txn"] >= 0 and res["ctx_switches_per_txn"] > 0
        txn = cell["summary"]["transactions"]
        assert res["server_cpu_us_per_txn"] == pytest.approx(res["server_cpu_s"] * 1e6 / txn, rel=0.01)
        # the harness sleeps during the window: far below 5% of one core
        assert res["harness_cpu_s"] < 0.05 * DURATION


def test_effective_sysbench_options_include_defaults(matrix_run):
    _, doc, _ = matrix_run
    opts = doc["cells"][0]["sysbench_options"]
    assert opts["rand_type"] == "uniform" and opts["range_size"] == "100"
    assert opts["point_selects"] == "10"  # a default nobody passed, recorded anyway
    assert opts["threads"] in ("1", "2")


def test_host_metadata(matrix_run):
    _, doc, _ = matrix_run
    host = doc["host"]
    assert host["cores"] >= 1 and host["glibc"].startswith("glibc")
    assert "MariaDB" in host["mariadbd"] and host["sysbench"].startswith("sysbench")
    assert doc["run"]["status"] == "complete"


def test_report_and_csv(matrix_run):
    out, doc, run_output = matrix_run
    assert "6 cells" not in run_output and "12 cells" in run_output  # matrix size shown first
    report = perflab("report", str(out))
    assert report.returncode == 0, report.stderr
    for label in ("glibc", "jemalloc", "glibc-nommap", "threads = 1", "threads = 2", "baseline"):
        assert label in report.stdout
    rows = list(csv.DictReader(io.StringIO(perflab("export", str(out), "--format", "csv").stdout)))
    assert len(rows) == len(doc["cells"])
    assert float(rows[0]["qps"]) == doc["cells"][0]["summary"]["qps"]


def test_logs_are_kept(matrix_run):
    out, doc, _ = matrix_run
    for cell in doc["cells"]:
        logs = out / "logs" / f"cell-{cell['id']:04d}"
        assert "SQL statistics" in (logs / "sysbench.txt").read_text()
        assert "ready for connections" in (logs / "error.log").read_text()
        assert "sort_buffer_size=2M" in (logs / "my.cnf").read_text()


def test_no_process_or_workdir_left(matrix_run):
    out, doc, _ = matrix_run
    assert perflab_children(doc["run"]["workdir"]) == []
    workdir = Path(doc["run"]["workdir"])
    assert workdir.parent == Path("/dev/shm") and not workdir.exists()
