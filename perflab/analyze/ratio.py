"""The ratio of a variant to its baseline, estimated two ways: within rounds (paired) and
between all repeats (Welch); and which of the two a verdict uses.

Input: one value per settled repeat of each side (QPS or p95), keyed by round (the cell's
`repeat`: a round runs every variant once, in random order, spec/matrix.py). Output: an
`Estimate` of log(other / base) with its standard error and degrees of freedom, from which
the ratio's interval, the verdict's tests and the rounds a verdict still needs follow
(analyze/verdict.py).

Why paired: the machine drifts (QPS here wanders 5-10% over minutes), and every cell of a
round runs within a few minutes of the others, so the drift is mostly shared inside a round
and cancels in the round's log-ratio log(other_r / base_r). The paired estimate is the mean
of those log-ratios over rounds, with a Student t interval over rounds (n - 1 degrees of
freedom); its ratio is the geometric mean of the per-round ratios. The unpaired estimate
(Welch: the ratio of the means, delta method on the log scale, Welch-Satterthwaite degrees of
freedom) counts the drift between rounds as noise. bench/archive/paired_width.py measures how much
narrower the paired interval is (docs/methodology.md#paired-rounds).

When paired: at least MIN_PAIRS (2) rounds hold a settled cell of both sides, and both come
from one run (two runs share no rounds: `compare A B` is always Welch). Rounds are blocks in
both designs (randomized within each round), so the paired t interval is exact from 2 rounds on
under normal per-round log-ratios; it is wide at 2 (1 degree of freedom) but it is the analysis
the design was run for. Until 2026-11-27 pairing waited for 5 rounds and fell back to Welch on
levels below that, which threw the pairing away exactly where the interleaved design needs it (3
rounds of a 20% slowdown: inconclusive). The A/A false-verdict rates of paired intervals at 2-5
rounds, measured on real runs: docs/methodology.md#paired-from-two-rounds (bench/decisive.py).

    estimate({1: 100.0, 2: 90.0, 3: 95.0}, {1: 103.0, 2: 92.5, 3: 97.9})
      -> (Estimate(method="paired", ratio=1.029, low=1.025, high=1.033, n=3, ...), welch, reason)
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from perflab.analyze import stats

PAIRED, WELCH = "paired", "welch"
MIN_PAIRS = 2  # a t interval over rounds needs 2; A/A rates at 2-5: docs/methodology.md#paired-from-two-rounds


@dataclass(frozen=True)
class Resolution:
    """How finely a metric's values are known. sysbench's p95 is a bucket of its latency
    histogram (1024 buckets, log-spaced from 0.001 to 100,000 ms: each 1.8% wide) printed to
    0.01 ms, so two rounds can report the very same p95s and their log-ratios agree exactly: a
    zero-width interval, a verdict of certainty from rounding (CI, 2026-11-27: p95 1.0196
    [1.0196, 1.0196] "slower"). The rounding error of one value is uniform over its step, so
    each value's log carries at least ((step / value)^2 + relative^2) / 12 of variance, and an
    interval is never narrower than that allows."""

    step: float = 0.0  # values are printed to this absolute step (p95: 0.01 ms)
    relative: float = 0.0  # and known to within this fraction (a histogram bucket's width)

    def log_variance(self, values: list[float]) -> float:
        """The mean rounding variance of log(value) over `values` (0 for exact values)."""
        if not values or (not self.step and not self.relative):
            return 0.0
        return statistics.fmean(((self.step / v) ** 2 + self.relative**2) / 12 for v in values if v > 0)


EXACT = Resolution()
SYSBENCH_BUCKET = math.expm1(math.log(100_000 / 0.001) / 1024)  # 1.8%: sysbench's latency histogram
# p99 likewise (pgbench's percentiles, from its per-transaction log to the microsecond, are finer)
RESOLUTIONS = {metric: Resolution(step=0.01, relative=SYSBENCH_BUCKET) for metric in ("p95", "p99")}


def resolution_of(metric: str) -> Resolution:
    return RESOLUTIONS.get(metric, EXACT)


@dataclass(frozen=True)
class Estimate:
    """log(other / base) and its uncertainty. `parts` are the independent sources of its
    variance, (variance of one observation, observations): one for paired (the per-round
    log-ratios), one per side for Welch (the squared CV of the side's repeats). So
    se^2 = sum(v / n) and the degrees of freedom are Welch-Satterthwaite's over the parts,
    n - 1 for paired; `with_more_rounds` projects both for more rounds."""

    method: str
    ratio: float | None
    n: int  # pairs (paired) or the fewer repeats of the two sides (welch)
    log_ratio: float | None = None
    parts: tuple[tuple[float, int], ...] = ()  # empty: no interval (too few values)
    level: float = stats.LEVEL
    lost: int = 0  # degrees of freedom spent on fitted covariates (the host-speed slope: 1)

    @property
    def has_interval(self) -> bool:
        return self.log_ratio is not None and bool(self.parts)

    def se_df(self, more: int = 0) -> tuple[float, float]:
        """Standard error of log_ratio and its degrees of freedom, with `more` rounds added."""
        terms = [(v / (n + more), n + more - 1 - self.lost) for v, n in self.parts]
        var = sum(t for t, _ in terms)
        if var == 0:
            return 0.0, float(sum(df for _, df in terms))
        return math.sqrt(var), var * var / sum(t * t / df for t, df in terms)

    def half_width(self, more: int = 0, level: float | None = None) -> float:
        """Half-width of the interval of log_ratio, at `level` (default: the estimate's)."""
        se, df = self.se_df(more)
        return 0.0 if se == 0 else stats.t_quantile(0.5 + (level or self.level) / 2, df) * se

    @property
    def low(self) -> float | None:
        if not self.has_interval or self.ratio is None:
            return None
        return self.ratio * math.exp(-self.half_width())

    @property
    def high(self) -> float | None:
        if not self.has_interval or self.ratio is None:
            return None
        return self.ratio * math.exp(self.half_width())


def welch(base: list[float], other: list[float], level: float = stats.LEVEL, res: Resolution = EXACT) -> Estimate:
    """Ratio of the means; the interval of its log by the delta method (var(log mean) is
    about CV^2 / n), Welch's degrees of freedom. No interval below MIN_REPEATS a side."""
    n = min(len(base), len(other))
    if not base or not other or statistics.fmean(base) <= 0 or statistics.fmean(other) <= 0:
        return Estimate(WELCH, None, n, level=level)
    ma, mb = statistics.fmean(base), statistics.fmean(other)
    log_ratio = math.log(mb / ma)
    if n < stats.MIN_REPEATS:
        return Estimate(WELCH, mb / ma, n, log_ratio, level=level)
    parts = (
        (max(variance(base) / ma**2, res.log_variance(base)), len(base)),
        (max(variance(other) / mb**2, res.log_variance(other)), len(other)),
    )
    return Estimate(WELCH, mb / ma, n, log_ratio, parts, level)


def paired(
    base: dict[int, float], other: dict[int, float], level: float = stats.LEVEL, res: Resolution = EXACT
) -> Estimate:
    """The mean of the per-round log-ratios over the rounds that hold both sides, with its t
    interval over rounds. No interval below MIN_PAIRS such rounds (or with a value <= 0)."""
    rounds = sorted(set(base) & set(other))
    if len(rounds) < MIN_PAIRS or any(base[r] <= 0 or other[r] <= 0 for r in rounds):
        return Estimate(PAIRED, None, len(rounds), level=level)
    logs = [math.log(other[r] / base[r]) for r in rounds]
    mean = statistics.fmean(logs)
    floor = res.log_variance([base[r] for r in rounds]) + res.log_variance([other[r] for r in rounds])
    return Estimate(PAIRED, math.exp(mean), len(rounds), mean, ((max(variance(logs), floor), len(rounds)),), level)


def estimate(
    base: dict[int, float] | list[float],
    other: dict[int, float] | list[float],
    level: float = stats.LEVEL,
    res: Resolution = EXACT,
) -> tuple[Estimate, Estimate, str]:
    """(the estimate a verdict uses, the Welch estimate, why that one). Values keyed by round
    can be paired; plain lists (two runs, or cells without rounds) cannot. `res`: how finely
    the values are known (resolution_of(metric))."""
    unpaired = welch(list(_values(base)), list(_values(other)), level, res)
    if not isinstance(base, dict) or not isinstance(other, dict):
        return unpaired, unpaired, "welch: the two sides share no rounds (two runs)"
    within = paired(base, other, level, res)
    if within.has_interval:
        return within, unpaired, f"paired: within the {within.n} rounds that hold both"
    if within.n >= MIN_PAIRS:
        return unpaired, unpaired, "welch: a value <= 0 has no log-ratio"
    return unpaired, unpaired, f"welch: {within.n} round(s) hold both, a paired interval needs {MIN_PAIRS}"


def variance(values: list[float]) -> float:
    """Sample variance, two-pass in floats (statistics.variance is exact, in fractions, and
    50 times slower: the simulations of the verdicts' error rates call this a million times)."""
    mean = math.fsum(values) / len(values)
    return math.fsum((x - mean) ** 2 for x in values) / (len(values) - 1)


def _values(side: dict[int, float] | list[float]) -> list[float]:
    return list(side.values()) if isinstance(side, dict) else list(side)
