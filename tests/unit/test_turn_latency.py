"""Latency within turns, the Python side (workloads/turn_latency.py): the histogram turns.lua writes,
read back, differenced and summarised as sysbench would; and the interleaved design's intervals
and summary from it. The Lua side runs in tests/integration/test_turn_latency.py."""

from __future__ import annotations

import itertools
import math
import struct
import time
from pathlib import Path

import pytest

from perflab.run import turn_series
from perflab.observers.status import STATEMENTS
from perflab.workloads.turn_latency import BUCKETS, HEADER, LAYOUT, STRIDE, VALUES, Histogram, TurnClock
from perflab.workloads.sysbench_output import histogram_percentile


def bucket(ms: float) -> int:
    """The bucket turns.lua puts an event of `ms` in (sysbench 1.0's)."""
    log_min = math.log(0.001)
    mult = (BUCKETS - 1) / (math.log(100000) - log_min)
    return min(BUCKETS - 1, max(0, math.floor((math.log(ms) - log_min) * mult + 0.5)))


def hist(latencies: dict[float, int], spanned: int = 0) -> Histogram:
    counts = [0.0] * BUCKETS
    for ms, n in latencies.items():
        counts[bucket(ms)] += n
    return Histogram(tuple(counts), sum(ms * n for ms, n in latencies.items()), float(spanned))


def test_buckets_are_sysbench_s():
    # sysbench 1.0 prints these bucket values in its --histogram output (1.8% apart)
    assert VALUES[0] == 0.001 and VALUES[-1] == 100000.0
    assert all(b / a == pytest.approx(VALUES[600] / VALUES[599], rel=0.01) for a, b in itertools.pairwise(VALUES[500:]))
    for ms in (0.05, 0.37, 2.0, 41.0):
        assert VALUES[bucket(ms)] == pytest.approx(ms, rel=0.01)


def test_the_summary_is_sysbench_s_percentiles_of_the_events_within_turns():
    h = hist({0.1: 900, 0.5: 80, 5.0: 20}, spanned=3)
    summary = h.summary()
    assert summary["p50"] == pytest.approx(0.1, rel=0.01)
    assert summary["p95"] == pytest.approx(0.5, rel=0.01)  # 950th of 1000 events
    assert summary["p99"] == pytest.approx(5.0, rel=0.01)
    assert summary["min"] == pytest.approx(0.1, rel=0.01) and summary["max"] == pytest.approx(5.0, rel=0.01)
    assert summary["avg"] == pytest.approx((90 + 40 + 100) / 1000, abs=0.001)
    assert summary["p95"] == histogram_percentile(h.rows(), 95)
    assert h.events == 1000 and h.spanned_share() == pytest.approx(3 / 1003, abs=1e-6)


def test_a_window_is_the_difference_of_two_readings():
    before = hist({0.1: 100}, spanned=1)
    after = hist({0.1: 100, 2.0: 50}, spanned=4)
    window = after - before
    assert window.events == 50 and window.spanned == 3
    assert window.summary()["p50"] == pytest.approx(2.0, rel=0.01)
    empty = before - before
    assert empty.summary() == dict.fromkeys(("min", "avg", "max", "p50", "p95", "p99"))
    assert empty.spanned_share() is None and empty.percentile(95) is None


def test_the_clock_reads_every_thread_s_part_and_writes_the_resume_time(tmp_path: Path):
    clock = TurnClock.create(tmp_path / "turns", threads=3)
    assert (tmp_path / "turns").stat().st_size == (HEADER + 3 * STRIDE) * 8 == clock.size
    env = clock.environment("oltp_point_select")
    assert env == {"PERFLAB_TEST": "oltp_point_select", "PERFLAB_TURNS": str(tmp_path / "turns"),
                   "PERFLAB_TURNS_BYTES": str(clock.size)}  # fmt: skip
    # as turns.lua writes them: thread t's counts, sum and spanned at HEADER + t * STRIDE
    with (tmp_path / "turns").open("r+b") as f:
        for t, (b, n, total, spanned) in enumerate([(10, 5, 1.0, 0), (10, 3, 0.6, 1), (700, 2, 90.0, 2)]):
            f.seek((HEADER + t * STRIDE + b) * 8)
            f.write(struct.pack("<d", n))
            f.seek((HEADER + t * STRIDE + BUCKETS) * 8)
            f.write(struct.pack("<2d", total, spanned))
    h = clock.read()
    assert h.counts[10] == 8 and h.counts[700] == 2 and h.events == 10
    assert h.sum_ms == pytest.approx(91.6) and h.spanned == 3
    before = time.monotonic() * 1000
    clock.advance()
    clock.advance()
    resumed, layout, buckets, stride, turns = struct.unpack("<5d", (tmp_path / "turns").read_bytes()[:40])
    assert before <= resumed <= time.monotonic() * 1000  # CLOCK_MONOTONIC in ms, what turns.lua times with
    assert (layout, buckets, stride, turns) == (LAYOUT, BUCKETS, STRIDE, 2)
    clock.close()


def counters(questions: float, commits: float) -> dict[str, float]:
    return {"Questions": questions, "Com_commit": commits}


def test_interleaved_intervals_and_summary_take_their_latency_from_the_turns():
    points = [
        (0, 0.0, counters(0, 0)),
        (1, 1.0, counters(1000 + STATEMENTS, 100)),
        (2, 2.0, counters(2000 + 2 * STATEMENTS, 200)),
    ]
    latency = [hist({}), hist({0.2: 100}), hist({0.2: 100, 1.0: 100}, spanned=2)]
    series = turn_series.intervals(points, warmup=0, latency=latency)
    assert [iv["p95_ms"] for iv in series] == [pytest.approx(0.2, rel=0.01), pytest.approx(1.0, rel=0.01)]
    figures = turn_series.summary(points[1:], latency=latency[1:])  # the window: from the second point
    assert figures["latency_ms"]["p95"] == pytest.approx(1.0, rel=0.01) and figures["latency_ms"]["avg"] == 1.0
    # histograms that do not match the points (a seat without its clock) give no latency, not a wrong one
    assert all(iv["p95_ms"] is None for iv in turn_series.intervals(points, warmup=0, latency=latency[:2]))
    assert figures["transactions"] == 100
