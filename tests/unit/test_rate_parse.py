"""sysbench's and pgbench's output at a fixed rate, recorded from the real tools (sysbench 1.0.20,
pgbench 15; tests/data/rate/, re-recorded by tests/data/regen_rate.py): the target, each second's
achieved rate and backlog, where the latency counts from, and the service time where the tool gives it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from perflab.errors import WorkloadError
from perflab.workloads import client, pgbench_log, sysbench_output

DATA = Path(__file__).resolve().parents[1] / "data" / "rate"


def text(name: str) -> str:
    return (DATA / f"{name}.txt").read_text(encoding="utf-8")


def test_sysbench_at_a_rate_it_keeps() -> None:
    out = text("sysbench_rate_kept")
    record = sysbench_output.parse_rate(out, warmup=2)
    assert record is not None and record["target"] == 300
    intervals = {iv.t: iv.tps for iv in sysbench_output.parse_intervals(out)}
    assert [s["t"] for s in record["seconds"]] == [t for t in sorted(intervals) if t > 2]
    assert all(s["achieved"] == intervals[s["t"]] for s in record["seconds"])
    # the backlog is sysbench's own "queue length" line of the same second, over the target
    queued = {int(t): int(q) for t, q in re.findall(r"\[ (\d+)s \] queue length: (\d+)", out)}
    assert queued, "sysbench 1.0.20 prints a queue line after each second's report at --rate"
    assert all(s["backlog_s"] == round(queued[s["t"]] / 300, 3) for s in record["seconds"])
    assert record["kept"] is True and record["reason"] is None
    assert record["latency_from"] == "intended" and record["service_latency_ms"] is None
    assert "queue time" in record["note"]


def test_sysbench_behind_its_rate_builds_a_backlog_and_counts_latency_from_the_intended_start() -> None:
    out = text("sysbench_rate_backlog")  # 10 ms transactions at 300/s on 2 threads: 200/s at most
    record = sysbench_output.parse_rate(out, warmup=2)
    assert record is not None and record["kept"] is False
    assert "below the target 300/s" in record["reason"] and record["achieved"] < 210
    backlog = [s["backlog_s"] for s in record["seconds"]]
    assert backlog == sorted(backlog) and backlog[-1] > 1.0  # about 100 more queued every second
    summary = sysbench_output.parse_summary(out)
    assert summary is not None
    # a service time of 10 ms; sysbench's latency counts the queue from each event's intended start
    assert summary.latency_ms["min"] >= 10 and summary.latency_ms["p99"] > 50 * summary.latency_ms["min"]


def test_sysbench_whose_queue_overflows_fails_saying_so(tmp_path: Path) -> None:
    out = text("sysbench_rate_overflow")
    assert "SQL statistics" not in out  # it stopped at once, without a summary (exit 1)
    why = sysbench_output.overflow(out)
    assert why is not None and "could not keep the rate of 1,000,000/s" in why and "131,072" in why
    (tmp_path / "sysbench.txt").write_text(out, encoding="utf-8")
    with pytest.raises(WorkloadError) as info:
        client.read_output(tmp_path / "sysbench.txt", 1, 2)
    assert info.value.message == why and "lower [workload] rate" in info.value.hint
    assert sysbench_output.overflow(text("sysbench_rate_kept")) is None


def test_a_closed_loop_has_no_rate_record() -> None:
    closed = (DATA.parent / "sysbench" / "oltp_read_only_t2_checkpoint.txt").read_text(encoding="utf-8")
    assert sysbench_output.parse_rate(closed, warmup=2) is None


def pgbench_log_of(name: str) -> np.ndarray:
    return pgbench_log.load_log(DATA / name / "pgbench_log", lag=True)


def window_of(log: np.ndarray) -> tuple[float, tuple[float, float]]:
    """A launch 0.5 s before the first transaction ended, and a window of its seconds 2 to 4."""
    launch = float(log[:, 1].min()) - 0.5
    return launch, (launch + 1, launch + 4)


def test_pgbench_s_log_at_a_rate_carries_the_schedule_lag() -> None:
    log = pgbench_log_of("pgbench_rate")
    ok = log[log[:, 0] >= 0]
    assert log.shape[1] == 3 and len(ok) > 500  # 300/s for 4 s
    assert (ok[:, 2] >= 0).all() and (ok[:, 0] >= ok[:, 2]).all()  # time counts from the scheduled start
    # the lag column is pgbench's own: its closing "rate limit schedule lag: avg A (max M) ms"
    out = (DATA / "pgbench_rate" / "pgbench.txt").read_text(encoding="utf-8")
    avg, top = map(float, re.search(r"schedule lag: avg ([\d.]+) \(max ([\d.]+)\) ms", out).groups())
    assert ok[:, 2].mean() / 1000 == pytest.approx(avg, abs=0.0015)
    assert ok[:, 2].max() / 1000 == pytest.approx(top)
    latency = float(re.search(r"latency average = ([\d.]+) ms", out)[1])  # from the scheduled start
    assert ok[:, 0].mean() / 1000 == pytest.approx(latency, abs=0.0015)
    launch, window = window_of(log)
    record = pgbench_log.rate_record(log, launch, window, 300, warmup=1)
    summary = pgbench_log.window_summary(log, window, 1)
    assert summary is not None and record["target"] == 300 and record["skipped"] == 0
    assert [s["t"] for s in record["seconds"]] == [2, 3, 4]
    assert record["latency_from"] == "intended" and record["note"] is None
    service = record["service_latency_ms"]
    assert service is not None and service["p99"] <= summary.latency_ms["p99"]
    assert record["kept"] is True, record


@pytest.mark.parametrize("name", ["pgbench_rate", "pgbench_rate_limit"])
def test_pgbench_s_output_is_its_own(name: str) -> None:
    out = (DATA / name / "pgbench.txt").read_text(encoding="utf-8")
    assert "rate limit schedule lag" in out  # pgbench's own summary of the lag at --rate


def test_pgbench_s_latency_limit_skips_late_transactions() -> None:
    log = pgbench_log_of("pgbench_rate_limit")  # --rate=1000 --latency-limit=0.1
    skipped = log[:, 0] == -2
    assert skipped.any()  # "skipped" in the log's time column
    launch, window = window_of(log)
    record = pgbench_log.rate_record(log, launch, window, 1000, warmup=1)
    inside = (log[:, 1] >= window[0]) & (log[:, 1] < window[1])
    assert record["skipped"] == int((skipped & inside).sum()) > 0
    # a skipped transaction is not achieved: the seconds count the ones that ran
    ran = log[(log[:, 0] >= 0)]
    assert sum(s["achieved"] for s in record["seconds"]) == sum(
        1 for end in ran[:, 1] if 2 <= np.ceil(end - launch) <= 4
    )
