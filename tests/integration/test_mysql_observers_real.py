"""MySQL as a first-class server (issue 34 item 2): sid's mysqld 9.7, from its private root, with
every observer a MariaDB cell has: the server's status counters (MySQL names INNODB_METRICS'
enabled column otherwise), allocation counts, perf stacks with its exported symbols, and its own
crash report when it dies of SIGSEGV, the next cell going on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, perflab
from tests.integration.helpers import processes, used, write_experiment

EXPERIMENT = """
[experiment]
name = "{name}"
design = "sequential"
warmup = "1s"
duration = "{duration}"
repeats = {repeats}

[dataset]
tables = 1
table_size = 5000

[workload]
test = "oltp_read_only"
threads = [2]

[builds.mysql97]
package = "mysql-server-core"
suite = "sid"

[variants.server]
mysql = {{ build = "mysql97" }}
{observe}
"""

OBSERVE = """
[observe]
status = true
alloc = true
perf = true
"""


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("mysql-observed")
    body = EXPERIMENT.format(name="it-mysql-observed", duration="4s", repeats=1, observe=OBSERVE)
    done = perflab("run", str(write_experiment(tmp / "m.toml", body)), "-o", str(tmp / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = perflab("export", str(tmp / "out"))
    assert exported.returncode == 0, exported.stderr
    return tmp / "out", json.loads(exported.stdout)


def test_status_counters_per_transaction(observed):
    _, doc = observed
    (cell,) = used(doc["cells"])
    per_txn = cell["status_per_txn"]
    # oltp_read_only: 10 point selects and 4 range selects per transaction, as the server counts them
    assert 13.5 <= per_txn["Com_select"] <= 14.5, per_txn["Com_select"]
    assert per_txn["Innodb_rows_read"] > 100  # 4 ranges of 100 rows and the points
    assert any(name.startswith("INNODB_METRICS.") for name in per_txn)  # MySQL's enabled metrics


def test_allocations_and_perf_stacks(observed):
    out, doc = observed
    (cell,) = used(doc["cells"])
    calls = cell["alloc"]["calls_per_txn"]
    assert calls["malloc"] > 10 and calls["new"] > 1  # mysqld allocates per query, in C and C++
    top = perflab("profile", str(out), "mysql", "--format", "json", "--top", "0")
    assert top.returncode == 0, top.stderr
    rows = json.loads(top.stdout)
    # the server's own functions, named from its exported symbols (no -dbgsym reachable here)
    assert any(r["function"] == "row_search_mvcc" and r["total_per_txn"] > 0 for r in rows), rows[:10]
    assert any(r["dso"] == "mysqld" for r in rows)


def _mysqld(workdir: str) -> int | None:
    """The pid of the run's mysqld (behind its root's loader: comm is ld-linux-x86-64)."""
    for entry in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in cmd]
        if any(w.endswith("/mysqld") for w in words[:6]) and any(workdir in w for w in words):
            return int(entry)
    return None


def test_a_crash_keeps_mysqlds_own_report_and_the_next_cell_runs(tmp_path: Path):
    body = EXPERIMENT.format(name="it-mysql-crash", duration="8s", repeats=2, observe="")
    spec = write_experiment(tmp_path / "c.toml", body)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline, server = time.monotonic() + 180, None
    while server is None and time.monotonic() < deadline and proc.poll() is None:
        exported = perflab("export", str(out)) if (out / "results.db").exists() else None
        workdir = json.loads(exported.stdout)["run"]["workdir"] if exported and exported.returncode == 0 else None
        # a cell's workload ("run"), not the dataset's "prepare": then the cell's own server is up
        measuring = workdir and any(" run" in cmd and workdir in cmd for _, cmd in processes("sysbench"))
        server = _mysqld(workdir) if measuring else None
        time.sleep(0.3)
    assert server is not None, proc.communicate()
    os.kill(server, signal.SIGSEGV)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stdout + stderr
    first, second = json.loads(perflab("export", str(out)).stdout)["cells"]
    assert first["status"] == "failed" and first["error"].startswith("server died: signal 11 (SIGSEGV"), first["error"]
    assert first["backtrace"] and "got signal 11" in first["backtrace"]  # mysqld's own crash report
    assert second["status"] == "ok" and second["summary"]["qps"] > 0
