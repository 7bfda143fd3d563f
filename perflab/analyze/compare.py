"""Verdicts: each variant against a baseline, per thread count, with the ratio's 95% CI.

Input: Groups (analyze/summary.py) of one results directory, or of two directories whose
cells match by (variant, threads). Output: Comparison rows, the `comparisons` list of the
JSON export:

    {"threads": 2, "baseline": {"allocator": "glibc"}, "variant": {"allocator": "jemalloc"},
     "metric": "qps", "ratio": 1.043, "ci_low": 1.021, "ci_high": 1.066, "verdict": "faster"}

Kinds: `variant` compares a whole variant with the baseline variant; in a matrix of two or
more axes, `axis` rows give the marginal effect of one axis: the variant against the same
variant with only that axis set to its baseline label (the allocator effect within each
sort_buffer_size); `runs` rows compare the same cell of two results directories.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from perflab.analyze import evidence, stats
from perflab.analyze.summary import Group
from perflab.analyze.summary import groups as group_cells
from perflab.errors import UsageError

METRICS = {"qps": True, "p95": False}  # metric -> higher is better


@dataclass(frozen=True)
class Comparison:
    threads: int
    baseline: dict[str, str]
    variant: dict[str, str]
    metric: str
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str | None  # faster | slower | no significant difference | None: too few repeats
    kind: str  # variant | axis | runs
    axis: str | None  # the axis whose effect an `axis` row shows
    n_baseline: int
    n_variant: int
    reason: str | None = None  # why there is no verdict
    # faster/slower only: per-transaction figures that differ beyond noise (analyze/evidence.py)
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _values(group: Group, metric: str) -> list[float]:
    return group.qps if metric == "qps" else group.p95_ms


def compare_groups(
    base: Group, other: Group, metric: str, kind: str, axis: str | None = None, level: float = stats.LEVEL
) -> Comparison:
    result = stats.compare(_values(base, metric), _values(other, metric), METRICS[metric], level)
    reason = result.reason
    if reason is None and (base.unsettled or other.unsettled):
        reason = f"{len(base.unsettled) + len(other.unsettled)} unsettled cell(s) left out"
    return Comparison(
        other.threads,
        base.variant,
        other.variant,
        metric,
        result.ratio,
        result.low,
        result.high,
        result.verdict,
        kind,
        axis,
        len(_values(base, metric)),
        len(_values(other, metric)),
        reason,
        _evidence(base, other) if result.verdict in ("faster", "slower") else [],
    )


def _evidence(base: Group, other: Group) -> list[dict[str, Any]]:
    return [e.to_dict() for e in evidence.compare(base.cells, other.cells)]


def baseline_variant(axes: dict[str, list[str]], choices: list[str]) -> dict[str, str]:
    """The baseline variant: the first label of every axis, or the one `axis=label` picks."""
    chosen = {axis: labels[0] for axis, labels in axes.items() if labels}
    for choice in choices:
        axis, sep, label = choice.partition("=")
        if not sep or axis not in axes:
            known = ", ".join(f"{a}=<{'|'.join(v)}>" for a, v in axes.items()) or "none (one variant)"
            raise UsageError(f"--baseline {choice!r}: no axis {axis!r} in these results", f"axes: {known}")
        if label not in axes[axis]:
            raise UsageError(
                f"--baseline {choice!r}: axis {axis} has no label {label!r}", f"labels: {', '.join(axes[axis])}"
            )
        chosen[axis] = label
    return chosen


def within(
    groups: list[Group],
    axes: dict[str, list[str]],
    baseline: dict[str, str],
    metric: str = "qps",
    level: float = stats.LEVEL,
) -> list[Comparison]:
    """Every variant against `baseline`, per thread count; plus, with two or more axes, the
    marginal effect of each axis within each combination of the others."""
    out = []
    index = {(tuple(sorted(g.variant.items())), g.threads): g for g in groups}

    def find(variant: dict[str, str], threads: int) -> Group | None:
        return index.get((tuple(sorted(variant.items())), threads))

    for threads in sorted({g.threads for g in groups}):
        base = find(baseline, threads)
        if base is None:
            continue
        for group in groups:
            if group.threads == threads and group is not base:
                out.append(compare_groups(base, group, metric, "variant", level=level))
        if len(axes) < 2:
            continue
        for axis in axes:
            for group in groups:
                if group.threads != threads or group.variant.get(axis) == baseline[axis]:
                    continue
                reference = find({**group.variant, axis: baseline[axis]}, threads)
                if reference is not None:
                    out.append(compare_groups(reference, group, metric, "axis", axis, level))
    return out


def across(
    groups_a: list[Group], groups_b: list[Group], metric: str = "qps", level: float = stats.LEVEL
) -> tuple[list[Comparison], list[str]]:
    """The cells of run B against the same cells of run A; and what only one run has."""
    index = {(tuple(sorted(g.variant.items())), g.threads): g for g in groups_a}
    out, unmatched = [], []
    seen = set()
    for group in groups_b:
        key = (tuple(sorted(group.variant.items())), group.threads)
        base = index.get(key)
        if base is None:
            unmatched.append(f"only in B: {group.label} at {group.threads} threads")
            continue
        seen.add(key)
        out.append(compare_groups(base, group, metric, "runs", level=level))
    unmatched += [f"only in A: {g.label} at {g.threads} threads" for k, g in index.items() if k not in seen]
    return out, unmatched


# Host and experiment settings that make two runs incomparable when they differ.
_HOST_KEYS = ("kernel", "cpu_model", "cores", "mariadbd", "sysbench", "glibc", "memory_bytes", "hostname")
_EXPERIMENT_KEYS = ("duration", "warmup", "max_warmup", "pin", "workload", "dataset")


def metadata_differences(meta_a: dict[str, Any], meta_b: dict[str, Any]) -> list[str]:
    """What differs between two runs' host and experiment settings, one line each."""
    lines = []
    for section, keys in (("host", _HOST_KEYS), ("experiment", _EXPERIMENT_KEYS)):
        a, b = meta_a.get(section) or {}, meta_b.get(section) or {}
        for key in keys:
            if a.get(key) != b.get(key):
                lines.append(f"{section}.{key}: A has {a.get(key)!r}, B has {b.get(key)!r}")
    return lines


@dataclass(frozen=True)
class Verdicts:
    """A results directory's groups and comparisons against one baseline, as every report shows them."""

    baseline: dict[str, str]
    groups: list[Group]
    comparisons: list[Comparison]


def verdicts(
    meta: dict[str, Any],
    cells: list[dict[str, Any]],
    baselines: list[str] | None = None,
    metrics: tuple[str, ...] = tuple(METRICS),
    level: float = stats.LEVEL,
) -> Verdicts:
    """Groups of `cells` and every comparison (variant and axis rows) for each metric."""
    axes = (meta.get("experiment") or {}).get("axes") or {}
    base = baseline_variant(axes, baselines or [])
    all_groups = group_cells(cells, base if axes else None)
    rows = [c for metric in metrics for c in within(all_groups, axes, base, metric, level)]
    return Verdicts(base, all_groups, rows)
