"""Per variant x threads: steady-state figures over repeats, and the ratio to the baseline.

Input: cells as read from the store (dicts). The steady-state figure of a cell is its
measured window (warm-up excluded, it ran as a separate sysbench invocation). Output: one
Group per (variant, threads), in the variant order of the experiment file.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Group:
    variant: dict[str, str]
    threads: int
    qps: list[float] = field(default_factory=list)
    tps: list[float] = field(default_factory=list)
    p95_ms: list[float] = field(default_factory=list)
    rss_end: list[int] = field(default_factory=list)
    faults_per_txn: list[float] = field(default_factory=list)
    cpu_us_per_txn: list[float] = field(default_factory=list)
    failed: int = 0
    ratio: float | None = None  # qps mean / baseline qps mean
    baseline: bool = False

    @property
    def label(self) -> str:
        return ", ".join(f"{a}={lbl}" for a, lbl in self.variant.items()) or "default"

    @property
    def qps_mean(self) -> float | None:
        return statistics.fmean(self.qps) if self.qps else None

    @property
    def qps_cv(self) -> float | None:
        """Coefficient of variation of QPS over repeats (stdev / mean)."""
        if len(self.qps) < 2:
            return None
        return statistics.stdev(self.qps) / statistics.fmean(self.qps)


def groups(cells: list[dict[str, Any]]) -> list[Group]:
    """Group cells by (variant, threads); baseline = first variant in run order, per thread count."""
    by_key: dict[tuple, Group] = {}
    for cell in cells:
        key = (tuple(cell["variant"].items()), cell["threads"])
        group = by_key.setdefault(key, Group(dict(cell["variant"]), cell["threads"]))
        if cell["status"] != "ok":
            group.failed += 1
            continue
        summary, res = cell["summary"], cell["resources"] or {}
        group.qps.append(summary["qps"])
        group.tps.append(summary["tps"])
        if summary["latency_ms"].get("p95") is not None:
            group.p95_ms.append(summary["latency_ms"]["p95"])
        if res.get("rss_end_bytes") is not None:
            group.rss_end.append(res["rss_end_bytes"])
        if res.get("minor_faults_per_txn") is not None:
            group.faults_per_txn.append(res["minor_faults_per_txn"])
        if res.get("server_cpu_us_per_txn") is not None:
            group.cpu_us_per_txn.append(res["server_cpu_us_per_txn"])
    out = list(by_key.values())
    baselines: dict[int, Group] = {}
    for group in out:
        base = baselines.setdefault(group.threads, group)
        group.baseline = base is group
        if base.qps_mean and group.qps_mean is not None:
            group.ratio = group.qps_mean / base.qps_mean
    return out


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None
