"""Simulated adaptive runs that stop on a verdict (analyze/sequential.py), for the error rates
of tests/unit/test_sequential.py and the figures of bench/sequential.py.

The model, on the log scale, of the cell of variant v in round r, as perflab runs it (each
round every open variant once, in a random order, a fresh server per cell):

    log QPS = effect[v] + level[r] + wander(position in the round) + restart + window

- level[r]: the machine's level during round r, shared by every cell of the round
  (`round_sd`, 3-5%: QPS here wanders 5-10% over minutes, docs/methodology.md);
- wander: a random walk from cell to cell inside a round (`wander_sd` a step): the part of
  the drift a round does not share;
- restart: a fresh server per cell (`restart_sd`, 1-4%: the same cell five times had a CV
  of 1.3% in one run and 3.8% in the next, issue 12);
- window: second-to-second noise averaged over the window, `second_cv / sqrt(duration)`
  (a 10 s window: 0.95% with 3%; a 60 s one: 0.39%).

    run = simulate_run(np.random.default_rng(1), Noise(), [0.0, math.log(0.95)], Design(max_rounds=20))
    run.tracks[0].verdict, run.seconds  -> ("slower", 276.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perflab.analyze import ratio, sequential, verdict
from perflab.analyze.sequential import Design, Track

CELL_OVERHEAD_S = 3.0  # restore + start + stop (run/scheduler.py)


@dataclass(frozen=True)
class Noise:
    round_sd: float = 0.04
    restart_sd: float = 0.02
    second_cv: float = 0.03
    wander_sd: float = 0.005


@dataclass(frozen=True)
class Protocol:
    duration: float = 10.0  # the measured window, seconds
    warmup: float = 10.0

    @property
    def cell_seconds(self) -> float:
        return self.warmup + self.duration + CELL_OVERHEAD_S


@dataclass(frozen=True)
class Run:
    tracks: list[Track]
    rounds: int
    seconds: float  # wall time of the cells run


def cells(rng: np.random.Generator, noise: Noise, effects: list[float], rounds: int, duration: float) -> np.ndarray:
    """QPS of every (variant, round) if every variant ran every round: (variants, rounds)."""
    variants = len(effects)
    level = noise.round_sd * rng.standard_normal(rounds)
    order = np.argsort(rng.random((rounds, variants)), axis=1)  # variant -> its place in the round
    walk = np.cumsum(noise.wander_sd * rng.standard_normal((rounds, variants)), axis=1)
    wander = np.take_along_axis(walk, order, axis=1)
    own = math.hypot(noise.restart_sd, noise.second_cv / math.sqrt(duration))
    log_qps = np.asarray(effects)[None, :] + level[:, None] + wander + own * rng.standard_normal((rounds, variants))
    return np.exp(np.log(1000.0) + log_qps).T


def by_round(row: np.ndarray, upto: int) -> dict[int, float]:
    return {r + 1: float(v) for r, v in enumerate(row[:upto])}


def simulate_run(
    rng: np.random.Generator, noise: Noise, effects: list[float], design: Design, protocol: Protocol = Protocol()
) -> Run:
    """One adaptive run with stop = "verdict": every variant for min_rounds rounds, then only
    the open comparisons' variants (and the baseline while any is open)."""
    values = cells(rng, noise, effects, design.max_rounds, protocol.duration)
    tracks = [Track() for _ in effects[1:]]
    ran, k = 0, 0
    while k < design.max_rounds and any(t.open for t in tracks):
        k += 1
        ran += 1 + sum(1 for t in tracks if t.open)
        if k < design.min_rounds:
            continue
        estimates = [ratio.estimate(by_round(values[0], k), by_round(row, k))[0] for row in values[1:]]
        sequential.look(tracks, estimates, k, design)
    return Run(tracks, k, ran * protocol.cell_seconds)


def fixed_run(rng: np.random.Generator, noise: Noise, effects: list[float], rounds: int, protocol: Protocol) -> Run:
    """A fixed protocol (`rounds` repeats of every variant), judged by analyze/verdict.py."""
    values = cells(rng, noise, effects, rounds, protocol.duration)
    estimates = [ratio.estimate(by_round(values[0], rounds), by_round(row, rounds))[0] for row in values[1:]]
    found = verdict.judge(estimates, higher_is_better=True)
    tracks = [Track(j.verdict, rounds if j.verdict != verdict.INCONCLUSIVE else None) for j in found]
    return Run(tracks, rounds, rounds * len(effects) * protocol.cell_seconds)
