"""tool = "go-tpc": TPC-C through the real go-tpc v1.0.12 (`make go-tpc`) against a real MariaDB
that perflab starts, end to end with `perflab run`: one warehouse prepared once (go-tpc tpcc
prepare) and restored into every cell, NOPM per second from go-tpc's --interval 1s reports,
warm-up detection and verdicts as for sysbench; a missing go-tpc is exit 3 naming its make
target. PostgreSQL's go-tpc runs: test_gotpc_pg_real.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from scipy.stats import binomtest

from perflab.workloads import gotpc
from tests.archive import major_minor, sid_version, upstream
from tests.conftest import ROOT, perflab
from tests.integration.helpers import orphans, perflab_children, used, write_experiment

WARMUP, DURATION = 2, 4

TPCC = f"""
[experiment]
name = "it-tpcc"
duration = "{DURATION}s"
warmup = "{WARMUP}s"
repeats = 2
{{server}}
[workload]
tool = "go-tpc"
test = "tpcc"
warehouses = 1
threads = [2]

[variants.allocator]
glibc    = {{{{}}}}
jemalloc = {{{{ preload = "jemalloc" }}}}
"""


@pytest.fixture(scope="module")
def tpcc_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    tmp = tmp_path_factory.mktemp("tpcc")
    spec = write_experiment(tmp / "tpcc.toml", TPCC.format(server=""))
    out = tmp / "results"
    done = perflab("run", str(spec), "-o", str(out), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    exported = perflab("export", str(out), "--format", "json")
    assert exported.returncode == 0, exported.stderr
    return out, json.loads(exported.stdout), done.stdout + done.stderr


def test_every_cell_ran_sequentially_on_the_prepared_warehouse(tpcc_run):
    out, doc, printed = tpcc_run
    cells = doc["cells"]
    # a cell that did not settle is measured again within its round (retry_of): 4 first measurements
    assert len([c for c in cells if c["retry_of"] is None]) == 4 and all(c["status"] == "ok" for c in cells), [
        c.get("error") for c in cells
    ]
    assert doc["run"]["design_reason"].startswith("sequential: go-tpc")
    assert doc["run"]["throughput"]["metric"] == "NOPM"
    assert "NOPM mean" in printed and f"go-tpc {gotpc.VERSION}" in printed
    assert "TPC-C transaction types, threads = 2" in printed and "STOCK_LEVEL" in printed
    prepared = (out / "logs" / "prepare.txt").read_text()
    assert "creating table warehouse" in prepared and "creating table order_line" in prepared
    assert not orphans("go-tpc") and perflab_children(doc["run"]["workdir"]) == []


def test_nopm_per_second_adds_up_to_the_window_summary(tpcc_run):
    out, doc, _ = tpcc_run
    for cell in doc["cells"]:
        intervals = cell["intervals"]
        steady = [iv for iv in intervals if not iv["warmup"]]
        assert [iv["t"] for iv in intervals] == list(range(1, len(intervals) + 1))
        # go-tpc's last report may be lost at its exit: the window holds DURATION - 1 or DURATION seconds; a report
        # a stall delayed is spread over the seconds it spans, one more (ci45: a `low` stall, 107 and 107 a second)
        assert DURATION - 1 <= len(steady) <= DURATION + bool(cell["stalls"]), (cell["stalls"], steady)
        summary = cell["summary"]
        assert summary["total_time_s"] == len(steady)
        assert summary["qps"] == pytest.approx(sum(iv["qps"] for iv in steady) / len(steady), rel=0.001)
        assert summary["queries"] == pytest.approx(summary["qps"] * len(steady) / 60, abs=1)
        types = summary["transaction_types"]
        assert set(types) == {"DELIVERY", "NEW_ORDER", "ORDER_STATUS", "PAYMENT", "STOCK_LEVEL"}
        assert types["NEW_ORDER"]["per_minute"] == summary["qps"] and summary["qps"] > 0
        # TPC-C's mix (go-tpc's weights): new orders 45, payments 43, the other three 4 each. Of a few dozen
        # transactions a window, the split between the two is binomial: a 1-in-10^4 bound, not a fixed ratio
        # (27 payments to 54 new orders happened, p = 0.005)
        paid, new = round(types["PAYMENT"]["count"]), round(types["NEW_ORDER"]["count"])
        assert binomtest(paid, paid + new, 43 / 88).pvalue > 1e-4, (paid, new)
        rare = round(sum(types[t]["count"] for t in ("DELIVERY", "ORDER_STATUS", "STOCK_LEVEL")))
        assert binomtest(rare, summary["transactions"], 12 / 100).pvalue > 1e-4, types
        lat = summary["latency_ms"]
        assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"] and lat["avg"] <= lat["max"]
        # a closed loop of 2 clients: Little's law over all five types
        # (a rare type, ~4% of the mix, can have none in a short window on a busy machine: no mean then)
        mean_ms = sum(t["avg_ms"] * t["count"] for t in types.values() if t["count"]) / summary["transactions"]
        assert mean_ms == pytest.approx(1000 * cell["threads"] / summary["tps"], rel=0.3)
        stamped = (out / "logs" / f"cell-{cell['id']:04d}" / "go-tpc.txt").read_text().splitlines()
        assert stamped and all(" | " in line for line in stamped)
        # the server's CPU per transaction, and go-tpc's own (the client's)
        assert cell["resources"]["server_cpu_us_per_txn"] > 0 and cell["client"]["cpu_us_per_txn"] > 0


def test_warm_up_and_verdicts_work_as_for_sysbench(tpcc_run):
    _, doc, _ = tpcc_run
    for cell in doc["cells"]:
        assert cell["window_start_s"] == WARMUP
        assert cell["settled"] is (cell["unsettled_reason"] is None)
        assert cell["warmup_method"] in {"mser-1", "none"}
    jemalloc = [c for c in doc["cells"] if c["variant"]["allocator"] == "jemalloc"]
    assert jemalloc and all("jemalloc" in c["allocator_library"] for c in jemalloc)
    comparisons = [c for c in doc["comparisons"] if c.get("metric", "qps") == "qps"]
    assert comparisons and {c["verdict"] for c in comparisons} <= {"faster", "slower", "equivalent", "inconclusive"}


def test_a_missing_go_tpc_is_exit_3_naming_the_make_target(tmp_path: Path):
    spec = write_experiment(tmp_path / "tpcc.toml", TPCC.format(server=""))
    code = (
        "import sys; from perflab.workloads import gotpc; from perflab.errors import ToolMissingError\n"
        "def gone(): raise ToolMissingError('go-tpc not found', gotpc.GET)\n"
        "gotpc.go_tpc_binary = gone\n"
        "from perflab.cli import main; sys.argv = ['perflab', 'run', sys.argv[1], '-o', sys.argv[2]]; main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(spec), str(tmp_path / "out")], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, check=False)  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "(tool) go-tpc" in done.stderr and "make go-tpc" in done.stderr


MYSQL = f"""
[experiment]
name = "it-tpcc-mysql"
server = "mysql"  # servers/mysql/: every variant a build, no installed server's dataset
duration = "{DURATION}s"
warmup = "{WARMUP}s"
repeats = 1

[workload]
tool = "go-tpc"
test = "tpcc"
warehouses = 1
threads = [2]

[builds.mysql97]
package = "mysql-server-core"
suite = "sid"

[variants.server]
mysql = {{ build = "mysql97" }}
"""


def test_go_tpc_drives_mysql_97_from_sid(tmp_path: Path):
    """`server = "mysql"` (servers/mysql/): go-tpc prepares its own warehouse in a datadir mysqld
    initialised (caching_sha2_password is its default), the only dataset (no installed server's),
    and the cell reads NOPM per second and mysqld's CPU as on MariaDB."""
    spec = write_experiment(tmp_path / "tpcc-mysql.toml", MYSQL)
    out = tmp_path / "results"
    done = perflab("run", str(spec), "-o", str(out), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(perflab("export", str(out)).stdout)
    (cell,) = used(doc["cells"])
    sid = sid_version("mysql-server-core")  # what sid serves now: 9.7.4-2 on 2026-11-28
    assert cell["status"] == "ok" and cell["build"]["version"].startswith(upstream(sid)), cell.get("error")
    (dataset,) = doc["datasets"].values()
    assert dataset["init"] == "mysqld --initialize-insecure" and dataset["builds"] == ["mysql97"], dataset
    assert doc["experiment"]["server"] == "mysql" and dataset["own"] is True
    prepared = (out / "logs" / f"prepare-mysql-{major_minor(sid)}.txt").read_text()  # a kind's own dataset: its own log
    assert "creating table warehouse" in prepared and "creating table order_line" in prepared
    steady = [iv for iv in cell["intervals"] if not iv["warmup"]]
    assert DURATION - 1 <= len(steady) <= DURATION and all(iv["qps"] >= 0 for iv in steady)
    types = cell["summary"]["transaction_types"]
    assert types["NEW_ORDER"]["count"] > 0 and types["PAYMENT"]["count"] > 0, types
    assert cell["summary"]["qps"] > 0 and cell["resources"]["server_cpu_us_per_txn"] > 0
    assert not orphans("go-tpc") and perflab_children(doc["run"]["workdir"]) == []
