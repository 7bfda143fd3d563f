"""Steady state of one cell's per-second series: where the warm-up ends, and stalls.

Input: the cell's per-second intervals (`t` = seconds since sysbench started, `qps`), the
whole run including the warm-up. Output: a `SteadyState` with the detected end of the
warm-up, whether the measured window lies after it, and the stall windows.

Warm-up detection uses MSER (the Marginal Standard Error Rule, White 1997; MSER-5 as in
Franklin & White 2008, "Stationarity tests and MSER-5"): choose the truncation point d
that minimises the standard error of the mean of what is left,

    MSER(d) = sum_{i>d} (x_i - mean_{>d})^2 / (n - d)^2,

over d in the first half of the series; batch means of m = 5 seconds damp the noise of
single seconds. Why MSER and not a change-point test: a warm-up is a transient, not a step
between two steady levels, and MSER needs no model of its shape and no tuning threshold;
it is the method the simulation-output literature recommends for automatic truncation.
Series shorter than 10 batches of 5 use m = 1 (MSER), because a handful of batch means
carries no information; the method string says which.

A cell is unsettled (left out of intervals and verdicts, never averaged in) when its warm-up
runs into the measured window, in one of two ways:
- late: MSER cuts seconds after the window start, and those seconds (the head) lie outside
  what the rest of the window does over stretches of up to the head's length (a prediction
  test on the rest's batch means, at least 6 of them where the rest is long enough, p < 0.001,
  and more than 1% apart), or more than 25% apart and far beyond the second-to-second noise
  (a rest still warming up inflates the spread the prediction test divides by);
- long: the minimum falls at the end of the admissible half (the rule's own failure criterion:
  the warm-up lasted at least half the series, so MSER cannot see its end), and the window
  still climbs or falls: its part before that edge differs from the rest by more than 5% and
  its batch means move in one direction beyond what a random walk does (a t-test on their
  successive differences, p < 0.01);
- climbing: the window's second half differs from its first by more than 15%, by more than 4
  standard errors of the second-to-second noise, and its thirds move one way: a warm-up whose
  steepest part comes last leaves MSER too short a steady end to truncate to (seen on real runs
  of tests/data/workloads/ramp.lua).
Both are calibrated on a random walk, because QPS on a VM wanders by several percent over a
minute and a per-second test would call that wander a warm-up. The false-alarm and detection
rates by ramp length are measured by `bench/warmup_detection.py` and quoted in
docs/methodology.md.

Stalls (analyze/stalls.py): seconds whose QPS is below `threshold` x the median of the measured window
(default 50%), merged into windows; a gap in the per-second reports is a stall too, of unknown
depth (`min_qps` = 0, `kind` = "no-report"): stored results of before 2026-11-30, whose sysbench
seconds skipped by its reporter were left out (sysbench_output.one_per_second now spreads the
report that covers them, as in the 13 s warm-up stall of the reference report 001).

    >>> detect([{"t": 1, "qps": 10.0}] + [{"t": t, "qps": 100.0} for t in range(2, 40)], window_start=5)
    SteadyState(warmup_s=1.0, method='mser-1', settled=True, ...)
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perflab.analyze.stalls import Stall, find_stalls
from perflab.analyze.stats import ci, cv, t_two_sided_p, welch_p

STALL_THRESHOLD = 0.5
BATCH = 5
MIN_BATCHES = 10
ALPHA = 0.001  # significance of a drift or a late warm-up
DRIFT = 0.03  # a window whose halves differ by more than this is reported as drifting
TREND = 0.01  # a late warm-up differs from the rest of the window by more than this
RAMP = 0.05  # a warm-up longer than half the series must move the window by more than this
RAMP_ALPHA = 0.01  # significance of a one-directional trend in a long warm-up
TEST_BATCHES = 6  # batches of the rest that a late warm-up is judged against, where it is long enough
CLIMB = 0.15  # a drift between the window's halves beyond this is a warm-up, not wander
CLIMB_Z = 4.0  # ...when it is this many standard errors of the second-to-second noise
FAR = 0.25  # a head this far from the rest, beyond the second-to-second noise, is a warm-up whatever the rest's spread
MIN_REST = 3  # seconds of window left after a late warm-up below which it cannot be judged


@dataclass
class SteadyState:
    warmup_s: float | None  # detected end of the warm-up, seconds since the workload started
    method: str  # mser-5 | mser-1 | none (too short)
    settled: bool  # the measured window starts at or after the detected end of the warm-up
    window_start_s: float
    reason: str | None = None  # why not settled
    stalls: list[Stall] = field(default_factory=list)
    drift: float | None = None  # significant change from the window's first half to its second

    def __repr__(self) -> str:
        return f"SteadyState(warmup_s={self.warmup_s}, method={self.method!r}, settled={self.settled}, ...)"


def mser_truncation(values: list[float], batch: int = BATCH) -> tuple[int, bool]:
    """MSER on batch means: (d in seconds, True if the minimum is inside the first half).

    Trailing values that do not fill a batch are dropped (they are the end of the run,
    which says nothing about the warm-up)."""
    means = [statistics.fmean(values[i : i + batch]) for i in range(0, len(values) - batch + 1, batch)]
    n = len(means)
    if n < 2:
        return 0, False
    best_k, best = -1, 0.0
    # suffix sums give every MSER(d) in O(n)
    total = sum(means)
    total_sq = sum(x * x for x in means)
    for k in range(n // 2 + 1):
        left = n - k
        mean = total / left
        sse = max(total_sq - left * mean * mean, 0.0)
        stat = sse / (left * left)
        if best_k < 0 or stat < best * (1 - 1e-9):  # ties keep the earlier (smaller) truncation
            best_k, best = k, stat
        total -= means[k]
        total_sq -= means[k] * means[k]
    # The rule's own failure criterion is a minimum at the edge of the admissible half; on
    # short stationary series that happens by chance (8% of 11-point series), so the edge
    # counts only if what is left still drifts: its halves differ, significantly and by
    # more than TREND.
    rest = values[best_k * batch :]
    settled = best_k < n // 2 or not _drifts(rest)
    return best_k * batch, settled


def _trim_back(values: list[float], d: int) -> int:
    """MSER over-truncates a stationary stretch (by 5 s or more in one series of ten, in
    simulation); give back the seconds before d that lie within 3 standard deviations of
    the steady part, so the warm-up ends at the last second that really differs."""
    tail = values[d:]
    if d == 0 or len(tail) < 3:
        return d
    mean, sd = statistics.fmean(tail), statistics.stdev(tail)
    while d > 0 and abs(values[d - 1] - mean) <= 3 * sd:
        d -= 1
    return d


def _drifts(values: list[float], threshold: float = DRIFT, alpha: float = ALPHA) -> bool:
    """The two halves differ by more than `threshold`, and Welch's t-test on their batch means
    (about 5 a half) says it is no chance (p < `alpha`)."""
    size = max(1, len(values) // 10)
    values = [statistics.fmean(values[i : i + size]) for i in range(0, len(values) - size + 1, size)]
    half = len(values) // 2
    first, second = values[:half], values[half:]
    if len(first) < 2 or len(second) < 2:
        return False
    a, b = statistics.fmean(first), statistics.fmean(second)
    if abs(b - a) <= threshold * abs(a):
        return False
    if statistics.variance(first) + statistics.variance(second) == 0:
        return True
    return welch_p(first, second) < alpha


def _differs(head: list[float], tail: list[float]) -> bool:
    """The head (the seconds after the window start that MSER cuts) is no sample of the
    steady rest: it differs by more than TREND from the rest's mean, and lies outside what
    the rest does over stretches of up to the head's length (a prediction test on the rest's
    batch means, p < ALPHA). Batch means, not seconds: seconds next to each other are
    correlated. Batches shorter than the head where the rest holds fewer than TEST_BATCHES of
    the head's length: a mean over a shorter stretch varies at least as much (conservative),
    and three batches (2 degrees of freedom) would let a 25% ramp through."""
    a, b = statistics.fmean(head), statistics.fmean(tail)
    if abs(a - b) <= TREND * abs(b):
        return False
    size = max(1, min(len(head), len(tail) // TEST_BATCHES))
    batches = _batch_means(tail, size)
    spread = statistics.stdev(batches)
    if spread == 0:
        return True
    t = abs(a - statistics.fmean(batches)) / (spread * math.sqrt(1 + 1 / len(batches)))
    return t_two_sided_p(t, len(batches) - 1) < ALPHA


def _rel(a: float, b: float) -> float:
    """a / b - 1, a level against another; over idle seconds (b = 0) infinite, unless a is idle too."""
    return a / b - 1 if b else (math.inf if a else 0.0)


def _ramps(head: list[float], tail: list[float], window: list[float]) -> bool:
    """A warm-up longer than half the series: the window before MSER's edge (head) differs
    from the rest by more than RAMP, and the window's batch means keep moving one way: the
    mean of their successive differences is non-zero (t-test, p < RAMP_ALPHA). A random walk's
    differences have mean zero, so wander rarely passes; a ramp's are all of one sign."""
    if abs(_rel(statistics.fmean(head), statistics.fmean(tail))) <= RAMP:
        return False
    means = _batch_means(window, max(1, len(window) // 10))
    steps = [b - a for a, b in itertools.pairwise(means)]
    if len(steps) < 2:
        return False
    spread = statistics.stdev(steps)
    if spread == 0:
        return True
    t = abs(statistics.fmean(steps)) / (spread / math.sqrt(len(steps)))
    return t_two_sided_p(t, len(steps) - 1) < RAMP_ALPHA


def _climbs(values: list[float], change: float) -> bool:
    """The window's halves differ by more than CLIMB, its thirds move one way, and the
    difference is far beyond the second-to-second noise (z > CLIMB_Z). That noise is taken from
    successive differences (median |x[t+1] - x[t]| = 0.954 sigma for white noise), not from the
    halves' spread, which a ramp inflates: a Welch test on the halves lets a ramp from 15k to 85k
    QPS through (p = 0.014, recorded)."""
    if abs(change) <= CLIMB or len(values) < 6 or not _one_way(values, change):
        return False
    noise = _noise(values)
    half = len(values) // 2
    difference = abs(statistics.fmean(values[half:]) - statistics.fmean(values[:half]))
    return noise == 0 or difference > CLIMB_Z * noise * math.sqrt(1 / half + 1 / (len(values) - half))


def _noise(values: list[float]) -> float:
    """The second-to-second noise's standard deviation, from the spread of successive
    differences about their median (median |d - median(d)| = 0.954 sigma for white noise, as
    median |d| is): a ramp's steps are all alike, so neither a trend nor a ramp inflates it.
    Not median |d| itself: a linear ramp's every step is its slope, which that took for noise,
    calling a window that climbed from 7 to 61 in 8 s settled."""
    steps = [b - a for a, b in itertools.pairwise(values)]
    middle = statistics.median(steps)
    return statistics.median(abs(d - middle) for d in steps) / 0.954


def _far(head: list[float], tail: list[float]) -> bool:
    """The head (the seconds after the window start that MSER cuts) is a warm-up plain to see:
    it differs from the rest by more than FAR, by more than CLIMB_Z standard errors of the
    rest's second-to-second noise, and moves towards the rest. `_differs` divides by the rest's
    spread, which a server still warming up after the head inflates: on CI a real run of
    tests/data/workloads/ramp.lua with a 7 s ramp left 6 s at 40% of the rest in the window, and
    its rest, climbing from 67k to 94k QPS, spread so wide that the prediction test let it pass
    (t = 5.4 against 5.04 needed, on the same run here, idle). FAR is 25%, not CLIMB's 15%: at
    15% a 130 s random walk (bench/warmup_detection.py) was called a warm-up 5.35% of the time,
    against 4.45% without this rule; at 20-30% no false alarm is added."""
    if len(head) < 2 or len(tail) < MIN_REST:
        return False
    a, b = statistics.fmean(head), statistics.fmean(tail)
    half = len(head) // 2
    towards = statistics.fmean(head[half:]) - statistics.fmean(head[:half])
    if abs(_rel(a, b)) <= FAR or (towards > 0) != (a < b):
        return False
    noise = _noise(tail)
    return noise == 0 or abs(a - b) > CLIMB_Z * noise * math.sqrt(1 / len(head) + 1 / len(tail))


def _plain(before: list[float], head: list[float], tail: list[float]) -> bool:
    """A head with fewer than MIN_REST seconds of window after it, which no test can judge: a
    warm-up only if it is plain to see, more than FAR from the rest and on the side the seconds
    before it lie further out on (a warm-up approaches its steady level; noise has no side)."""
    a, b = statistics.fmean(head), statistics.fmean(tail)
    if abs(_rel(a, b)) <= FAR:
        return False
    earlier = (before + head)[: max(1, len(before + head) // 2)]
    first = statistics.fmean(earlier)
    return first <= a if a < b else first >= a


def _one_way(values: list[float], drift: float) -> bool:
    """The window's thirds move in the drift's direction: a warm-up climbs (or falls) all the
    way; a wander that happens to end far from where it began seldom does."""
    third = len(values) // 3
    means = [statistics.fmean(values[i * third : (i + 1) * third]) for i in range(3)] if third else []
    return len(means) == 3 and (means[0] < means[1] < means[2] if drift > 0 else means[0] > means[1] > means[2])


def _batch_means(values: list[float], size: int) -> list[float]:
    return [statistics.fmean(values[i : i + size]) for i in range(0, len(values) - size + 1, size)]


def _unsettled(
    before: list[float],
    head: list[float],
    tail: list[float],
    window: list[float],
    edge: bool,
    warmup_s: float,
    window_start: float,
) -> str | None:
    """Why the warm-up runs into the window, or None (`before`: the seconds before the window)."""
    if not head:
        return None
    where = f"the warm-up lasted until {warmup_s:.0f} s, past the window start at {window_start:.0f} s"
    # MSER ends a ramp where it meets the noise, a little before it flattens: leave room
    remedy = f"; set warmup (or max_warmup) to at least {math.ceil(max(warmup_s + 2, 1.5 * warmup_s))} s"
    level = statistics.fmean(tail) if tail else 0.0  # 0: idle seconds (a client that stopped), no level
    change = f"{statistics.fmean(head) / level - 1:+.1%}" if level else "an unknown share" if tail else ""
    if len(tail) < MIN_REST:
        # too little of the window is left to judge the head against: flagged only when the
        # warm-up is plain to see (MSER alone cut into 40% of 4-second white-noise series)
        if not tail or _plain(before, head, tail):
            return f"{where}, leaving {len(tail)} s of the window{f' (the seconds cut differ by {change})' if change else ''}{remedy}"
        return None
    if _differs(head, tail) or _far(head, tail):
        return f"{where} (those seconds differ by {change}){remedy}"
    if edge and _ramps(head, tail, window):
        return (
            f"the warm-up lasted at least until {warmup_s:.0f} s, half the series, and the window still "
            f"ramps ({change} before that point){remedy}"
        )
    return None


def detect(intervals: list[dict[str, Any]], window_start: float, threshold: float = STALL_THRESHOLD) -> SteadyState:
    """Warm-up end and stalls of one cell; `window_start` is where its measured window began."""
    series = sorted((iv["t"], iv["qps"]) for iv in intervals if iv.get("qps") is not None)
    if len(series) < 4:
        # too short to judge: not flagged (that would drop the cell), method "none" says so
        return SteadyState(None, "none", True, window_start, None)
    values = [q for _, q in series]
    batch = BATCH if len(values) // BATCH >= MIN_BATCHES else 1
    d, ok = mser_truncation(values, batch)
    # At the edge the rest is no steady part to measure the trim-back against.
    edge = d >= (len(values) // batch // 2) * batch
    if not edge:
        d = _trim_back(values, d)
    # d counts reports; the warm-up ends at the t of the last report it removes
    warmup_s = float(series[d - 1][0]) if d > 0 else 0.0
    # MSER always trims something from a noisy series; what makes a cell unsettled is a
    # measured window that still moves: seconds at its start that MSER cuts and that differ
    # from the rest beyond noise, or a warm-up too long for MSER that still ramps.
    window = [q for t, q in series if t > window_start]
    head = [q for t, q in series if window_start < t <= warmup_s]
    tail = [q for t, q in series if t > max(window_start, warmup_s)]
    before = [q for t, q in series if t <= window_start]
    reason = _unsettled(before, head, tail, window, edge, warmup_s, window_start)
    if reason is None and not ok and len(window) < 4:
        reason = f"the series did not settle and the window is too short to tell ({len(window)} s)"
    # A drift inside the window is reported, not excluded: on a VM QPS wanders several percent
    # over a minute, and the spread between repeats (the interval) already carries it. A drift
    # beyond what wander does (CLIMB) is a warm-up MSER could not place: one whose steepest part
    # comes last leaves too short a steady end for MSER to truncate to.
    half = len(window) // 2
    change = _rel(statistics.fmean(window[half:]), statistics.fmean(window[:half])) if half else 0.0
    climbs = _climbs(window, change)
    drift = change if climbs or _drifts(window) else None
    if reason is None and climbs:
        remedy = f"set warmup (or max_warmup) to at least {math.ceil(max(window_start * 2, window_start + 10))} s"
        reason = (
            f"the window {'climbs' if change > 0 else 'falls'} by {change:+.0%} from its first half to its "
            f"second: the warm-up has not ended; {remedy}"
        )
    steady = [q for t, q in series if t > max(window_start, warmup_s)] or values
    stalls = find_stalls(series, threshold * statistics.median(steady))
    return SteadyState(warmup_s, f"mser-{batch}", reason is None, window_start, reason, stalls, drift)


def window_figures(intervals: list[dict[str, Any]], window_start: float, qps_mean: float | None) -> dict[str, Any]:
    """One cell's steady QPS: the window's mean (sysbench's own count over the window), a
    95% CI from batch means of its per-second QPS (about 10 batches: seconds next to each
    other are correlated, batches of several seconds much less), and the CV of the
    per-second QPS (the cell's own second-to-second noise)."""
    values = [
        iv["qps"]
        for iv in sorted(intervals, key=lambda iv: iv["t"])
        if iv["t"] > window_start and iv.get("qps") is not None
    ]
    size = max(1, len(values) // 10)
    batches = [statistics.fmean(values[i : i + size]) for i in range(0, len(values) - size + 1, size)]
    interval = ci(batches)
    mean = qps_mean if qps_mean is not None else interval.mean
    half = None if interval.low is None or interval.mean is None else interval.mean - interval.low
    return {
        "qps_mean": mean,
        "qps_ci_low": None if half is None or mean is None else mean - half,
        "qps_ci_high": None if half is None or mean is None else mean + half,
        "cv": cv(values),
        "batch_s": size,
        "seconds": len(values),
    }


def cell_fields(
    intervals: list[dict[str, Any]],
    window_start: float,
    qps: float | None,
    threshold: float = STALL_THRESHOLD,
    steal: Callable[[float, float], float | None] | None = None,
) -> dict[str, Any]:
    """A cell's stored steady-state fields, from its whole per-second series. `steal(start_s,
    end_s)`: the machine's steal time in cores over seconds of the series (observers/
    resources.StealSampler), stored with each stall as `steal_cores`."""
    state = detect(intervals, window_start, threshold)
    stalls = [stall.to_dict() for stall in state.stalls]
    if steal is not None:
        for stall in stalls:
            stall["steal_cores"] = steal(stall["start_s"], stall["end_s"])
    return {
        "warmup_s": state.warmup_s,
        "warmup_method": state.method,
        "settled": state.settled,
        "unsettled_reason": state.reason,
        "stalls": stalls,
        "steady": {**window_figures(intervals, window_start, qps), "drift": state.drift},
    }


def complete(cell: dict[str, Any], intervals: list[dict[str, Any]], threshold: float = STALL_THRESHOLD) -> None:
    """Fill a cell stored without steady-state fields (results schema 1) from its intervals."""
    window_start = cell.get("window_start_s") or 0.0
    qps = (cell.get("summary") or {}).get("qps")
    cell.update(window_start_s=window_start, **cell_fields(intervals, window_start, qps, threshold))
