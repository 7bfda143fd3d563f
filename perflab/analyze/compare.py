"""Verdicts: each variant against a baseline, per thread count, with the ratio's 95% CI.

Input: Groups (analyze/summary.py) of one results directory, or of two directories whose
cells match by (variant, threads). Output: Comparison rows, the `comparisons` list of the
JSON export:

    {"threads": 2, "baseline": {"allocator": "glibc"}, "variant": {"allocator": "jemalloc"},
     "metric": "qps", "ratio": 1.043, "ci_low": 1.021, "ci_high": 1.066, "verdict": "faster",
     "method": "paired", "rounds_needed": null, ...}

The ratio is estimated within rounds when it can be, else between all repeats (analyze/
ratio.py); the verdict is one of faster, slower, equivalent, inconclusive, Holm-corrected
over the family of one metric and kind in one call (analyze/verdict.py).

Kinds: `variant` compares a whole variant with the baseline variant; in a matrix of two or
more axes, `axis` rows give the marginal effect of one axis: the variant against the same
variant with only that axis set to its baseline label (the allocator effect within each
sort_buffer_size); `runs` rows compare the same cell of two results directories.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any

from perflab.analyze import across_hosts, evidence, host_speed, rate, ratio, sequential, stats
from perflab.analyze.ratio import WELCH, Estimate  # the fields below shadow the module
from perflab.analyze.summary import Group, rounds
from perflab.analyze.summary import groups as group_cells
from perflab.analyze.summary import values as summary_values
from perflab.analyze.verdict import FASTER, INCONCLUSIVE, MARGIN, SLOWER, Judgement, judge
from perflab.errors import UsageError
from perflab.variants import variant_key

METRICS = {"qps": True, "p95": False, "p99": False}  # metric -> higher is better


@dataclass(frozen=True)
class Comparison:
    threads: int
    baseline: dict[str, str]
    variant: dict[str, str]
    metric: str
    ratio: float | None  # the `method`'s: paired, the geometric mean of the per-round ratios
    ci_low: float | None
    ci_high: float | None
    verdict: str  # faster | slower | equivalent | inconclusive
    kind: str  # variant | axis | runs
    axis: str | None  # the axis whose effect an `axis` row shows
    n_baseline: int
    n_variant: int
    reason: str | None = None  # why inconclusive; cells left out
    # faster/slower only: per-transaction figures that differ beyond noise (analyze/evidence.py)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    method: str = WELCH  # paired | welch
    method_reason: str = ""
    pairs: int = 0  # rounds that hold a settled cell of both sides
    welch_ratio: float | None = None  # the unpaired estimate, beside the one used
    welch_ci_low: float | None = None
    welch_ci_high: float | None = None
    p_difference: float | None = None  # Holm-adjusted
    p_equivalence: float | None = None  # Holm-adjusted
    family: int = 0  # comparisons in the Holm family
    margin: float = MARGIN
    rounds_needed: int | None = None  # inconclusive: further rounds that would resolve it
    # [observe] host_speed (analyze/host_speed.py): ratio, interval and verdict from values brought
    # to the run's mean host speed; the estimate without that beside it; what was done and why
    adjusted: bool = False
    adjustment: str | None = None
    unadjusted_ratio: float | None = None
    unadjusted_ci_low: float | None = None
    unadjusted_ci_high: float | None = None
    # a host axis (analyze/across_hosts.py): the two sides' servers ran on different hosts; then the
    # A/A check on each host, "passed" or why not (the row is then not judged: inconclusive)
    across_hosts: bool = False
    aa_check: str | None = None
    estimate: Estimate | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("estimate")
        return out


def _values(group: Group, metric: str) -> list[float]:
    return summary_values(group, metric)


def compare_groups(
    base: Group,
    other: Group,
    metric: str,
    kind: str,
    axis: str | None = None,
    level: float = stats.LEVEL,
    margin: float = MARGIN,
    adjust: host_speed.Adjustment | None = None,
) -> Comparison:
    """One comparison, not yet judged (`judged` gives its family the verdicts): rounds pair
    within one run, never across two (kind `runs`); within one run, adjusted for the host's
    speed by `adjust` when the comparison allows it (analyze/host_speed.py)."""
    by_round = (rounds(base, metric), rounds(other, metric))
    if kind == "runs":  # two runs: their rounds do not pair, and no host-speed slope spans both
        chosen, welch, why = ratio.estimate(
            _values(base, metric), _values(other, metric), level, ratio.resolution_of(metric)
        )
        found = host_speed.Estimated(chosen, welch, why, chosen)
    else:
        found = host_speed.estimate(base, other, metric, adjust, level)
    chosen, welch, why, plain, note = found.chosen, found.welch, found.why, found.plain, found.note
    left_out = len(base.unsettled) + len(other.unsettled)
    missed = len(base.rate_missed) + len(other.rate_missed)
    reasons = [f"{left_out} unsettled cell(s) left out" if left_out else ""]
    reasons += [f"{missed} cell(s) that did not keep the rate left out" if missed else ""]
    return Comparison(
        other.threads,
        base.variant,
        other.variant,
        metric,
        chosen.ratio,
        chosen.low,
        chosen.high,
        INCONCLUSIVE,
        kind,
        axis,
        len(_values(base, metric)),
        len(_values(other, metric)),
        "; ".join(r for r in reasons if r) or None,
        method=chosen.method,
        method_reason=why,
        pairs=len(set(by_round[0]) & set(by_round[1])) if kind != "runs" else 0,
        welch_ratio=welch.ratio,
        welch_ci_low=welch.low,
        welch_ci_high=welch.high,
        margin=margin,
        adjusted=found.adjusted,
        adjustment=note,
        unadjusted_ratio=plain.ratio if note else None,
        unadjusted_ci_low=plain.low if note else None,
        unadjusted_ci_high=plain.high if note else None,
        estimate=chosen,
    )


def judged(rows: list[Comparison], groups_of: dict[int, tuple[Group, Group]] | None = None) -> list[Comparison]:
    """`rows` with their verdicts: Holm's correction over each family (one metric and kind, and
    within or across hosts: analyze/across_hosts.py, whose rows that fail their A/A check stay
    inconclusive); evidence beside faster/slower (from `groups_of`: row index -> (base, other))."""
    out = list(rows)
    families: dict[tuple[str, str, bool], list[int]] = {}  # across hosts: a family of its own
    for i, row in enumerate(rows):
        if row.aa_check in (None, across_hosts.PASSED):
            families.setdefault((row.metric, row.kind, row.across_hosts), []).append(i)
        else:  # not judged until the A/A check on each host passes
            out[i] = dataclasses.replace(row, reason="; ".join(r for r in (row.aa_check, row.reason) if r))
    for (metric, _, _), members in families.items():
        found = judge([rows[i].estimate for i in members], METRICS[metric], rows[members[0]].margin)  # type: ignore[misc]
        for i, j in zip(members, found):
            pair = (groups_of or {}).get(i)
            out[i] = _with(rows[i], j, _evidence(*pair) if pair and j.verdict in (FASTER, SLOWER) else [])
    return out


def _with(row: Comparison, j: Judgement, found: list[dict[str, Any]]) -> Comparison:
    reason = "; ".join(r for r in (j.reason, row.reason) if r) or None
    return dataclasses.replace(
        row,
        verdict=j.verdict,
        reason=reason,
        evidence=found,
        p_difference=j.p_difference,
        p_equivalence=j.p_equivalence,
        family=j.family,
        rounds_needed=j.rounds_needed,
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
    margin: float = MARGIN,
    adjust: host_speed.Adjustment | None = None,
    held: str | None = None,
) -> list[Comparison]:
    """Every variant against `baseline`, per thread count; plus, with two or more axes, the
    marginal effect of each axis within each combination of the others. Judged: the variant
    rows are one Holm family, the axis rows another. `adjust`: the run's host-speed fit. `held`:
    an axis whose label a variant's baseline shares (a rate axis: analyze/rate.py)."""
    pairs: list[tuple[Group, Group, str, str | None]] = []
    index = {(tuple(sorted(g.variant.items())), g.threads): g for g in groups}

    def find(variant: dict[str, str], threads: int) -> Group | None:
        return index.get((tuple(sorted(variant.items())), threads))

    for threads in sorted({g.threads for g in groups}):
        for g in groups:
            base = find({**baseline, held: g.variant[held]} if held else baseline, threads)
            if g.threads == threads and base is not None and g is not base:
                pairs.append((base, g, "variant", None))
        if len(axes) < 2:
            continue
        for axis in axes:
            for group in groups:
                if group.threads != threads or group.variant.get(axis) == baseline[axis]:
                    continue
                reference = find({**group.variant, axis: baseline[axis]}, threads)
                if reference is not None:
                    pairs.append((reference, group, "axis", axis))
    rows = [
        across_hosts.marked(compare_groups(b, g, metric, kind, axis, level, margin, adjust), b, g, level)
        for b, g, kind, axis in pairs
    ]
    return judged(rows, {i: (b, g) for i, (b, g, _, _) in enumerate(pairs)})


def across(
    groups_a: list[Group],
    groups_b: list[Group],
    metric: str = "qps",
    level: float = stats.LEVEL,
    margin: float = MARGIN,
) -> tuple[list[Comparison], list[str]]:
    """The cells of run B against the same cells of run A (Welch: two runs share no rounds;
    one Holm family); and what only one run has."""
    index = {(tuple(sorted(g.variant.items())), g.threads): g for g in groups_a}
    pairs, unmatched = [], []
    seen = set()
    for group in groups_b:
        key = (tuple(sorted(group.variant.items())), group.threads)
        base = index.get(key)
        if base is None:
            unmatched.append(f"only in B: {group.label} at {group.threads} threads")
            continue
        seen.add(key)
        pairs.append((base, group))
    unmatched += [f"only in A: {g.label} at {g.threads} threads" for k, g in index.items() if k not in seen]
    rows = [compare_groups(b, g, metric, "runs", level=level, margin=margin) for b, g in pairs]
    return judged(rows, dict(enumerate(pairs))), unmatched


def margin_of(meta: dict[str, Any]) -> float:
    """The run's [experiment] equivalence_margin (the default for results without one)."""
    return float((meta.get("experiment") or {}).get("equivalence_margin") or MARGIN)


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
    metrics: tuple[str, ...] | None = None,
    level: float = stats.LEVEL,
) -> Verdicts:
    """Groups of `cells` and every comparison (variant and axis rows) for each metric (None: the
    run's, analyze/rate.py: p99 first at a fixed rate)."""
    axes = (meta.get("experiment") or {}).get("axes") or {}
    base = baseline_variant(axes, baselines or [])
    all_groups = group_cells(cells, base if axes else None, axes, fixed_rate=rate.fixed_rate(meta))
    metrics = metrics or rate.metrics(meta)
    slope = host_speed.calibrated_slope(meta)
    held = rate.rate_axis(axes, cells) if rate.fixed_rate(meta) else None
    margin = margin_of(meta)
    rows = [
        c
        for metric in metrics
        for c in within(all_groups, axes, base, metric, level, margin, host_speed.fit(cells, metric, slope), held)
    ]
    adaptive = meta.get("adaptive") or {}
    if adaptive.get("stop") == sequential.STOP_VERDICT and level == stats.LEVEL and base == baseline_variant(axes, []):
        rows = sequential_verdicts(rows, cells, base, axes, adaptive, slope, rate.fixed_rate(meta))
    return Verdicts(base, all_groups, rows)


def sequential_verdicts(
    rows: list[Comparison],
    cells: list[dict[str, Any]],
    baseline: dict[str, str],
    axes: dict[str, list[str]],
    adaptive: dict[str, Any],
    slope: dict[str, Any] | None = None,
    fixed: bool = False,
) -> list[Comparison]:
    """A run that stopped on verdicts is judged by its sequential boundaries: the QPS (a fixed rate: p99) `variant`
    rows get the verdicts the looks reached (analyze/sequential.py); the others, which the run
    did not monitor, keep their fixed-sample verdicts."""
    watched = rate.P99 if fixed else "qps"  # at a fixed rate the run watched p99 (analyze/rate.py)
    design = sequential.design_of(adaptive)
    found = sequential.monitor(cells, baseline, axes, design, int(adaptive.get("rounds") or 0), slope, fixed)
    tracks = {(m.variant, m.threads): m.track for m in found}
    out = []
    for row in rows:
        track = tracks.get((variant_key(row.variant), row.threads))
        if row.kind != "variant" or row.metric != watched or track is None or row.across_hosts:
            out.append(row)  # across hosts: its own family, after the A/A checks (analyze/across_hosts.py)
        elif track.open:
            why = f"no sequential boundary crossed in {adaptive.get('rounds')} of at most {design.max_rounds} rounds"
            out.append(
                dataclasses.replace(row, verdict=INCONCLUSIVE, reason="; ".join(filter(None, [why, row.reason])))
            )
        else:
            why = f"stopped at round {track.round} of at most {design.max_rounds} on a sequential boundary"
            out.append(
                dataclasses.replace(row, verdict=track.verdict, reason=why, rounds_needed=None, evidence=row.evidence)
            )
    return out
