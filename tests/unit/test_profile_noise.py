"""The differential profile's noise floor, by simulation: identical profiles rarely show a
change (family-wise, over all the functions of a diff), real changes still do.

Profiles are sample-count matrices (a row per repeat, a column per function) fed to
profile_noise.floor, what profile_diff.diff(...).rows() marks `significant` with
(test_the_diff_marks_what_the_floor_says checks that). bench/stats_rates.py measures the same
through Profile.from_stacks and diff() on call trees, over more sizes and repeat counts.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scipy import special

from perflab.analyze import profile_diff, profile_noise
from perflab.analyze.profile import Merged, Profile
from perflab.analyze.profile_diff import diff
from tests.unit.rates import assert_at_most, assert_within

FUNCTIONS = 300
SHARE = 1.0 / np.arange(1, FUNCTIONS + 1) ** 1.1
SHARE /= SHARE.sum()  # Zipf self costs: the top function has 20% of the samples, the 300th 0.04%


def side(
    rng: np.random.Generator, share: np.ndarray, samples: int, reps: int, cv: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """Counts and transactions of `reps` repeats: 2% CV of transactions, a run-to-run factor of
    CV `cv` per function and repeat, Poisson sampling."""
    txn = 10_000.0 * (1 + 0.02 * rng.standard_normal(reps))
    factor = np.exp(cv * rng.standard_normal((reps, len(share))) - np.square(cv) / 2)
    return rng.poisson(share * factor * samples * txn[:, None] / 10_000.0).astype(float), txn


def flagged(
    rng: np.random.Generator, samples: int, reps: int, cv: np.ndarray | float, change: np.ndarray
) -> np.ndarray:
    fl = profile_noise.floor(*side(rng, SHARE, samples, reps, cv), *side(rng, SHARE * change, samples, reps, cv))
    return np.abs(fl.delta) > fl.noise


def heterogeneous(rng: np.random.Generator) -> np.ndarray:
    """Each function its own run-to-run CV: lognormal around 4%, one in 20 above 15%."""
    return 0.04 * np.exp(0.8 * rng.standard_normal(FUNCTIONS))


@pytest.mark.parametrize(
    ("samples", "reps", "noise", "claim"),
    [(4_000, 3, "none", 0.05), (100_000, 3, "heterogeneous", 0.05), (100_000, 2, "heterogeneous", 0.12)],
)
def test_identical_profiles_rarely_show_a_change(samples: int, reps: int, noise: str, claim: float) -> None:
    # README: identical profiles show a function outside its noise floor in at most 5% of diffs
    # with 3 or more repeats a side, under 12% with 2 (6-8% measured, with heterogeneous noise)
    rng = np.random.default_rng(samples + reps)
    trials = 400
    no_change = np.ones(FUNCTIONS)
    hits = 0
    for _ in range(trials):
        cv = heterogeneous(rng) if noise == "heterogeneous" else 0.0
        hits += bool(flagged(rng, samples, reps, cv, no_change).any())
    assert_at_most(hits, trials, claim)


def test_a_real_change_still_shows() -> None:
    # the price of a floor for the whole diff: at 4,000 samples a repeat and 3 repeats, a 30%
    # change of the top function (20% of the samples) shows in about 3 diffs of 4 (the 95%
    # interval per function it replaced: 96%, but 45-65% of identical diffs showed a change)
    rng = np.random.default_rng(11)
    change = np.ones(FUNCTIONS)
    change[0] = 1.3
    trials = 300
    hits = sum(bool(flagged(rng, 4_000, 3, 0.05, change)[0]) for _ in range(trials))
    assert_within(hits, trials, 0.6, 0.9)
    change[0], change[20] = 1.0, 3.0  # a function with 0.7% of the samples triples: it shows at 100,000
    hits = sum(bool(flagged(rng, 100_000, 3, 0.05, change)[20]) for _ in range(trials))
    assert_at_most(trials - hits, trials, 0.02)


def test_one_repeat_knows_sampling_noise_only() -> None:
    # one repeat a side: no spread between repeats, the floor is Poisson noise, z at 0.05 / m
    rng = np.random.default_rng(3)
    fl = profile_noise.floor(*side(rng, SHARE, 4_000, 1, 0.0), *side(rng, SHARE, 4_000, 1, 0.0))
    assert fl.df == 0 and fl.phi == 0.0
    assert fl.quantile == pytest.approx(float(special.ndtri(1 - 0.025 / fl.tested)))
    # m counts the functions that could show a change: not the ~200 with a handful of samples
    assert 50 < fl.tested < 150
    # beside 50 functions of 1000 samples (z = 3.29 at 0.05 / 50), 0 samples in A and 9 in B
    # cannot show a change (9 / sqrt(9 + 1) = 2.8 standard errors at most): m is 50, not 51
    a, b = np.array([[0.0] + [1000.0] * 50]), np.array([[9.0] + [1000.0] * 50])
    few = profile_noise.floor(a, np.array([1e4]), b, np.array([1e4]))
    assert few.tested == 50 and few.noise[0] > few.delta[0]


def test_pooled_model_finds_the_shared_run_to_run_noise() -> None:
    rng = np.random.default_rng(5)
    fl = profile_noise.floor(*side(rng, SHARE, 1_000_000, 5, 0.05), *side(rng, SHARE, 1_000_000, 5, 0.05))
    assert fl.phi == pytest.approx(0.05**2, rel=0.25) and fl.d0 > 20  # one CV for all: the model alone
    fl = profile_noise.floor(*side(rng, SHARE, 1_000_000, 5, 0.0), *side(rng, SHARE, 1_000_000, 5, 0.0))
    assert fl.phi < 1e-4  # sampling explains the spread
    fl = profile_noise.floor(
        *side(rng, SHARE, 1_000_000, 5, heterogeneous(rng)), *side(rng, SHARE, 1_000_000, 5, heterogeneous(rng))
    )
    assert fl.d0 < 20  # functions differ: each one's own spread counts


def test_the_diff_marks_what_the_floor_says() -> None:
    rng = np.random.default_rng(9)
    names = [f"main;f{i}" for i in range(40)]

    def merged(share: np.ndarray) -> Merged:
        counts, txn = side(rng, share, 20_000, 3, 0.05)
        return Merged(
            [
                Profile.from_stacks(Counter(dict(zip(names, map(int, row)))), transactions=t)
                for row, t in zip(counts, txn)
            ]
        )

    share = SHARE[:40] / SHARE[:40].sum()
    a, b = merged(share), merged(share * np.r_[2.0, np.ones(39)])
    rows = {r["function"]: r for r in diff(a, b).rows(limit=None)}
    functions = sorted(rows)
    floors = profile_diff.floors(a, b, functions)
    for i, function in enumerate(functions):
        row = rows[function]
        assert (
            row["noise_self_per_txn"] == floors["self"].noise[i]
            and row["noise_total_per_txn"] == floors["total"].noise[i]
        )
        assert row["significant"] == (abs(row["delta_self_per_txn"]) > row["noise_self_per_txn"])
    assert rows["f0"]["significant"] and not rows["main"]["significant"]  # by self: main is never a leaf
