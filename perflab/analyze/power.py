"""What a time budget can resolve on this machine: the smallest detectable effect, and the
window length and rounds that reach it, from the variance components (analyze/variance.py).

Input: `Noise`: the per-second variance of log QPS times its autocorrelation time (s, so a
window of L seconds contributes s / L to a cell's variance), the restart variance r, and the
per-cell overhead o (seconds a cell costs beyond its window: restore, server start, warm-up,
stop; measured in the calibration run). Output: a Plan.

The design is the one perflab runs: rounds of two variants (randomized blocks), compared by a
paired t test on the per-round log-ratios (analyze/ratio.py). One round's log-ratio has the
variance 2 (r + s / L) (drift is shared within a round and cancels); n rounds fit a budget B
when n 2 (o + L) <= B. The smallest effect detected at two-sided level alpha (95% confidence)
with power 1 - beta (80%) is

    delta(L) = (t(1 - alpha/2, n - 1) + t(1 - beta, n - 1)) x sqrt(2 (r + s / L) / n),
    n = floor(B / (2 (o + L))),  effect = exp(delta) - 1

A longer window lowers s / L but leaves fewer rounds; the plan takes the whole-second L that
minimises delta (at least MIN_ROUNDS rounds, MIN_DURATION seconds). Holm's correction over a matrix of several
comparisons is not included: with m comparisons, use alpha / m for the first (a larger effect).

    best_plan(Noise(per_second=0.004, restart=0.0002, overhead=14.0), budget=600)
      -> Plan(effect=0.030, duration=11, rounds=12, ...)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from perflab.analyze import stats

ALPHA, POWER = 0.05, 0.80
MIN_ROUNDS = 3  # a paired interval needs them (ratio.MIN_PAIRS)
MIN_DURATION = 5  # shorter windows: too few seconds for the steady-state checks (analyze/steady.py)
MAX_DURATION = 3600


@dataclass(frozen=True)
class Noise:
    per_second: float  # var(log QPS) x autocorrelation time, in seconds
    restart: float  # var between restarts, log scale
    overhead: float  # seconds per cell beyond the window

    def round_variance(self, duration: float) -> float:
        """Variance of one round's log-ratio of two variants with windows of `duration` s."""
        return 2 * (self.restart + self.per_second / duration)


@dataclass(frozen=True)
class Plan:
    effect: float | None  # smallest detectable effect, as a fraction (0.03: 3%); None: unreachable
    duration: int  # window seconds
    rounds: int
    budget: float  # seconds
    variants: int = 2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def factor(rounds: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """t(1 - alpha/2, n - 1) + t(power, n - 1)."""
    df = rounds - 1
    return stats.t_quantile(1 - alpha / 2, df) + stats.t_quantile(power, df)


def rounds_in(budget: float, noise: Noise, duration: float, variants: int = 2) -> int:
    return int(budget // (variants * (noise.overhead + duration)))


def detectable(noise: Noise, duration: float, rounds: int) -> float | None:
    """The smallest effect (a fraction) `rounds` paired rounds detect, or None below MIN_ROUNDS."""
    if rounds < MIN_ROUNDS:
        return None
    return math.expm1(factor(rounds) * math.sqrt(noise.round_variance(duration) / rounds))


def best_plan(noise: Noise, budget: float, variants: int = 2, also: float | None = None) -> Plan:
    """The whole-second window (MIN_DURATION and up, and `also`: the file's own) that detects
    the smallest effect within `budget` seconds."""
    best = Plan(None, 0, 0, budget, variants)
    longest = min(MAX_DURATION, int(budget / (variants * MIN_ROUNDS) - noise.overhead))
    candidates = set(range(MIN_DURATION, longest + 1)) | ({int(also)} if also else set())
    for duration in sorted(candidates):
        rounds = rounds_in(budget, noise, duration, variants)
        effect = detectable(noise, duration, rounds)
        if effect is not None and (best.effect is None or effect < best.effect):
            best = Plan(effect, duration, rounds, budget, variants)
    return best


def rounds_for(noise: Noise, duration: float, effect: float, most: int = 1000) -> int | None:
    """The fewest rounds (>= MIN_ROUNDS) whose detectable effect at `duration` is <= `effect`."""
    for rounds in range(MIN_ROUNDS, most + 1):
        found = detectable(noise, duration, rounds)
        if found is not None and found <= effect:
            return rounds
    return None
