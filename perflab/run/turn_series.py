"""A seat's counters -> its per-second intervals and its window's summary (the interleaved design).

Input: points `(whole seconds of turns so far, seconds run, SHOW GLOBAL STATUS-like counters)`,
one at every turn's end and every second inside a turn, and the client's latency histogram at
each (workloads/turn_latency.py). Output: intervals and a summary named as sysbench's are
(docs/results-format.md), rates over the seconds the client really ran.

    intervals(points, warmup=5) -> [{"t": 1.0, "warmup": 1, "tps": 812.0, "qps": 16240.0, ...}, ...]
"""

from __future__ import annotations

import itertools
from typing import Any

from perflab.observers.status import STATEMENTS
from perflab.workloads.turn_latency import Histogram

Point = tuple[int, float, dict[str, float]]  # (whole seconds of turns so far, seconds run, the counters)
WRITES = ("Com_insert", "Com_update", "Com_delete", "Com_replace", "Com_insert_select", "Com_replace_select")


def intervals(
    points: list[Point], warmup: int, statements: int = STATEMENTS, latency: list[Histogram] | None = None
) -> list[dict[str, Any]]:
    """One interval per sampled second of running time, from the counters at its ends: `t` is
    the whole seconds of turns so far (1, 2, ...), the rates are over the seconds really run;
    p95_ms from the latency histograms at its ends (`latency`, one per point; None without)."""
    out = []
    hists = latency if latency is not None and len(latency) == len(points) else [None] * len(points)
    for ((_, a0, v0), (nominal, a1, v1)), (h0, h1) in zip(
        itertools.pairwise(points), itertools.pairwise(hists), strict=True
    ):
        seconds = a1 - a0
        if seconds <= 0:
            continue
        reads = _delta(v0, v1, "Com_select")
        writes = sum(_delta(v0, v1, k) for k in WRITES)
        queries = _delta(v0, v1, "Questions") - statements
        commits = _delta(v0, v1, "Com_commit")
        out.append(
            {
                "t": float(nominal),
                "warmup": int(nominal <= warmup),
                "tps": round((commits or queries) / seconds, 2),
                "qps": round(queries / seconds, 2),
                "reads": round(reads / seconds, 2),
                "writes": round(writes / seconds, 2),
                "other": round(max(0.0, queries - reads - writes) / seconds, 2),
                "p95_ms": (h1 - h0).percentile(95) if h0 is not None and h1 is not None else None,
                "errors_per_s": None,
                "reconnects_per_s": None,
            }
        )
    return out


def summary(
    points: list[Point], statements: int = STATEMENTS, latency: list[Histogram] | None = None
) -> dict[str, Any]:
    """The measured window's figures from its points, as sysbench's summary names them: the
    statements less the sampler's own, COMMITs as transactions (none: a statement is one);
    latency from the histograms at its first and last point (`latency`, one per point)."""
    (_, a0, first), (_, a1, last) = points[0], points[-1]
    seconds = a1 - a0
    queries = _delta(first, last, "Questions") - statements * (len(points) - 1)
    transactions = _delta(first, last, "Com_commit") or queries
    return {
        "transactions": int(transactions),
        "queries": int(queries),
        "tps": round(transactions / seconds, 2) if seconds > 0 else None,
        "qps": round(queries / seconds, 2) if seconds > 0 else None,
        "errors": None,
        "errors_per_s": None,
        "reconnects": None,
        "total_time_s": round(seconds, 3),
        "latency_ms": (latency[-1] - latency[0]).summary()
        if latency and len(latency) == len(points)
        else dict.fromkeys(("min", "avg", "max", "p50", "p95", "p99")),
    }


def _delta(v0: dict[str, float], v1: dict[str, float], name: str) -> float:
    return v1.get(name, 0.0) - v0.get(name, 0.0)
