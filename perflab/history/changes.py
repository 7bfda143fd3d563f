"""Change points in a series of runs, each run weighted by its own uncertainty.

Input: one series' points, oldest first: each run's estimate (the mean of its settled repeats)
with its repeats' values or its 95% interval. Output: ChangePoints, each the first run of a new
segment, with its permutation p-value and the step's ratio and interval:

    detect([Point(100.0, [99.1, 100.4, 100.5]), ...])
      -> [ChangePoint(index=31, p=0.0005, ratio=0.968, low=0.957, high=0.979, ...)]

The method (docs/history.md#change-points, and why):
  - on the log scale, run i's estimate x_i has variance s_i^2 + tau^2: s_i^2 its own (the
    squared CV of its repeats over n, or from its interval), tau^2 what runs of one build differ
    by beyond their own repeats (a fresh host state each night), estimated robustly from the
    successive differences (their MAD, less the runs' own parts): var(x_i+1 - x_i) = s_i^2 +
    s_i+1^2 + 2 tau^2 where no step lies between them;
  - each run weighs w_i = 1 / (s_i^2 + tau^2): a run of 3 noisy repeats counts less than one
    of 10 quiet ones;
  - a split at k is scored by the weighted likelihood-ratio (CUSUM) statistic
    T_k = (m_left - m_right)^2 / (1/W_left + 1/W_right), chi-square(1) under "no change" with
    known variances; the best split's p-value comes from permutations of the (x_i, w_i) pairs
    (the max over k has no simple law, and permutations need no normality: as E-divisive);
  - for a ratio series (each run's ratio to its in-run baseline, with the interval the run
    measured), the INTERVAL test: the null histories are drawn from each run's own interval and
    tau^2, tau^2 estimated again in each (a parametric bootstrap). A handful of runs permuted is a
    coarse null (six runs split 3 and 3 only 20 ways), while a ratio's interval is a measurement
    of its run (paired over its rounds), so the test may use it: six nightly runs can show a step;
  - binary segmentation, each segment at least `min_size` runs, within windows of `window`
    runs overlapping by half (Otava's E-divisive: window 50); a split is kept at p <= `alpha`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from perflab.analyze import ratio, stats

WINDOW = 50  # as Otava's E-divisive
ALPHA = 0.02  # Otava: 0.001; why this one: docs/history.md#change-points (bench/history_detection.py)
MIN_SIZE = 3  # runs in a segment, at least
SEED = 20261127  # permutations are drawn from a fixed seed: one series, one answer
BATCH, MAX_PERMUTATIONS, EXCEEDED = 200, 20000, 20  # permutations: split() says how
PRIOR_DF = 4  # a run's own spread below the series' pooled one is raised toward it by this many degrees of freedom
CHI2_1_MEDIAN = 0.454936
PERMUTATION, INTERVAL = "permutation", "interval"  # the null of a split's p-value: split() says which is which


@dataclass(frozen=True)
class Point:
    mean: float | None
    values: list[float] = field(default_factory=list)
    low: float | None = None
    high: float | None = None
    n: int = 0
    var: float | None = None  # the variance of log(mean) when the run measured it itself (a ratio's se^2)
    df: float | None = None  # and its degrees of freedom


@dataclass(frozen=True)
class Segment:
    start: int  # index of its first run
    end: int  # index after its last run
    level: float  # weighted mean of its runs (geometric)
    low: float  # 95% interval of the level
    high: float


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first run of the new segment
    p: float  # permutation p-value of the split, within its window
    ratio: float  # the new segment's level / the previous one's
    low: float  # 95% interval of the ratio
    high: float


@dataclass(frozen=True)
class Analysis:
    change_points: list[ChangePoint]
    segments: list[Segment]
    tau: float  # run-to-run CV beyond the runs' own repeats
    usable: list[int]  # indices of points with an estimate (the others are left out)


def log_variance(point: Point) -> float | None:
    """The variance of log(mean) from the run's own repeats (or its interval); None: unknown."""
    cv2 = own_cv2(point)
    return None if cv2 is None else cv2[0] / max(point.n or len(point.values), 1)


def own_cv2(point: Point) -> tuple[float, int] | None:
    """(the squared CV of one repeat of the run, its degrees of freedom), or None."""
    if point.mean is None or point.mean <= 0:
        return None
    if point.var is not None and point.n >= 2:  # a ratio's: se^2 = (one pair's variance) / pairs
        return point.var * point.n, int(point.df or point.n - 1)
    if len(point.values) >= 2:
        return ratio.variance(point.values) / point.mean**2, len(point.values) - 1
    if point.low is not None and point.high is not None and point.n >= 2 and point.low > 0:
        half = (math.log(point.high) - math.log(point.low)) / 2
        return (half / stats.t_quantile(0.975, point.n - 1)) ** 2 * point.n, point.n - 1
    return None


def own_variances(points: list[Point]) -> np.ndarray:
    """Each run's variance of log(mean): its repeats' squared CV over its repeats, raised toward the
    series' typical one (the median) by PRIOR_DF degrees of freedom when below it (3 repeats that
    happen to agree are not a precise run), never lowered: a run that measured a wide spread keeps
    it, or its distance from its neighbours would be taken for the runs' own variation (tau^2) and
    hide a step (six nightly ratios 1.00, 1.02, 0.98 | 0.66, 0.58 (0.34-1.00), 0.67 showed none);
    a run without repeats is as uncertain as the least certain one."""
    found = [own_cv2(p) for p in points]
    known = [f for f in found if f is not None]
    if not known:
        return np.zeros(len(points))
    pooled = float(np.median([v for v, _ in known]))  # the median: one wild run must not widen the others
    out: list[float | None] = []
    for p, f in zip(points, found):
        if f is None:
            out.append(None)
            continue
        v, df = f
        out.append(max(v, (v * df + pooled * PRIOR_DF) / (df + PRIOR_DF)) / max(p.n or len(p.values), 1))
    worst = max(v for v in out if v is not None)
    return np.array([worst if v is None else v for v in out], dtype=float)


def between_runs(x: np.ndarray, own: np.ndarray) -> float:
    """tau^2, what runs differ by beyond their own variance: the value that makes the median of
    the squared successive differences, each over its variance own_i + own_i+1 + 2 tau^2, the
    median of chi-square(1) (0.455). The median ignores the few differences that span a step."""
    if len(x) < 3:
        return 0.0
    d2, base = np.diff(x) ** 2, own[1:] + own[:-1]

    def excess(tau2: float) -> float:
        return float(np.median(d2 / np.maximum(base + 2 * tau2, 1e-18))) - CHI2_1_MEDIAN

    if excess(0.0) <= 0:
        return 0.0
    lo, hi = 0.0, float(np.max(d2))
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return hi


def scores(y: np.ndarray, w: np.ndarray, min_size: int) -> np.ndarray:
    """T_k for every split k in [min_size, L - min_size] (rows: permutations, if 2-D)."""
    cw, cwy = np.cumsum(w, axis=-1), np.cumsum(w * y, axis=-1)
    total_w, total_wy = cw[..., -1:], cwy[..., -1:]
    k = slice(min_size - 1, y.shape[-1] - min_size)
    wl, swl = cw[..., k], cwy[..., k]
    wr, swr = total_w - wl, total_wy - swl
    return (swl / wl - swr / wr) ** 2 / (1 / wl + 1 / wr)


def split(
    y: np.ndarray, w: np.ndarray, min_size: int, alpha: float, rng: np.random.Generator, own: np.ndarray | None = None
) -> tuple[int, float]:
    """(the best split, its p-value); (-1, 1.0) for a segment too short to split.

    The null histories are permutations (`own` None) or, for the interval test, draws from each
    run's own interval and tau^2 (`own`: the runs' own variances; module docstring). They come in
    batches of BATCH, up to 20 / alpha of them (at most MAX_PERMUTATIONS), and stop once EXCEEDED
    of them beat the split (Besag and Clifford's sequential p-value): a split that is nowhere near
    significant costs one batch, a significant one every draw."""
    if len(y) < 2 * min_size:
        return -1, 1.0
    observed = scores(y, w, min_size)
    best = int(np.argmax(observed))
    count = min(MAX_PERMUTATIONS, max(BATCH, math.ceil(20 / alpha)))
    beaten = drawn = 0
    while drawn < count and beaten < EXCEEDED:
        top = _permuted(y, w, None, min_size, rng) if own is None else _drawn(y, w, own, min_size, rng)
        beaten += int(np.count_nonzero(top >= observed[best] * (1 - 1e-12)))
        drawn += BATCH
    return best + min_size, (1 + beaten) / (1 + drawn)


def _permuted(y: np.ndarray, w: np.ndarray, own: None, min_size: int, rng: np.random.Generator) -> np.ndarray:
    """The best score of BATCH permuted histories: under "no change", (y_i - mu) sqrt(w_i) are
    exchangeable; permuted, and put back on each run's own scale, every run keeps its uncertainty."""
    mu = float((w * y).sum() / w.sum())
    z, scale = (y - mu) * np.sqrt(w), 1 / np.sqrt(w)
    shuffled = mu + rng.permuted(np.tile(z, (BATCH, 1)), axis=1) * scale
    return scores(shuffled, np.broadcast_to(w, shuffled.shape), min_size).max(axis=1)


def _drawn(y: np.ndarray, w: np.ndarray, own: np.ndarray, min_size: int, rng: np.random.Generator) -> np.ndarray:
    """The best score of BATCH histories drawn under "no change": run i normal around the level
    with its variance 1 / w_i = own_i + tau^2; each history's tau^2 estimated again from itself
    and its weights made from it, as the observed history's were (a tau^2 that a few runs
    happen to make small is part of the null, not a certainty)."""
    mu = float((w * y).sum() / w.sum())
    drawn = mu + rng.standard_normal((BATCH, len(y))) / np.sqrt(w)
    tau2 = between_runs_batch(drawn, own)
    return scores(drawn, 1 / np.maximum(own + tau2[:, None], 1e-12), min_size).max(axis=1)


def between_runs_batch(x: np.ndarray, own: np.ndarray) -> np.ndarray:
    """between_runs for each row of `x` at once (the same bisection, vectorized)."""
    if x.shape[1] < 3:
        return np.zeros(x.shape[0])
    d2, base = np.diff(x, axis=1) ** 2, own[1:] + own[:-1]

    def excess(tau2: np.ndarray) -> np.ndarray:
        return np.median(d2 / np.maximum(base + 2 * tau2[:, None], 1e-18), axis=1) - CHI2_1_MEDIAN

    lo, hi = np.zeros(x.shape[0]), d2.max(axis=1)
    for _ in range(60):
        mid = (lo + hi) / 2
        up = excess(mid) > 0
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return np.where(excess(np.zeros(x.shape[0])) > 0, hi, 0.0)


def _segment(y, w, own, lo, hi, min_size, alpha, rng, found: dict[int, float]) -> None:
    k, p = split(y[lo:hi], w[lo:hi], min_size, alpha, rng, None if own is None else own[lo:hi])
    if k < 0 or p > alpha:
        return
    found[lo + k] = min(p, found.get(lo + k, 1.0))
    _segment(y, w, own, lo, lo + k, min_size, alpha, rng, found)
    _segment(y, w, own, lo + k, hi, min_size, alpha, rng, found)


def detect(
    points: list[Point],
    alpha: float = ALPHA,
    min_size: int = MIN_SIZE,
    window: int = WINDOW,
    seed: int = SEED,
    test: str = PERMUTATION,
) -> Analysis:
    """Change points of `points` (module docstring); indices are positions in `points`. `test`:
    PERMUTATION (absolute series) or INTERVAL (ratio series, whose runs measured their own interval)."""
    means = {i: p.mean for i, p in enumerate(points) if p.mean is not None and p.mean > 0}
    usable = list(means)
    y = np.log(list(means.values())) if usable else np.zeros(0)
    own = own_variances([points[i] for i in usable])
    tau2 = between_runs(y, own)
    w = 1 / np.maximum(own + tau2, 1e-12)
    rng = np.random.default_rng(seed)
    found: dict[int, float] = {}
    tested = own if test == INTERVAL else None
    _segment(y, w, tested, 0, len(y), min_size, alpha, rng, found)  # the whole history first
    cuts = [0, *sorted(found), len(y)]
    for a, b in itertools.pairwise(cuts):  # then, inside long segments, windows for local changes
        for start in window_starts(a, b, window, min_size):
            _segment(y, w, tested, start, start + window, min_size, alpha, rng, found)
    kept = _dedupe(found, min_size)
    cuts = [0, *kept, len(y)]
    segments = [_level(y, w, a, b) for a, b in itertools.pairwise(cuts) if b > a]
    changes = [
        _change(usable[k], p, y, w, a, k, b) for (k, p), a, b in zip(((k, found[k]) for k in kept), cuts, cuts[2:])
    ]
    segments = [Segment(usable[s.start], usable[s.end - 1] + 1, s.level, s.low, s.high) for s in segments]
    return Analysis(changes, segments, math.sqrt(tau2), usable)


def window_starts(a: int, b: int, window: int, min_size: int) -> list[int]:
    """Starts of the windows over [a, b) when it is longer than `window`: every half window, and
    one that ends at b (a change near the end of a long segment, where tonight's runs are)."""
    if b - a <= window:
        return []
    step = max(window // 2, 2 * min_size)
    return sorted({*range(a, b - window, step), b - window})


def _dedupe(found: dict[int, float], min_size: int) -> list[int]:
    """Split points at least `min_size` apart: of two closer ones, the one with the smaller p."""
    kept: list[int] = []
    for k in sorted(found, key=lambda k: (found[k], k)):
        if all(abs(k - other) >= min_size for other in kept):
            kept.append(k)
    return sorted(kept)


def _level(y: np.ndarray, w: np.ndarray, a: int, b: int) -> Segment:
    weight = float(w[a:b].sum())
    mean = float((w[a:b] * y[a:b]).sum()) / weight
    half = 1.96 / math.sqrt(weight)
    return Segment(a, b, math.exp(mean), math.exp(mean - half), math.exp(mean + half))


def _change(index: int, p: float, y: np.ndarray, w: np.ndarray, a: int, k: int, b: int) -> ChangePoint:
    left, right = _level(y, w, a, k), _level(y, w, k, b)
    d = math.log(right.level / left.level)
    half = 1.96 * math.sqrt(1 / float(w[a:k].sum()) + 1 / float(w[k:b].sum()))
    return ChangePoint(index, p, math.exp(d), math.exp(d - half), math.exp(d + half))
