"""The interleaved design on PostgreSQL, with sysbench's pgsql driver, on real postgres servers:
a round's servers run at once, their clients take 100 ms turns, and each cell's throughput is
counted by its client's wrapper (workloads/turn_counts.py: events from turns.lua, queries per event
from sysbench's own reports), its resources over the postmaster's whole tree."""

from __future__ import annotations

import pytest

from tests.freezes import Freezes
from tests.integration.helpers import assert_interleaved_by_default, run_exported

# alone (make test runs the quiet modules first, one at a time): turn lengths within 100 ms turns
pytestmark = pytest.mark.quiet

SPEC = """
[experiment]
name = "it-pg-interleaved"
server = "postgresql"
duration = "3s"
warmup = "2s"
repeats = 1  # one round: a group of two seats is what each check needs (two rounds took 24-27 s)

[dataset]
tables = 1
table_size = 2000

[workload]
test = "oltp_read_only"
threads = [2]

[variants.allocator]
glibc = {}
jemalloc = { preload = "jemalloc" }
"""
# sysbench's oltp_read_only at its defaults: 10 point selects and 4 range queries, in BEGIN/COMMIT
READS, OTHER = 14, 2


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, Freezes]:
    doc, output, freezes, _ = run_exported(tmp_path_factory.mktemp("pg-interleaved"), "pg", SPEC, seed=2)
    return doc, output, freezes


def test_postgresql_with_sysbench_runs_interleaved_by_default(run):
    doc, output, _ = run
    assert_interleaved_by_default(doc, output, rounds=1)


def test_the_client_counts_every_transaction_and_the_queries_each_makes(run):
    doc, _, freezes = run
    for cell in doc["cells"]:
        counts = cell["design"]["counts"]
        # every event of oltp_read_only makes the same statements: the ratio is theirs, but for the
        # queries of the events in flight at sysbench's last report (counted, their events not yet)
        assert counts["source"] == "client", counts
        assert counts["queries_per_event"] == pytest.approx(READS + OTHER, rel=1e-3), counts
        assert counts["reads_per_event"] == pytest.approx(READS, rel=1e-3), counts
        summary = cell["summary"]
        assert summary["transactions"] > 100
        assert summary["queries"] == pytest.approx(summary["transactions"] * (READS + OTHER), rel=1e-3)
        # over the seconds its client ran (3 s of window; a pause of the VM inside a turn counts as run)
        lost = freezes.in_cell(cell)
        assert 3.0 <= summary["total_time_s"] <= 3.5 + lost, (summary["total_time_s"], lost)
        assert summary["qps"] == pytest.approx(summary["queries"] / summary["total_time_s"], rel=0.01)
        series = [iv for iv in cell["intervals"] if not iv["warmup"]]
        assert len(series) == 3 and all(iv["qps"] > 0 and iv["reads"] > 0 for iv in series), series
        assert summary["latency_ms"]["p95"] is not None


def test_resources_count_every_backend_of_the_seat(run):
    doc, _, _ = run
    for cell in doc["cells"]:
        res = cell["resources"]
        # the postmaster's tree (its backends do the work): far more than the postmaster alone uses
        assert res["server_cpu_us_per_txn"] is not None and res["server_cpu_us_per_txn"] > 20, res
        assert res["pss_end_bytes"] > 0 and res["other_cpu_cores"] is not None, res
        # each client's backend maps the variant's allocator (checked once they connected)
        assert res["preload_verified_backends"] >= 2, res
