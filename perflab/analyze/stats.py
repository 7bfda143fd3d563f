"""Confidence intervals over repeats, and the t-distribution helpers of the ratio estimates.

Input: one number per repeat (a repeat's steady-state QPS or p95 over its measured window;
per-second values inside one cell are autocorrelated, so they are never the samples).
Output: `Interval` (mean and 95% CI); the ratio of two variants is analyze/ratio.py's, its
verdict analyze/verdict.py's.

Why Student t and not the bootstrap: with the 3-10 repeats a benchmark affords, percentile
bootstrap intervals are too narrow (a 3-sample bootstrap has only 10 distinct resamples and
covers about 75%, not 95%); the t interval keeps its coverage for near-normal run-to-run
noise, which the unit tests check by simulation. The unpaired ratio B/A (analyze/ratio.py's
`welch`; `log_ratio_interval` here is the same on numpy arrays) uses the delta method on the
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
