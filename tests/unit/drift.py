"""Simulated experiments on a drifting machine: rounds of randomized blocks, as perflab runs
them, for the error rates of the verdicts (tests/unit/test_verdicts.py) and the width of the
paired interval against Welch's (bench/archive/paired_width.py).

The model, on the log scale, of cell c of variant v in round r:

    log QPS = log 1000 + effect[v] + drift(slot) + restart noise

`slot` is the cell's position in the run (rounds outermost, each round in a random order, as
spec/matrix.py orders them); `drift` is a slow wander shared by every cell, an AR(1) over the
cells' slots (Ornstein-Uhlenbeck in time): stationary standard deviation `drift_sd`,
correlation time `drift_minutes`, one slot per `cell_seconds` (the default cell: 10 s of
warm-up, a 20 s window, about 3 s to restore and restart). The restart noise is independent
per cell (a fresh server and a fresh window): `restart_cv`. The default machine (1.5%
restart noise, 3% drift over 5 minutes) gives five consecutive cells of one variant a CV of
1.0-2.8% (10th-90th percentile, median 1.8%), near what was measured here on an idle machine
(1.3% in one run, 3.8% in the next, issue 12); over half an hour its level wanders about 10%
(max/min; bench/archive/paired_width.py prints both for every machine it simulates).

    values = simulate(np.random.default_rng(1), Machine(), [0.0, 0.03], rounds=5, trials=1000)
    values.shape -> (1000, 2, 5)          # trial, variant (baseline first), round
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perflab.analyze import ratio


@dataclass(frozen=True)
class Machine:
    restart_cv: float = 0.015
    drift_sd: float = 0.03
    drift_minutes: float = 5.0
    cell_seconds: float = 33.0


def simulate(rng: np.random.Generator, machine: Machine, effects: list[float], rounds: int, trials: int) -> np.ndarray:
    """QPS of every cell: (trials, variants, rounds); `effects` are log-ratios to the baseline
    (effects[0] = 0: the baseline; log(0.97) for a 3% slowdown)."""
    variants = len(effects)
    slots = rounds * variants
    phi = np.exp(-machine.cell_seconds / (machine.drift_minutes * 60))
    drift = np.empty((trials, slots))
    drift[:, 0] = machine.drift_sd * rng.standard_normal(trials)
    steps = machine.drift_sd * np.sqrt(1 - phi * phi) * rng.standard_normal((trials, slots))
    for s in range(1, slots):
        drift[:, s] = phi * drift[:, s - 1] + steps[:, s]
    # each round in its own random order: the position of variant v in round r
    position = rng.permuted(np.broadcast_to(np.arange(variants), (trials, rounds, variants)), axis=2)
    order = np.argsort(position, axis=2)  # variant -> its place in the round
    slot = np.arange(rounds)[None, :, None] * variants + order  # (trials, rounds, variants)
    shared = np.take_along_axis(drift, slot.reshape(trials, -1), axis=1).reshape(trials, rounds, variants)
    noise = machine.restart_cv * rng.standard_normal((trials, rounds, variants))
    log_qps = np.log(1000.0) + np.asarray(effects)[None, None, :] + shared + noise
    return np.exp(log_qps).transpose(0, 2, 1)


def by_round(values: np.ndarray) -> dict[int, float]:
    """One variant's values of one trial, keyed by round from 1, as compare.rounds gives them."""
    return {r + 1: float(v) for r, v in enumerate(values)}


def estimates(trial: np.ndarray, paired: bool = True) -> list[ratio.Estimate]:
    """Every variant of one trial against its baseline (row 0): the estimate the verdict uses
    (paired when `paired`, as within one run; Welch otherwise)."""
    base = by_round(trial[0])
    out = []
    for row in trial[1:]:
        chosen, welch, _ = ratio.estimate(base, by_round(row))
        out.append(chosen if paired else welch)
    return out
