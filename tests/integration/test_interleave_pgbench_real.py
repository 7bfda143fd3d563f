"""The interleaved design on PostgreSQL with pgbench, on real postgres servers: a round's servers
run at once, their pgbench clients take 100 ms turns, and each cell's transactions and latency
are counted from pgbench's own per-transaction log by the seat's turns (workloads/turn_log.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.freezes import Freezes
from tests.integration.helpers import assert_interleaved_by_default, run_exported

# alone (make test runs the quiet modules first, one at a time): turn lengths within 100 ms turns
pytestmark = pytest.mark.quiet

SPEC = """
[experiment]
name = "it-pgbench-interleaved"
server = "postgresql"
duration = "3s"
warmup = "2s"
repeats = 1  # one round: a group of two seats is what each check needs (two rounds took 24-27 s)

[dataset]
scale = 1

[workload]
tool = "pgbench"
test = "select-only"
threads = [2]

[variants.allocator]
glibc = {}
jemalloc = { preload = "jemalloc" }
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, Freezes, Path]:
    return run_exported(tmp_path_factory.mktemp("pgbench-interleaved"), "pgbench", SPEC, seed=3)


def test_pgbench_runs_interleaved_by_default(run):
    doc, output, _, _ = run
    assert_interleaved_by_default(doc, output, rounds=1)


def test_the_log_counts_each_turns_transactions_and_their_latency(run):
    doc, _, freezes, _ = run
    for cell in doc["cells"]:
        assert cell["design"]["counts"] == {"source": "client log", "queries_per_event": 1.0, "failed": 0}
        summary = cell["summary"]
        assert summary["transactions"] > 100 and summary["queries"] == summary["transactions"]  # one SELECT each
        lost = freezes.in_cell(cell)
        assert 3.0 <= summary["total_time_s"] <= 3.5 + lost, (summary["total_time_s"], lost)
        assert summary["tps"] == pytest.approx(summary["transactions"] / summary["total_time_s"], rel=0.01)
        series = [iv for iv in cell["intervals"] if not iv["warmup"]]
        assert len(series) == 3 and all(iv["tps"] > 0 and iv["p95_ms"] is not None for iv in series), series
        # Little's law: 2 clients, each always in a transaction while its turn runs, so the
        # transactions per running second times their mean latency is close to 2. Counts over
        # the wrong seconds (the others' turns), or latency that took in a pause, break it.
        busy = summary["tps"] * summary["latency_ms"]["avg"] / 1000.0
        assert 1.5 <= busy <= 2.05, (busy, summary)
        assert cell["design"]["latency_spanned"] < 0.05, cell["design"]  # at most a transaction a turn a client


def test_pgbench_ended_by_itself_with_every_transaction_logged(run):
    """It was ended as its -T ends it, so it printed its own summary; the seconds perflab counted
    (warm-up and window) hold all it processed, but for what ran before the first pause and after
    the last turn (connecting, then finishing: well under 3%). A log cut short (a killed pgbench
    loses its buffered lines) or counts over the wrong spans would not add up."""
    doc, _, _, out = run
    for cell in doc["cells"]:
        text = (out / "logs" / f"cell-{cell['id']:04d}" / "pgbench.txt").read_text()
        processed = int(re.search(r"number of transactions actually processed: (\d+)", text)[1])
        intervals = cell["intervals"]
        second = cell["design"]["active_s"] / len(intervals)  # each interval is a second of turns
        counted = sum(iv["tps"] for iv in intervals) * second
        assert 0.97 <= counted / processed <= 1.005, (counted, processed, text[-400:])
        assert cell["resources"]["preload_verified_backends"] >= 2, cell["resources"]
        # pgbench's own CPU over the window, read before it was ended: a client does work per transaction
        assert cell["resources"]["client_cpu_s"] > 0 and cell["client"]["cpu_us_per_txn"] > 0, cell["resources"]
