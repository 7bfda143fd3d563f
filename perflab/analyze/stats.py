"""Confidence intervals over repeats, and ratio intervals with verdicts.

Input: one number per repeat (a repeat's steady-state QPS or p95 over its measured window;
per-second values inside one cell are autocorrelated, so they are never the samples).
Output: `Interval` (mean and 95% CI) and `RatioInterval` (B/A with its 95% CI).

Why Student t and not the bootstrap: with the 3-10 repeats a benchmark affords, percentile
bootstrap intervals are too narrow (a 3-sample bootstrap has only 10 distinct resamples and
covers about 75%, not 95%); the t interval keeps its coverage for near-normal run-to-run
noise, which the unit tests check by simulation. The ratio B/A uses the delta method on the
log scale with Welch's degrees of freedom (unequal variances and repeat counts, as adaptive
repeats produce), so the interval is asymmetric like a ratio should be. Welch's degrees of
freedom come out too high when the side with fewer repeats carries most of the uncertainty
(3 repeats against 10 at one CV: 6% false positives at 95%, 0.4% at 99.9%); Hsu's min(n) - 1
would fix that at the cost of a third of the power at 3 repeats, so the README says it
instead. bench/stats_rates.py measures all of it (skewed, heavy-tailed, outlier noise).

    ci([100.0, 101.0, 99.5])  ->  Interval(mean=100.17, low=98.27, high=102.06, n=3)
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

LEVEL = 0.95
MIN_REPEATS = 3  # fewer: no interval is given (two points say nothing about their spread)

FASTER, SLOWER, SAME = "faster", "slower", "no significant difference"


@dataclass(frozen=True)
class Interval:
    mean: float | None
    low: float | None
    high: float | None
    n: int

    @property
    def half_width(self) -> float | None:
        """Relative half-width of the interval: (high - low) / 2 / mean."""
        if self.low is None or self.high is None or not self.mean:
            return None
        return (self.high - self.low) / 2 / abs(self.mean)


@dataclass(frozen=True)
class RatioInterval:
    ratio: float | None
    low: float | None
    high: float | None
    verdict: str | None  # faster | slower | no significant difference | None (too few repeats)
    reason: str | None = None


def t_quantile(p: float, df: float) -> float:
    """Student t quantile (scipy.special, not scipy.stats: a tenth of the import time)."""
    return float(special.stdtrit(df, p))


def t_two_sided_p(t: float, df: float) -> float:
    """Two-sided p-value of a t statistic."""
    return float(2 * special.stdtr(df, -abs(t)))


def welch_half_width(a: list[float], b: list[float], level: float = LEVEL) -> float | None:
    """Half-width of the `level` interval of mean(b) - mean(a) (Welch); None below 2 values a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return 0.0
    df = (va + vb) ** 2 / ((va**2 / (len(a) - 1)) + (vb**2 / (len(b) - 1)))
    return t_quantile(0.5 + level / 2, df) * math.sqrt(va + vb)


def welch_p(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of Welch's t-test (unequal variances)."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return 0.0 if statistics.fmean(a) != statistics.fmean(b) else 1.0
    t = (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
    return t_two_sided_p(t, df)


def mean_half_width(stdev: Any, n: Any, level: float = LEVEL) -> Any:
    """Half-width of the t interval of a mean. Numbers or numpy arrays alike: the simulations
    that check the coverage (tests/unit/test_stats.py, bench/stats_rates.py) pass 10^5 at once."""
    return special.stdtrit(n - 1, (1 + level) / 2) * stdev / np.sqrt(n)


def log_ratio_interval(
    mean_a: Any, var_a: Any, n_a: Any, mean_b: Any, var_b: Any, n_b: Any, level: float = LEVEL
) -> tuple[Any, Any]:
    """log(mean_b / mean_a) and the half-width of its interval: the delta method (the variance
    of log(mean) is about var / (n mean^2)) with Welch's degrees of freedom. Numbers or numpy
    arrays alike, as `mean_half_width`."""
    va = var_a / (n_a * mean_a * mean_a)
    vb = var_b / (n_b * mean_b * mean_b)
    df = (va + vb) ** 2 / (va * va / (n_a - 1) + vb * vb / (n_b - 1))
    return np.log(mean_b / mean_a), special.stdtrit(df, (1 + level) / 2) * np.sqrt(va + vb)


def ci(values: list[float], level: float = LEVEL) -> Interval:
    """Mean and its t interval; no interval below MIN_REPEATS values."""
    n = len(values)
    if n == 0:
        return Interval(None, None, None, 0)
    mean = statistics.fmean(values)
    if n < MIN_REPEATS:
        return Interval(mean, None, None, n)
    half = float(mean_half_width(statistics.stdev(values), n, level))
    return Interval(mean, mean - half, mean + half, n)


def cv(values: list[float]) -> float | None:
    """Coefficient of variation (stdev / mean) over repeats; None below 2 values."""
    if len(values) < 2 or not statistics.fmean(values):
        return None
    return statistics.stdev(values) / abs(statistics.fmean(values))


def ratio_ci(
    base: list[float], other: list[float], level: float = LEVEL
) -> tuple[float | None, float | None, float | None]:
    """other/base means and the CI of that ratio: delta method on log(mean), Welch df."""
    if not base or not other or statistics.fmean(base) <= 0 or statistics.fmean(other) <= 0:
        return None, None, None
    ma, mb = statistics.fmean(base), statistics.fmean(other)
    ratio = mb / ma
    if len(base) < MIN_REPEATS or len(other) < MIN_REPEATS:
        return ratio, None, None
    var_a, var_b = statistics.variance(base), statistics.variance(other)
    if var_a == var_b == 0:
        return ratio, ratio, ratio
    _, half = log_ratio_interval(ma, var_a, len(base), mb, var_b, len(other), level)
    return ratio, ratio * math.exp(-half), ratio * math.exp(half)


def compare(
    base: list[float], other: list[float], higher_is_better: bool = True, level: float = LEVEL
) -> RatioInterval:
    """Ratio other/base with its CI and a verdict: `faster` when the whole interval says
    better (above 1 for QPS, below 1 for latency), `slower` when it says worse."""
    ratio, low, high = ratio_ci(base, other, level)
    if ratio is None:
        return RatioInterval(None, None, None, None, "no successful repeats on one side")
    if low is None or high is None:
        n = min(len(base), len(other))
        return RatioInterval(
            ratio, None, None, None, f"{n} repeat(s): at least {MIN_REPEATS} are needed for an interval"
        )
    if low > 1:
        verdict = FASTER if higher_is_better else SLOWER
    elif high < 1:
        verdict = SLOWER if higher_is_better else FASTER
    else:
        verdict = SAME
    return RatioInterval(ratio, low, high, verdict)
