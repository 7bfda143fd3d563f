"""Load at a fixed rate on a real mariadbd and sysbench (docs/workloads.md#load-at-a-fixed-rate-open-loop):
one run of two cells at `rate = 1000` on 2 threads. `kept`: point selects, which this machine serves
many times over: every second of its window achieves the rate within 10% (a Poisson second at
1,000/s is ±3.2%: 10% is 3 standard deviations), and its latency counts from the intended start.
`over`: each transaction sleeps 10 ms on the server (tests/data/workloads/slow.lua), so 2 threads
serve at most 200 a second whatever else runs: an overload on purpose, marked as not keeping the
rate and left out of the verdicts, whose metric is p99. About 25 s."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT, perflab
from tests.integration.helpers import write_experiment

# keeping 1,000 a second is a property of a machine with CPU to spare: beside make test's other
# workers a cell missed it (ci12), so this module runs in the quiet phase, alone
pytestmark = pytest.mark.quiet

SLOW = ROOT / "tests" / "data" / "workloads" / "slow.lua"
RATE = 1000

EXPERIMENT = f"""
[experiment]
name = "it-fixed-rate"
warmup = "2s"
duration = "4s"
repeats = 1

[dataset]
tables = 1
table_size = 1000

[workload]
test = "{SLOW}"
threads = [2]
rate = {RATE}

[variants.load]
kept = {{}}
over = {{ workload_options = {{ sleep_ms = 10 }} }}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("fixed-rate")
    out = tmp / "results"
    done = perflab("run", str(write_experiment(tmp / "rate.toml", EXPERIMENT, pace=None)), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(perflab("export", str(out)).stdout)
    report = perflab("report", str(out))
    assert report.returncode == 0, report.stderr
    return {"doc": doc, "cells": {c["variant"]["load"]: c for c in doc["cells"]}, "report": report.stdout}


def test_the_run_is_sequential_and_records_its_rates(run: dict) -> None:
    exp = run["doc"]["experiment"]
    assert exp["rates"] == [RATE] and exp["workload"]["rate"] == RATE
    assert "a fixed rate" in run["doc"]["run"]["design_reason"]
    for cell in run["cells"].values():
        assert cell["status"] == "ok", cell.get("error")
        assert cell["sysbench_options"]["rate"] == str(RATE)  # sysbench's own --rate


def test_a_cell_that_keeps_the_rate_does_so_over_its_window(run: dict) -> None:
    """The done-when's figure: the cell's achieved rate within 10% of the target, every window
    second sysbench reported recorded with its backlog. Not every second within 10%: sysbench's arrival thread, held
    up a moment (CI's load, a VM pause), queues the arrivals it missed and they run in the next
    second (CI: 1,140 in one second after 1,030, backlog 0.002 s), so a second's count is not the
    rate; what the rate promises is that the queue drains, which the backlog says."""
    record = run["cells"]["kept"]["summary"]["rate"]
    assert record["target"] == RATE and record["kept"] is True and record["reason"] is None
    assert abs(record["achieved"] - RATE) <= 0.1 * RATE, record
    seconds = record["seconds"]
    # the window's, after the 2 s warm-up; sysbench's last report races its own end (its report
    # thread wakes at 6.0 s as the workers stop, and under load the workers win: CI lost t=6 once),
    # so the last second may be missing, never another one
    assert [s["t"] for s in seconds] in ([3, 4, 5, 6], [3, 4, 5]), seconds
    assert all(s["backlog_s"] is not None for s in seconds) and seconds[-1]["backlog_s"] < 0.1, seconds
    assert abs(sum(s["achieved"] for s in seconds) / len(seconds) - record["achieved"]) <= 0.02 * RATE, record
    window = [iv for iv in run["cells"]["kept"]["intervals"] if not iv["warmup"]]
    assert [iv["tps"] for iv in window] == [s["achieved"] for s in seconds]  # the same seconds


def test_its_latency_counts_from_the_intended_start(run: dict) -> None:
    record = run["cells"]["kept"]["summary"]["rate"]
    assert record["latency_from"] == "intended"
    # sysbench gives no service time alone, and the record says so rather than pretend
    assert record["service_latency_ms"] is None and "queue time" in record["note"]
    assert run["cells"]["kept"]["summary"]["latency_ms"]["p99"] > 0


def test_an_overloaded_cell_is_marked_and_left_out(run: dict) -> None:
    record = run["cells"]["over"]["summary"]["rate"]
    assert record["kept"] is False
    assert record["achieved"] < 0.3 * RATE  # 2 threads of 10 ms transactions: 200 a second at most
    assert record["seconds"][-1]["backlog_s"] > 1.0  # its queue grows by 800 a second
    assert "below the target" in record["reason"]
    (row,) = [c for c in run["doc"]["comparisons"] if c["kind"] == "variant" and c["metric"] == "p99"]
    assert run["doc"]["comparisons"][0]["metric"] == "p99"  # the verdicts' metric at a fixed rate
    assert "1 cell(s) that did not keep the rate left out" in row["reason"]
    assert row["n_variant"] == 0 and row["verdict"] == "inconclusive"
    assert "verdicts on p99 latency from each transaction's intended start" in run["report"]
    assert "missed rate" in run["report"]
