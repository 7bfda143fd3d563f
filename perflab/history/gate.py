"""`perflab history NAME --fail-on slower:3%`: does the newest run start a regression?

Two questions per series (history/series.py), for the chosen metric:
  1. the newest run against the segment it follows (the runs since the last change point before
     it, at most a window): the ratio of its estimate to that segment's level, with an interval
     whose variance is the segment level's, the newest run's own (its repeats), and tau^2 (what
     runs differ by beyond their repeats: history/changes.py's, from successive differences, or
     the reference runs' own spread around their level where that is wider); judged by the verdicts of
     `perflab compare` (analyze/verdict.py: four states, and for `inconclusive` the rounds that
     would settle it). `slower` beyond the threshold fails.
  2. a change point the newest run confirms: present with it, absent without it, a regression
     beyond the threshold. It fails once, on the run that makes it detectable.
A ratio series (history/series.py) is judged where one exists, its runs' own intervals those of
the ratios they measured; the absolute series beside it are not gated.
An `inconclusive` newest run never passes silently: the gate says so, with the rounds (more
repeats in the next run) that would settle it, or that no number of rounds would, when the
run-to-run variation alone is wider than the margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from perflab.analyze import ratio, stats
from perflab.analyze.compare import METRICS, Comparison
from perflab.analyze.gate import Gate
from perflab.analyze.verdict import INCONCLUSIVE, MARGIN, judge
from perflab.history import changes
from perflab.history.series import Series


@dataclass(frozen=True)
class RunEstimate(ratio.Estimate):
    """log(newest / segment level): `fixed` is the variance more rounds of the newest run cannot
    shrink (the segment level's and tau^2, with `fixed_df`); `parts` is the newest run's own."""

    fixed: float = 0.0
    fixed_df: float = 1.0

    def se_df(self, more: int = 0) -> tuple[float, float]:
        terms = [(v / (n + more), n + more - 1) for v, n in self.parts] + [(self.fixed, self.fixed_df)]
        var = sum(t for t, _ in terms)
        if var == 0:
            return 0.0, float(sum(df for _, df in terms))
        return math.sqrt(var), var * var / sum(t * t / max(df, 1) for t, df in terms)


@dataclass(frozen=True)
class Finding:
    series: Series
    comparison: Comparison  # the newest run against the segment before it
    confirmed: changes.ChangePoint | None = None  # a regression change point the newest run confirms


def reference(s: Series) -> tuple[int, int]:
    """[start, end) of the runs the newest is compared with: since the last change point before it."""
    last = len(s.estimates) - 1
    cuts = [c.index for c in (s.analysis.change_points if s.analysis else []) if c.index < last]
    start = max(cuts[-1] if cuts else 0, last - s.params[2])
    return start, last


def newest_estimate(s: Series) -> RunEstimate | None:
    start, last = reference(s)
    points = s.points()
    ref = [i for i in range(start, last) if points[i].mean]
    new = points[last]
    if not ref or not new.mean or s.analysis is None:
        return None
    own = [changes.log_variance(points[i]) for i in ref]
    series_tau2 = s.analysis.tau**2
    # the reference runs' own spread beyond their repeats: a host whose level persists for runs
    # and then moves (two levels 7.5% apart, measured) keeps successive differences, and so the
    # series' tau, small, while a run on its other level is no regression
    logs = [math.log(m) for i in ref if (m := points[i].mean)]  # every reference run has its mean
    tau2 = max(series_tau2, reference_spread(logs, own))
    weights = [1 / ((v if v is not None else tau2) + tau2 or 1e-12) for v in own]
    level = sum(w * x for w, x in zip(weights, logs)) / sum(weights)
    d = math.log(new.mean) - level
    own_part = newest_part(new)
    if own_part is None or len(ref) < 2:  # as `compare`: no interval from 2 repeats
        return RunEstimate(ratio.WELCH, math.exp(d), new.n or len(new.values), d, ())
    return RunEstimate(
        ratio.WELCH,
        math.exp(d),
        own_part[1],
        d,
        (own_part,),
        fixed=1 / sum(weights) + tau2,
        # tau^2 from the series' differences, or from the reference runs' spread when it is wider
        fixed_df=(max(len(ref), len(s.analysis.usable) - 1) if tau2 == series_tau2 else len(ref)) - 1,
    )


def newest_part(new: changes.Point) -> tuple[float, int] | None:
    """The newest run's own variance of log(mean) as (one repeat's or pair's, how many): from its
    repeats, or for a ratio from the interval its run measured; None without an interval."""
    if new.var is not None and new.n >= 2:
        return new.var * new.n, new.n
    if len(new.values) < stats.MIN_REPEATS or not new.mean:
        return None
    return ratio.variance(new.values) / new.mean**2, len(new.values)


def reference_spread(logs: list[float], own: list[float | None]) -> float:
    """The variance of the reference runs' log estimates around their mean, less what their own
    repeats give them (0 with fewer than 3 runs, or when their repeats explain it all)."""
    if len(logs) < 3:
        return 0.0
    mean = sum(logs) / len(logs)
    spread = sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)
    known = [v for v in own if v is not None]
    return max(0.0, spread - (sum(known) / len(known) if known else 0.0))


def judge_newest(s: Series, margin: float = MARGIN) -> Comparison:
    """The newest run of `s` against its reference segment, judged as `compare` judges."""
    est = newest_estimate(s)
    start, last = reference(s)
    where: dict[str, Any] = {
        "threads": s.threads,
        "baseline": {"runs": f"{start + 1}-{last}"},
        "variant": s.variant,
        "metric": s.metric,
        "kind": "history",
        "axis": None,
        "n_baseline": last - start,
    }
    if est is None:
        return Comparison(
            **where,
            ratio=None,
            ci_low=None,
            ci_high=None,
            verdict=INCONCLUSIVE,
            n_variant=0,
            reason="no earlier run to compare with",
        )
    j = judge([est], METRICS.get(s.metric, True), margin)[0]
    return Comparison(
        **where,
        ratio=est.ratio,
        ci_low=est.low,
        ci_high=est.high,
        verdict=j.verdict,
        n_variant=est.n,
        reason=j.reason,
        method="history",
        p_difference=j.p_difference,
        p_equivalence=j.p_equivalence,
        family=1,
        margin=margin,
        rounds_needed=j.rounds_needed,
        estimate=est,
    )


def confirmed_by_newest(s: Series, gate: Gate) -> changes.ChangePoint | None:
    """A regression change point beyond the threshold that the newest run makes detectable."""
    if s.analysis is None or len(s.estimates) < 2:
        return None
    before = s.detect(s.points()[:-1])
    known = {c.index for c in before.change_points}
    for c in s.analysis.change_points:
        if any(abs(c.index - k) < s.params[1] for k in known):  # the same step, its position refined
            continue
        if not _beyond(c.ratio, c.high if METRICS.get(s.metric, True) else c.low, s, gate):
            continue
        return c
    return None


def _beyond(value: float, far: float, s: Series, gate: Gate) -> bool:
    """A step whose ratio and whole interval lie on the slow side, its ratio beyond the threshold."""
    if METRICS.get(s.metric, True):
        return far < 1 and value < 1 - gate.threshold
    return far > 1 and value > 1 + gate.threshold


def check(series: list[Series], gate: Gate, margin: float = MARGIN) -> list[Finding]:
    """Every gated series' newest run, judged; the runs the gate fails are those with `fails`.
    Where a ratio series exists, it is judged and the absolute series beside it are not (Series.gated)."""
    newest = max((s.runs[-1].record.started_at for s in series), default=None)
    out = []
    for s in series:
        if s.runs[-1].record.started_at != newest or not s.gated:  # not run by the newest run; or not gated
            continue
        out.append(Finding(s, judge_newest(s, margin), confirmed_by_newest(s, gate)))
    return out


def fails(finding: Finding, gate: Gate) -> bool:
    return gate.fails(finding.comparison) or finding.confirmed is not None


def inconclusive(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.comparison.verdict == INCONCLUSIVE]


def unsettled_line(f: Finding) -> str:
    """What an inconclusive newest run needs, in one line."""
    c = f.comparison
    ratio_text = f"ratio {c.ratio:.3f}" if c.ratio is not None else "no ratio"
    if c.rounds_needed is not None:
        more = f"about {c.rounds_needed} more round(s) in the next run would settle it"
    elif c.ratio is None:
        more = c.reason or "no estimate"
    else:
        more = "no number of rounds would: the run-to-run variation alone is wider than the margin"
    return f"{f.series.label} ({f.series.metric}): inconclusive, {ratio_text}; {more}"


def failure_line(f: Finding, gate: Gate) -> str:
    c = f.comparison
    if f.confirmed is not None:
        k = f.confirmed
        run = f.series.runs[k.index].record
        return (
            f"{f.series.label} ({f.series.metric}): a regression segment starts at the run of {run.started_at} "
            f"({run.directory}): ratio {k.ratio:.3f} [{k.low:.3f}-{k.high:.3f}], p = {k.p:.2g}"
        )
    return (
        f"{f.series.label} ({f.series.metric}): the newest run is {gate.describe()} than runs {c.baseline['runs']}"
        f": ratio {c.ratio:.3f} [{c.ci_low:.3f}-{c.ci_high:.3f}]"
    )
