"""The noise floor of a differential profile: how far one function's samples per transaction
can move between two variants by chance, for all the functions of the diff at once.

Input: for A and B, a matrix of sample counts (one row per repeat, one column per function)
and each repeat's transactions. Output: `Floor`, per function the change (mean of B's
per-transaction values minus A's) and its noise floor, the half-width of a simultaneous 95%
interval over the m functions of the diff; a change larger than its floor is significant.

Why simultaneous: a diff has hundreds of functions, and a 95% interval per function let
identical profiles show a "significant" function in most diffs at 3 repeats (measured by
bench/stats_rates.py). The 5% is spent on the whole diff instead: each function at 0.05 / m
(Bonferroni; z = 3.8 at m = 300), where m counts only the functions with enough samples to
show a change at all (Tarone): one with 3 samples cannot, whatever the other side has.
Why pooled: each function's own spread comes from 2-3 repeats a side, and Student t at
0.05 / m with 2-4 degrees of freedom is 13-90, which would hide every change. The variance
of a function's per-transaction mean is modelled for all functions together, as limma and
edgeR do for genes:
  - sampling: counts are Poisson, so a repeat's variance is count / transactions^2 (at least
    one sample, so a function absent from one side still has a floor);
  - run to run: a relative variance `phi` shared by the functions (a common CV^2), fitted so
    that the functions' observed spread between repeats averages to the model (Pearson's
    moment estimate; 0 when sampling explains the spread);
  - each function's own spread moderates the model with `d0` prior degrees of freedom,
    estimated from how much the spreads of the functions that run-to-run noise dominates
    scatter around the model beyond chance (limma: var(log ratio) - trigamma(df/2) =
    trigamma(d0/2)); infinite when they do not, 0 when too few functions inform the model
    (then each function stands on its own spread with Student t, as before pooling).
With one repeat on a side nothing is known of run-to-run noise: the floor is sampling
noise alone (a few % of run-to-run change in a function with 10^5 samples exceeds it).

    floor(counts_a, txn_a, counts_b, txn_b).noise  ->  array([0.0031, 0.0008, ...])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

ALPHA = 0.05  # family-wise: the chance that identical profiles show any change outside its floor
MIN_COUNT = 5  # samples per repeat, on average, for a function to inform the pooled model
MIN_FUNCTIONS = 3  # fewer informative functions: no pooling


@dataclass(frozen=True)
class Floor:
    a_mean: np.ndarray
    b_mean: np.ndarray
    noise: np.ndarray  # half-width of the simultaneous interval of b_mean - a_mean
    phi: float  # run-to-run relative variance shared by all functions (CV^2)
    d0: float  # prior degrees of freedom of the pooled model (inf: it alone; 0: each function alone)
    df: int  # degrees of freedom of the repeats' spread (na + nb - 2; 0: a side has one repeat)
    quantile: float  # the critical value the standard errors are multiplied by
    tested: int  # m: the functions that could show a change

    @property
    def delta(self) -> np.ndarray:
        return self.b_mean - self.a_mean


@dataclass(frozen=True)
class _Side:
    mean: np.ndarray  # per function, mean over repeats of count / transactions
    sampling: np.ndarray  # Poisson variance of that mean
    spread: np.ndarray  # observed variance of that mean (sample variance / n); 0 with one repeat
    n: int


def _side(counts: np.ndarray, txn: np.ndarray) -> _Side:
    n = len(txn)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = counts / txn[:, None]
        inv2 = np.where(txn > 0, 1 / np.where(txn > 0, txn, 1) ** 2, 0.0)[:, None]
    sampling = (np.maximum(counts, 1) * inv2).sum(0) / n**2
    spread = values.var(0, ddof=1) / n if n > 1 else np.zeros(counts.shape[1])
    return _Side(values.mean(0), sampling, spread, n)


def shared_phi(spread: np.ndarray, sampling: np.ndarray, scale: np.ndarray) -> float:
    """phi such that spread / (sampling + phi * scale) averages to 1 (0 if sampling suffices)."""

    def excess(phi: float) -> float:
        return float(np.mean(spread / (sampling + phi * scale))) - 1.0

    if len(spread) == 0 or excess(0.0) <= 0:
        return 0.0
    high = 1e-6
    while excess(high) > 0:
        high *= 4
    from scipy import optimize  # 0.15 CPU-s to import: only once a profile's noise is fitted, not at every start

    return float(optimize.brentq(excess, 0.0, high))


def prior_df(ratio: np.ndarray, df: int) -> float:
    """limma's prior degrees of freedom from spread / model ratios of `df` degrees of freedom."""
    logs = np.log(ratio[ratio > 0])
    if len(logs) < MIN_FUNCTIONS:
        return 0.0
    excess = float(np.var(logs, ddof=1)) - float(special.polygamma(1, df / 2))
    if excess <= 1e-8:  # no more scatter than chance: the model holds for every function
        return math.inf
    from scipy import optimize

    return 2 * float(optimize.brentq(lambda x: float(special.polygamma(1, x)) - excess, 1e-10, 1e10))


def floor(
    counts_a: np.ndarray, txn_a: np.ndarray, counts_b: np.ndarray, txn_b: np.ndarray, alpha: float = ALPHA
) -> Floor:
    """Per function: A's and B's mean per-transaction values and the noise floor of the change."""
    a, b = _side(counts_a, txn_a), _side(counts_b, txn_b)
    sampling = a.sampling + b.sampling
    df = a.n + b.n - 2 if a.n > 1 and b.n > 1 else 0
    spread, scale = a.spread + b.spread, a.mean**2 / a.n + b.mean**2 / b.n
    phi, d0 = 0.0, math.inf
    if df:
        informs = counts_a.sum(0) + counts_b.sum(0) >= MIN_COUNT * (a.n + b.n)
        phi, d0 = _pooled(spread, sampling, scale, informs, df)
    model = sampling + phi * scale
    variance = model if math.isinf(d0) else (d0 * model + df * spread) / (d0 + df)
    # the floor is never below quantile * sqrt(sampling): a function whose mean A + mean B is
    # under that cannot show a change, so it does not count in the m of 0.05 / m (Tarone)
    reach = (a.mean + b.mean) / np.sqrt(sampling)
    tested = _tested(reach, lambda k: _quantile(d0 + df, 1 - alpha / (2 * k)))
    quantile = float(_quantile(d0 + df, 1 - alpha / (2 * tested)))
    noise = quantile * np.sqrt(np.maximum(variance, sampling))
    return Floor(a.mean, b.mean, noise, phi, d0, df, quantile, tested)


def _quantile(df: float, p: Any) -> Any:
    return special.ndtri(p) if math.isinf(df) else special.stdtrit(df, p)


def _tested(reach: np.ndarray, quantile: Any) -> int:
    """The smallest k such that at most k functions could pass the critical value of 0.05 / k."""
    ks = np.arange(1, len(reach) + 1)
    if len(ks) == 0:
        return 1
    able = len(reach) - np.searchsorted(np.sort(reach), quantile(ks), side="right")
    return int(ks[np.argmax(able <= ks)])


def _pooled(
    spread: np.ndarray, sampling: np.ndarray, scale: np.ndarray, informs: np.ndarray, df: int
) -> tuple[float, float]:
    """(phi, d0) from the functions with enough samples to inform them; (0, 0) if too few do."""
    informs = informs & (scale > 0)
    if informs.sum() < MIN_FUNCTIONS:
        return 0.0, 0.0
    phi = shared_phi(spread[informs], sampling[informs], scale[informs])
    model = sampling + phi * scale
    run_to_run = informs & (phi * scale > sampling)
    pick = run_to_run if run_to_run.sum() >= MIN_FUNCTIONS else informs
    return phi, prior_df(spread[pick] / model[pick], df)
