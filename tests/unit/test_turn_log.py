"""pgbench's per-turn counts from its per-transaction log (workloads/turn_log.py), on a log written here."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from perflab.errors import WorkloadError
from perflab.workloads import turn_log
from perflab.run.turn_series import intervals, summary

# (end epoch, latency us); -1: failed after its tries
T0 = 1_795_389_000.0


def write_log(prefix: Path, rows: list[tuple[float, int]], thread: int | None = None) -> None:
    """pgbench 15's format: client_id transaction_no time_us script_no time_epoch time_epoch_us retries."""
    lines = []
    for i, (end, lat) in enumerate(rows):
        sec = int(end)
        usec = round((end - sec) * 1e6)
        lines.append(f"0 {i} {'failed' if lat < 0 else lat} 0 {sec} {usec} 0")
    name = f"{prefix.name}.4242" + (f".{thread}" if thread else "")
    (prefix.parent / name).write_text("\n".join(lines) + "\n")


def counted(tmp_path: Path, monkeypatch, spans, at, rows_by_thread, host_ahead: float = 0.0) -> turn_log.LogCounts:
    """`host_ahead`: the log stamped by a client host's clock that far ahead of this machine's, its
    log fetched (and the shift found) once the client has ended."""
    prefix = tmp_path / "pgbench_log"
    for thread, rows in enumerate(rows_by_thread):
        write_log(prefix, [(T0 + host_ahead + e, lat) for e, lat in rows], thread)
    fetched = (lambda: -host_ahead) if host_ahead else None  # our epoch - shift = the host's
    counts = turn_log.LogCounts(prefix, statements=3, spans=[[T0 + a, T0 + b] for a, b in spans], fetched=fetched)
    clock = iter(T0 + t for t in at)
    monkeypatch.setattr(turn_log.time, "time", lambda: next(clock))
    counts.start_clock()
    for _ in at:
        counts.sample()
    counts.finish()
    return counts


@pytest.mark.parametrize("host_ahead", [0.0, 7.25, -3.5])
def test_each_sample_counts_the_transactions_ended_by_then_and_latency_only_within_a_turn(
    tmp_path, monkeypatch, host_ahead
):
    """Here, and on a client host whose clock stamps its log ahead of or behind ours (the shift its
    clock readings found): the same counts, turn by turn."""
    spans = [(0.0, 0.1), (0.3, 0.4), (0.6, 0.7)]
    rows = [
        [(0.05, 10_000), (0.31, 20_000), (0.36, -1)],  # in turn 1; spanned (began before 0.3); failed
        [(0.35, 1_000), (0.65, 2_000), (0.69, 2_000)],  # in turns 2, 3, 3 (the other thread's file)
    ]
    counts = counted(tmp_path, monkeypatch, spans, [0.12, 0.45, 0.75], rows, host_ahead)
    assert [v["Com_commit"] for _, v in counts.samples] == [1, 3, 5]
    assert [v["Questions"] for _, v in counts.samples] == [3, 9, 15]  # 3 statements a transaction
    assert [h.events for h in counts.latency] == [1, 2, 4]
    assert [h.spanned for h in counts.latency] == [0, 1, 1]
    window = counts.latency[2] - counts.latency[0]
    assert window.summary()["max"] == pytest.approx(2.0, rel=0.02) and window.spanned_share() == pytest.approx(1 / 4)
    assert counts.latency[0].summary()["p50"] == pytest.approx(10.0, rel=0.02)  # sysbench's buckets: within 1.8%


def test_a_seats_points_become_intervals_and_a_summary_over_its_running_seconds(tmp_path, monkeypatch):
    spans = [(0.0, 1.0), (2.0, 3.0)]
    rows = [[(0.5, 500), (0.9, 500), (2.2, 500), (2.5, 500), (2.8, 500)]]
    counts = counted(tmp_path, monkeypatch, spans, [0.0, 1.0, 3.0], rows)
    points = [(n, float(n), values) for n, (_, values) in enumerate(counts.samples)]
    series = intervals(points, warmup=1, statements=counts.statements, selects=counts.selects, latency=counts.latency)
    assert [(iv["t"], iv["tps"], iv["qps"], iv["warmup"]) for iv in series] == [(1, 2, 6, 1), (2, 3, 9, 0)]
    window = summary(points[1:], counts.statements, counts.latency[1:])
    assert (window["transactions"], window["queries"], window["tps"]) == (3, 9, 3.0)
    assert window["latency_ms"]["p95"] == pytest.approx(0.5, rel=0.02)


def test_a_turn_still_open_holds_what_ended_after_its_resume():
    ends = [T0 + 5.0, T0 + 6.0]
    inside = turn_log.within_turn(np.array(ends), np.array([0.1, 0.1]), [[T0 + 5.5, math.inf]])
    assert inside.tolist() == [False, True]  # before the only turn began; inside the open one


def test_an_empty_log_says_so(tmp_path, monkeypatch):
    prefix = tmp_path / "pgbench_log"
    (tmp_path / "pgbench_log.4242").write_text("")
    counts = turn_log.LogCounts(prefix, statements=1, spans=[])
    counts.sample()
    with pytest.raises(WorkloadError, match="logged no transaction"):
        counts.finish()
