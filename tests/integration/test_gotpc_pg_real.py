"""tool = "go-tpc" on server = "postgresql" (issue 50): the real go-tpc v1.0.12's postgres driver
against a real PostgreSQL 15 that perflab starts, end to end with `perflab run`. One warehouse
prepared once (`go-tpc tpcc prepare` through the socket as the superuser) and restored into every
cell; two variants (shared_buffers 64MB and 128MB), short windows. Every cell gets NOPM per
second, the window's transaction types and go-tpc's CPU per transaction, every comparison a
verdict row, the reports each type's latency; the server listens on no TCP address."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perflab.workloads import gotpc
from tests.conftest import perflab
from tests.integration.helpers import orphans, used, write_experiment

WARMUP, DURATION = 2, 3

TPCC_PG = f"""
[experiment]
name = "it-tpcc-pg"
server = "postgresql"
duration = "{DURATION}s"
warmup = "{WARMUP}s"
repeats = 2

[workload]
tool = "go-tpc"
test = "tpcc"
warehouses = 1
threads = [2]

[variants.shared_buffers]
"64MB"  = {{ server_options = {{ shared_buffers = "64MB" }} }}
"128MB" = {{ server_options = {{ shared_buffers = "128MB" }} }}
"""


@pytest.fixture(scope="module")
def pg_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    tmp = tmp_path_factory.mktemp("tpcc-pg")
    out = tmp / "results"
    done = perflab("run", str(write_experiment(tmp / "tpcc-pg.toml", TPCC_PG)), "-o", str(out), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    exported = perflab("export", str(out), "--format", "json")
    assert exported.returncode == 0, exported.stderr
    return out, json.loads(exported.stdout), done.stdout + done.stderr


def test_every_cell_has_nopm_per_second_and_its_transaction_types(pg_run):
    out, doc, printed = pg_run
    cells = used(doc["cells"])
    assert len(cells) == 4 and all(c["status"] == "ok" for c in cells), [c.get("error") for c in doc["cells"]]
    assert doc["run"]["throughput"]["metric"] == "NOPM" and doc["experiment"]["server"] == "postgresql"
    prepared = (out / "logs" / "prepare.txt").read_text()
    assert "creating table warehouse" in prepared and "creating table order_line" in prepared
    for cell in cells:
        steady = [iv for iv in cell["intervals"] if not iv["warmup"]]
        assert DURATION - 1 <= len(steady) <= DURATION and cell["summary"]["total_time_s"] == len(steady)
        summary = cell["summary"]
        assert summary["qps"] == pytest.approx(sum(iv["qps"] for iv in steady) / len(steady), rel=0.001)
        types = summary["transaction_types"]
        assert set(types) == set(gotpc.TYPES) and types["NEW_ORDER"]["count"] > 0 and types["PAYMENT"]["count"] > 0
        assert types["NEW_ORDER"]["per_minute"] == summary["qps"] > 0
        assert cell["resources"]["server_cpu_us_per_txn"] > 0 and cell["client"]["cpu_us_per_txn"] > 0
        stamped = (out / "logs" / f"cell-{cell['id']:04d}" / "go-tpc.txt").read_text().splitlines()
        assert stamped and all(" | " in line for line in stamped)
        assert cell["server_options"]["shared_buffers"] == cell["variant"]["shared_buffers"]
    assert not orphans("go-tpc")  # its own go-tpc gone (another module's may run beside it)


def test_every_comparison_has_a_verdict_and_the_reports_show_each_type(pg_run):
    out, doc, printed = pg_run
    comparisons = [c for c in doc["comparisons"] if c.get("metric", "qps") == "qps"]
    assert comparisons and all(c["verdict"] in {"faster", "slower", "equivalent", "inconclusive"} for c in comparisons)
    assert {c["variant"]["shared_buffers"] for c in comparisons} == {"128MB"}
    assert "NOPM mean" in printed and "TPC-C transaction types, threads = 2" in printed
    markdown = perflab("report", str(out), "--format", "markdown")
    assert markdown.returncode == 0 and "## TPC-C transaction types" in markdown.stdout
    html = perflab("report", str(out), "--html")
    assert html.returncode == 0, html.stderr
    assert 'id="transaction-types"' in (out / "report.html").read_text()


def test_the_server_listened_on_its_socket_only(pg_run):
    """go-tpc reached it through the socket's directory: no TCP address for a PostgreSQL cell."""
    out, doc, _ = pg_run
    for cell in used(doc["cells"]):
        logs = out / "logs" / f"cell-{cell['id']:04d}"
        assert "listen_addresses = ''" in (logs / "postgresql.conf").read_text()
        log = (logs / "error.log").read_text()
        assert "listening on Unix socket" in log and "IPv4" not in log and "IPv6" not in log, log[:2000]
