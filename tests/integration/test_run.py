"""perflab run against a real mariadbd and sysbench: a tiny matrix, end to end."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import json
import os
import platform
import re
from pathlib import Path

import pytest

from perflab import __version__ as perflab_version
from perflab import spec
from tests.conftest import perflab
from tests.integration.helpers import perflab_children, runs_tmpfs, write_experiment

WARMUP, DURATION = 1, 3

MATRIX = f"""
[experiment]
design = "sequential"  # what this test checks runs one server at a time
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
    spec = write_experiment(tmp / "matrix.toml", MATRIX, pace=None)  # a closed loop: Little's law below
    out = tmp / "results"
    done = perflab("run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = perflab("export", str(out), "--format", "json")
    assert exported.returncode == 0, exported.stderr
    return out, json.loads(exported.stdout), done.stdout + done.stderr


def test_export_has_every_cell_in_randomized_blocks(matrix_run):
    _, doc, output = matrix_run
    assert doc["format"] == "perflab-results/10"
    cells = doc["cells"]
    # allocators x threads x repeats (an unsettled cell is measured again in its round: retry_of)
    assert len([c for c in cells if c["retry_of"] is None]) == 3 * 2 * 2
    assert all(c["status"] == "ok" for c in cells), [c["error"] for c in cells]
    assert [c["order"] for c in cells] == list(range(len(cells)))
    # repeat 1 of every variant and thread count runs before any repeat 2, in the seed's order
    repeats = [c["repeat"] for c in cells]
    assert repeats == sorted(repeats)
    seed = doc["run"]["seed"]
    assert isinstance(seed, int) and f"seed {seed} (perflab run --seed {seed} runs this order again)" in output
    exp = dataclasses.replace(spec.parse(MATRIX), seed=seed)
    assert [c["key"] for c in cells if c["retry_of"] is None] == [c.key for c in exp.cells()]
    by_id = {c["id"]: c for c in cells}
    for retry in (c for c in cells if c["retry_of"] is not None):  # in its round, after the cell it replaces
        old = by_id[retry["retry_of"]]
        assert retry["key"] == f"{old['key']}/retry-of-{old['id']}" and retry["repeat"] == old["repeat"], retry["key"]
        assert old["settled"] is False and retry["id"] > old["id"]


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
        # settled, or unsettled with the reason said
        assert cell["settled"] is (cell["unsettled_reason"] is None)
        assert all(iv["t"] <= WARMUP for iv in warm) and all(iv["t"] > WARMUP for iv in steady)
        assert [iv["t"] for iv in intervals] == list(range(1, len(intervals) + 1))  # one report a second
        summary = cell["summary"]
        # the checkpoint reset sysbench's counters: the summary covers the window, not the warm-up
        assert summary["total_time_s"] == pytest.approx(DURATION, abs=0.25)
        assert summary["tps"] * summary["total_time_s"] == pytest.approx(summary["transactions"], rel=0.01)
        assert summary["qps"] * summary["total_time_s"] == pytest.approx(summary["queries"], rel=0.01)
        # the window's per-second reports add up to the summary; when sysbench ended before its last
        # line, what that second held is the rest: none below zero, and no more than a busy machine's
        # seconds vary (ci15: 2,315 against 1,130 a second before it, with two other workers)
        reported = sum(iv["tps"] for iv in steady)
        if len(steady) == DURATION:
            assert summary["transactions"] == pytest.approx(reported, rel=0.05)
        else:
            rest = summary["transactions"] - reported
            assert -0.05 * reported <= rest <= 4 * max(iv["tps"] for iv in steady), (rest, steady)
        # oltp_read_only with default query counts: 10 point + 4 range selects + BEGIN/COMMIT
        assert summary["qps"] / summary["tps"] == pytest.approx(16, rel=0.01)
        assert summary["errors_per_s"] == 0 and summary["reconnects"] == 0
        for iv in intervals:
            assert iv["tps"] > 0 and iv["qps"] / iv["tps"] == pytest.approx(16, rel=0.02)
            assert iv["writes"] == 0 and iv["reads"] + iv["other"] == pytest.approx(iv["qps"], abs=0.05)
            assert iv["other"] == pytest.approx(2 * iv["tps"], rel=0.02)  # BEGIN + COMMIT
            assert iv["errors_per_s"] == 0 and iv["reconnects_per_s"] == 0
            # sysbench resets its histogram at the checkpoint, racing with that second's report:
            # the warm-up's last second may read p95 = 0.00 (sysbench 1.0.20)
            assert iv["p95_ms"] > 0 or iv["t"] == WARMUP, iv
        lat = summary["latency_ms"]
        assert 0 < lat["min"] <= lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
        assert lat["min"] <= lat["avg"] <= lat["max"]
        # a closed loop: each client thread runs one transaction after another (Little's law)
        assert lat["avg"] == pytest.approx(1000 * cell["threads"] / summary["tps"], rel=0.2)


def test_steady_state_fields_have_sane_values(matrix_run):
    _, doc, _ = matrix_run
    for cell in doc["cells"]:
        steady = cell["steady"]
        window = [iv["qps"] for iv in cell["intervals"] if not iv["warmup"]]
        assert steady["qps_mean"] == summary_qps(cell)
        assert steady["seconds"] == len(window) and steady["batch_s"] == 1  # < 20 s: 1-second batches
        if len(window) == DURATION:  # every second reported: the window's mean lies among them
            assert min(window) <= steady["qps_mean"] * 1.05 and steady["qps_mean"] <= max(window) * 1.05
        if len(window) >= 3:  # an interval needs 3 batches
            assert steady["qps_ci_low"] < steady["qps_mean"] < steady["qps_ci_high"]
        else:
            assert steady["qps_ci_low"] is None and steady["qps_ci_high"] is None
        mean = sum(window) / len(window)
        sd = (sum((q - mean) ** 2 for q in window) / (len(window) - 1)) ** 0.5
        assert steady["cv"] == pytest.approx(sd / mean, rel=1e-6)
        assert steady["drift"] is None or abs(steady["drift"]) > 0.03  # reported only beyond 3%
        threshold = doc["experiment"]["stall_threshold"]
        last, fastest = cell["intervals"][-1]["t"], max(iv["qps"] for iv in cell["intervals"])
        for stall in cell["stalls"]:
            assert 0 <= stall["start_s"] < stall["end_s"] <= last and stall["kind"] in ("low", "no-report")
            low = [iv["qps"] for iv in cell["intervals"] if stall["start_s"] < iv["t"] <= stall["end_s"]]
            if stall["kind"] == "low":  # every second in it below the threshold, its minimum among them
                assert stall["min_qps"] == min(low) and max(low) < threshold * fastest


def test_resources_are_measured(matrix_run):
    _, doc, _ = matrix_run
    cores = os.cpu_count()
    for cell in doc["cells"]:
        res = cell["resources"]
        assert res["rss_end_bytes"] > 50 * 2**20  # mariadbd with a buffer pool is not tiny
        samples = cell["rss_samples"]
        assert len(samples) >= DURATION and all(s["rss_bytes"] > 50 * 2**20 for s in samples)
        times = [s["t"] for s in samples]  # every second of the window, from its start, and its end
        assert times == sorted(times) and times[0] < 0.5 and DURATION - 0.5 < times[-1] < DURATION + 2
        assert res["rss_end_bytes"] == samples[-1]["rss_bytes"]
        assert res["rss_peak_bytes"] == max(s["rss_bytes"] for s in samples) >= res["rss_end_bytes"]
        # CPU over the window: something, and no more than the machine has
        assert 0.1 < res["server_cpu_s"] <= cores * DURATION * 1.1
        assert 0.05 < res["client_cpu_s"] <= cores * (WARMUP + DURATION) * 1.1
        assert res["server_cpu_s"] == pytest.approx(res["server_user_s"] + res["server_sys_s"], abs=0.002)
        assert res["client_cpu_s"] == pytest.approx(res["client_user_s"] + res["client_sys_s"], abs=0.002)
        # per transaction over the transactions the counters cover: all of them, or when perflab read
        # them more than 1% of the window late, the share of the window left (accounting.WindowStart.covered)
        late = res["window_start_late_s"]
        assert late is not None and 0 <= late < DURATION, late
        txn = cell["summary"]["transactions"] * ((DURATION - late) / DURATION if late > 0.01 * DURATION else 1)
        counts = ("minor_faults", "major_faults", "voluntary_ctx_switches", "involuntary_ctx_switches")
        assert all(isinstance(res[k], int) and res[k] >= 0 for k in counts)
        # a client over a socket: the server's threads wait for it (how often depends on the load)
        assert res["voluntary_ctx_switches"] > 0
        assert res["minor_faults_per_txn"] == pytest.approx(res["minor_faults"] / txn, abs=1e-4, rel=1e-3)
        assert res["major_faults_per_txn"] == pytest.approx(res["major_faults"] / txn, abs=1e-4, rel=1e-3)
        switches = res["voluntary_ctx_switches"] + res["involuntary_ctx_switches"]
        assert res["ctx_switches_per_txn"] == pytest.approx(switches / txn, abs=1e-4, rel=1e-3)
        assert res["server_cpu_us_per_txn"] == pytest.approx(res["server_cpu_s"] * 1e6 / txn, rel=0.01)
        # the harness sleeps during the window: far below 5% of one core
        assert 0 <= res["harness_cpu_s"] < 0.05 * DURATION
        # no [observe] perf/pmp: at most a stray millisecond of some short child reaped in the window
        assert 0 <= res["profiler_cpu_s"] <= 0.01
        assert 0 <= res["other_cpu_cores"] <= cores
        assert 0 <= res["steal_cpu_cores"] <= cores  # the hypervisor's other guests (0 on bare metal)
        assert 0 < res["restore_s"] < 30  # copying a 1-table dataset on tmpfs


def test_effective_sysbench_options_include_defaults(matrix_run):
    _, doc, _ = matrix_run
    for cell in doc["cells"]:
        opts = cell["sysbench_options"]
        assert opts["rand_type"] == "uniform" and opts["range_size"] == "100"
        assert opts["point_selects"] == "10"  # a default nobody passed, recorded anyway
        assert opts["threads"] == str(cell["threads"])
        assert opts["time"] == str(WARMUP + DURATION) and opts["report_checkpoints"] == str(WARMUP)
        assert opts["tables"] == "1" and opts["table_size"] == "2000"
        assert opts["report_interval"] == "1" and opts["histogram"] == "on" and opts["percentile"] == "95"


def cpu_list(cpus: list[int]) -> str:
    """/proc's Cpus_allowed_list notation: 0-1,4"""
    runs: list[list[int]] = []
    for cpu in cpus:
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def test_cell_metadata(matrix_run):
    _, doc, _ = matrix_run
    cores = sorted(os.sched_getaffinity(0))
    for cell in doc["cells"]:
        started, ended = dt.datetime.fromisoformat(cell["started_at"]), dt.datetime.fromisoformat(cell["ended_at"])
        assert WARMUP + DURATION - 1 <= (ended - started).total_seconds() < 60  # stamps in whole seconds
        assert cell["preload"] == ("jemalloc" if cell["variant"]["allocator"] == "jemalloc" else None)
        assert Path(cell["allocator_library"]).is_file()
        assert cell["pinning"] == {"server_cpus": None, "client_cpus": None, "server_cpus_allowed": cpu_list(cores)}
        assert cell["error"] is None and cell["log_tail"] is None and cell["backtrace"] is None
    ordered = [dt.datetime.fromisoformat(c["started_at"]) for c in doc["cells"]]
    assert ordered == sorted(ordered)  # run one after another, in the stored order


def test_host_and_run_metadata(matrix_run):
    _, doc, _ = matrix_run
    host = doc["host"]
    assert host["cores"] == os.cpu_count() and host["kernel"] == os.uname().release
    assert host["machine"] == os.uname().machine and host["hostname"] == os.uname().nodename
    assert host["glibc"] == os.confstr("CS_GNU_LIBC_VERSION") and host["python"] == platform.python_version()
    assert host["memory_bytes"] == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert "MariaDB" in host["mariadbd"] and host["sysbench"].startswith("sysbench 1.")
    assert host["perflab"] == perflab_version
    run = doc["run"]
    # the matrix's 12 cells, and any retry of an unsettled one (retry_of) beside them
    firsts = [c for c in doc["cells"] if c["retry_of"] is None]
    assert run["status"] == "complete" and run["cell_count"] == len(firsts) == 12
    assert run["perflab_version"] == perflab_version
    started, ended = dt.datetime.fromisoformat(run["started_at"]), dt.datetime.fromisoformat(run["ended_at"])
    assert started <= dt.datetime.fromisoformat(doc["cells"][0]["started_at"])
    assert dt.datetime.fromisoformat(doc["cells"][-1]["ended_at"]) <= ended
    dataset = doc["dataset"]
    assert 100_000 < dataset["data_bytes"] < 10 * 2**20  # 2000 rows of sbtest1
    assert 0 < dataset["prepare_s"] < 120 and dataset["buffer_pool"] == "256M"  # the 256M floor


def test_groups_and_comparisons_match_the_cells(matrix_run):
    _, doc, _ = matrix_run
    by_id = {c["id"]: c for c in doc["cells"]}
    assert len(doc["groups"]) == 3 * 2  # variants x thread counts
    for group in doc["groups"]:
        mine = [c for c in doc["cells"] if c["variant"] == group["variant"] and c["threads"] == group["threads"]]
        # an unsettled cell is measured again in its round: its retry counts in its place (measured_again)
        replaced = [c for c in mine if c["id"] in {r["retry_of"] for r in mine}]
        used = [c for c in mine if c not in replaced]
        settled = [c for c in used if c["settled"]]  # unsettled cells are left out, and counted
        assert len(used) == 2 and group["failed"] == 0 and group["unsettled"] == len(used) - len(settled)
        assert group["measured_again"] == len(replaced), group
        assert sorted(group["cells"]) == sorted(c["id"] for c in settled) and group["repeats"] == len(settled)
        if settled:
            assert group["qps_mean"] == pytest.approx(sum(summary_qps(by_id[i]) for i in group["cells"]) / len(settled))
        assert group["qps_ci_low"] is None and group["qps_ci_high"] is None  # fewer than 3 repeats: no interval
        assert group["baseline"] is (group["variant"]["allocator"] == "glibc")
    assert doc["comparisons"], "every variant is compared with the baseline"
    for row in doc["comparisons"]:  # said, not guessed
        assert row["n_baseline"] <= 2 and row["n_variant"] <= 2
        if row["pairs"] == 2:  # paired from 2 rounds that hold both (analyze/ratio.MIN_PAIRS)
            assert row["method"] == "paired" and row["method_reason"] == "paired: within the 2 rounds that hold both"
            assert row["ci_low"] < row["ratio"] < row["ci_high"]
            continue
        assert row["verdict"] == "inconclusive"
        assert row["method"] == "welch" and "a paired interval needs 2" in row["method_reason"]
        if row["n_baseline"] and row["n_variant"]:  # 3 more rounds at most give an interval
            assert "at least 3" in row["reason"] and 1 <= row["rounds_needed"] <= 3
        else:  # every cell of a side unsettled: nothing to project
            assert row["reason"].startswith("no settled repeats") and row["rounds_needed"] is None


def test_report_and_csv(matrix_run):
    out, doc, run_output = matrix_run
    # matrix size shown first (not the 16 of a run with 4 retries: ci46, whose "16 cells" held "6 cells")
    assert not re.search(r"\b6 cells", run_output) and "12 cells" in run_output
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
    _, doc, _ = matrix_run
    assert perflab_children(doc["run"]["workdir"]) == []
    workdir = Path(doc["run"]["workdir"])
    assert workdir.parent == Path(runs_tmpfs()) and not workdir.exists()


def test_export_has_the_variance_components(matrix_run):
    _, doc, output = matrix_run
    variance = doc["variance"]
    assert [c["name"] for c in variance["components"]] == ["window", "restarts", "drift"]
    settled = [c for c in doc["cells"] if c["settled"]]
    assert variance["cells"] == len(settled) and variance["components"][0]["variance"] > 0
    assert variance["rounds"] <= 2 * 2  # complete rounds, summed over the 2 thread counts
    if variance["rounds"] >= 3:  # pooled over thread counts: enough to separate restarts from drift
        assert variance["components"][1]["variance"] is not None and variance["df_residual"] > 0
    if variance["components"][1]["variance"] is None:  # restarts not separated: the reports leave the table out
        assert "Where the noise comes from" not in output
        return
    words = " ".join(output.split())  # the terminal wraps the advice
    assert "Where the noise comes from" in output and " ".join(variance["advice"][1:].split()) in words
