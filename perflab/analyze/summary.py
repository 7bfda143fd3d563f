"""Per variant x threads: steady-state figures over repeats, with 95% confidence intervals.

Input: cells as read from the store (dicts; the cell runner's rows have the same keys). The
sample of a group is one value per successful, settled repeat: that repeat's QPS (or p95)
over its measured window. Cells that did not settle are counted and named, never averaged
in. Output: one Group per (variant, threads): in the experiment file's order (thread counts,
then each axis's labels) when the axes are given, else in the order the cells ran (which
randomized blocks shuffle within each round: spec/matrix.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from perflab.analyze import stats
from perflab.variants import variant_key, variant_label


@dataclass
class Group:
    variant: dict[str, str]
    threads: int
    qps: list[float] = field(default_factory=list)  # settled repeats only
    tps: list[float] = field(default_factory=list)
    p95_ms: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)  # at a fixed rate: from the intended start
    rss_end: list[int] = field(default_factory=list)
    rss_peak: list[int] = field(default_factory=list)
    pss_end: list[int] = field(default_factory=list)
    pss_peak: list[int] = field(default_factory=list)
    # what reports show as the server's memory: "RSS", or "PSS" for a process-per-connection
    # server (PostgreSQL: an RSS sum would count shared_buffers once per backend)
    memory: str = "RSS"
    faults_per_txn: list[float] = field(default_factory=list)
    cpu_us_per_txn: list[float] = field(default_factory=list)
    cell_ids: list[int] = field(default_factory=list)
    cells: list[dict[str, Any]] = field(default_factory=list, repr=False)  # the settled ones, for evidence
    failed: int = 0
    unsettled: list[int] = field(default_factory=list)  # ids of ok cells that did not settle
    rate_missed: list[int] = field(default_factory=list)  # ids of ok cells that did not keep their rate
    replaced: list[int] = field(default_factory=list)  # ids of cells measured again (a retry's retry_of)
    stalls: int = 0  # stall windows in this group's measured windows
    ratio: float | None = None  # qps mean / baseline qps mean
    baseline: bool = False

    @property
    def key(self) -> str:
        return variant_key(self.variant)

    @property
    def label(self) -> str:
        return variant_label(self.variant)

    @property
    def memory_end(self) -> list[int]:
        """The server's memory at the end of each repeat's window, as `memory` names it."""
        return self.pss_end if self.memory == "PSS" else self.rss_end

    @property
    def memory_peak(self) -> list[int]:
        return self.pss_peak if self.memory == "PSS" else self.rss_peak

    @property
    def qps_ci(self) -> stats.Interval:
        return stats.ci(self.qps)

    @property
    def p95_ci(self) -> stats.Interval:
        return stats.ci(self.p95_ms)

    def latency_ci(self, metric: str) -> stats.Interval:
        """The interval of a latency percentile's means over repeats: "p95" or "p99"."""
        return stats.ci(self.p99_ms if metric == "p99" else self.p95_ms)

    @property
    def qps_mean(self) -> float | None:
        return statistics.fmean(self.qps) if self.qps else None

    @property
    def qps_cv(self) -> float | None:
        """Coefficient of variation of QPS over repeats (stdev / mean)."""
        return stats.cv(self.qps)

    def to_dict(self) -> dict[str, Any]:
        qps, p95 = self.qps_ci, self.p95_ci
        return {
            "variant": self.variant,
            "threads": self.threads,
            "repeats": len(self.qps),
            "failed": self.failed,
            "unsettled": len(self.unsettled),
            "rate_missed": len(self.rate_missed),
            "p99_ms_mean": mean(self.p99_ms),
            "measured_again": len(self.replaced),
            "stalls": self.stalls,
            "qps_mean": qps.mean,
            "qps_ci_low": qps.low,
            "qps_ci_high": qps.high,
            "qps_cv": self.qps_cv,
            "p95_ms_mean": p95.mean,
            "p95_ms_ci_low": p95.low,
            "p95_ms_ci_high": p95.high,
            "rss_end_bytes_mean": mean(self.rss_end),
            "rss_peak_bytes_mean": mean(self.rss_peak),
            "pss_end_bytes_mean": mean(self.pss_end),
            "memory": self.memory,
            "ratio": self.ratio,
            "baseline": self.baseline,
            "cells": self.cell_ids,
        }


def groups(
    cells: list[dict[str, Any]],
    baseline: dict[str, str] | None = None,
    axes: dict[str, list[str]] | None = None,
    *,
    memory: str = "RSS",
    fixed_rate: bool = False,
) -> list[Group]:
    """Group cells by (variant, threads), in the file's order with `axes` (meta.experiment.axes).
    The baseline per thread count is `baseline` (a full variant), or the first variant. `memory` is
    the server's memory figure (meta.server_facts.memory_figure: PSS over PostgreSQL's processes).
    `fixed_rate` (analyze/rate.py): a cell that did not keep its rate is counted, not averaged in."""
    from perflab.analyze.rate import missed, rate_axis

    by_key: dict[tuple, Group] = {}
    replaced = {cell.get("retry_of") for cell in cells} - {None}
    for cell in cells:
        key = (tuple(cell["variant"].items()), cell["threads"])
        group = by_key.setdefault(key, Group(dict(cell["variant"]), cell["threads"], memory=memory))
        if cell["id"] in replaced:  # its retry counts in its place
            group.replaced.append(cell["id"])
            continue
        if cell["status"] != "ok":
            group.failed += 1
            continue
        window_start = cell.get("window_start_s") or 0
        group.stalls += sum(1 for s in cell.get("stalls") or [] if s["end_s"] > window_start)
        if cell.get("settled") is False or cell.get("settled") == 0:
            group.unsettled.append(cell["id"])
            continue
        if fixed_rate and missed(cell):
            group.rate_missed.append(cell["id"])
            continue
        _add(group, cell)
    out = sorted(by_key.values(), key=file_order(axes)) if axes else list(by_key.values())
    held = rate_axis(axes or {}, cells) if fixed_rate else None  # a rate axis: each rate its own baseline
    baselines: dict[tuple[int, str | None], Group] = {}
    for group in out:
        at = group.variant.get(held) if held else None
        if baseline is None or group.variant == ({**baseline, held: at} if held else baseline):
            baselines.setdefault((group.threads, at), group)
    for group in out:
        base = baselines.get((group.threads, group.variant.get(held) if held else None))
        group.baseline = base is group
        if base is not None and base.qps_mean and group.qps_mean is not None:
            group.ratio = group.qps_mean / base.qps_mean
    return out


def file_order(axes: dict[str, list[str]]) -> Any:
    """Sort key of a Group: its thread count, then each axis's label as the file lists them
    (a label the file does not list, from an edited file: after the listed ones)."""
    rank = {axis: {label: i for i, label in enumerate(labels)} for axis, labels in axes.items()}

    def key(group: Group) -> tuple:
        labels = tuple(rank.get(a, {}).get(lbl, len(rank.get(a, {}))) for a, lbl in group.variant.items())
        return (group.threads, labels, group.key)

    return key


def _add(group: Group, cell: dict[str, Any]) -> None:
    summary, res = cell["summary"], cell.get("resources") or {}
    group.cell_ids.append(cell["id"])
    group.cells.append(cell)
    group.qps.append(summary["qps"])
    group.tps.append(summary["tps"])
    for values, key in ((group.p95_ms, "p95"), (group.p99_ms, "p99")):
        if summary["latency_ms"].get(key) is not None:
            values.append(summary["latency_ms"][key])
    figures: tuple[tuple[list[Any], str], ...] = (
        (group.rss_end, "rss_end_bytes"),
        (group.rss_peak, "rss_peak_bytes"),
        (group.pss_end, "pss_end_bytes"),
        (group.pss_peak, "pss_peak_bytes"),
        (group.faults_per_txn, "minor_faults_per_txn"),
        (group.cpu_us_per_txn, "server_cpu_us_per_txn"),
    )
    for figure, key in figures:
        if res.get(key) is not None:
            figure.append(res[key])


def rounds(
    group: Group, metric: str, scale: Callable[[dict[str, Any]], float | None] | None = None
) -> dict[int, float]:
    """A group's settled values keyed by round (the cell's `repeat`), each multiplied by
    `scale(cell)` when given (analyze/host_speed.py: the value at the run's mean host speed)."""
    out = {}
    for cell in group.cells:
        value = metric_value(cell["summary"], metric)
        if value is not None and cell.get("repeat") is not None:
            out[int(cell["repeat"])] = float(value) * ((scale(cell) or 1.0) if scale else 1.0)
    return out


def metric_value(summary: dict[str, Any], metric: str) -> float | None:
    """A cell summary's figure for a verdict `metric`: qps, or the latency percentile p95 or p99."""
    return summary.get("qps") if metric == "qps" else (summary.get("latency_ms") or {}).get(metric)


def values(group: Group, metric: str) -> list[float]:
    """A group's settled values of a verdict `metric`."""
    return group.qps if metric == "qps" else group.p99_ms if metric == "p99" else group.p95_ms


def adaptive_targets(cells: list[dict[str, Any]], target: float) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (variant key, threads): repeats so far, the CI's relative half-width, met or not."""
    out = {}
    for group in groups(cells):
        half = group.qps_ci.half_width
        out[(group.key, group.threads)] = {
            "repeats": len(group.qps),
            "half_width": half,
            "met": half is not None and half <= target,
        }
    return out


def mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def load(results: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(meta, cells) of a results directory, every ok cell with its steady-state fields
    (detected now from its intervals where an older perflab did not store them)."""
    from perflab.analyze import steady

    meta = results.meta()
    threshold = (meta.get("experiment") or {}).get("stall_threshold", steady.STALL_THRESHOLD)
    cells = results.cells()
    for cell in cells:
        if cell.get("warmup_method") is not None:
            continue
        if cell["status"] == "ok":
            steady.complete(cell, results.intervals(cell["id"]), threshold)
        else:  # schema 1 kept the configured warm-up here (now window_start_s); nothing was detected
            cell["warmup_s"] = None
    return meta, cells
