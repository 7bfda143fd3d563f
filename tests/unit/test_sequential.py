"""Group-sequential verdicts (analyze/sequential.py): the spending function, the boundaries
of the t statistic, and the error rates of adaptive runs that stop on a verdict, by
simulation (tests/unit/seqsim.py; bench/sequential.py prints the full table)."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from perflab.analyze import sequential
from perflab.analyze.sequential import Design, Track, levels, replay, spent
from perflab.analyze.verdict import EQUIVALENT, FASTER, INCONCLUSIVE, SLOWER
from tests.unit.rates import lower
from tests.unit.seqsim import Noise, Protocol, by_round, cells, fixed_run, simulate_run


def test_obrien_fleming_spending_spends_little_early_and_all_at_the_end() -> None:
    assert spent(1.0, 0.025) == 0.025
    assert spent(0.3, 0.025) < 1e-4
    assert spent(0.5, 0.025) < spent(0.8, 0.025) < 0.025


def test_boundaries_for_many_rounds_are_the_published_lan_demets_ones() -> None:
    # with 200+ rounds a look the t statistic is a z statistic: K = 5 equal looks, one-sided
    # 2.5%: 4.877 (spends 5e-7, below one simulated path: nothing), 3.357, 2.680, 2.290, 2.031
    found = levels((200, 400, 600, 800, 1000), (0.2, 0.4, 0.6, 0.8, 1.0), 0.025)
    z = [-float(special.ndtri(p)) for p in found[1:]]
    assert found[0] == 0.0
    assert np.allclose(z, [3.357, 2.680, 2.290, 2.031], atol=0.06), z


def test_the_t_boundaries_keep_the_level_with_few_rounds() -> None:
    # 3..10 rounds of one-sample t tests (df 2..9), each look at its nominal level: 2.5% one-sided
    rng = np.random.default_rng(3)
    paths, n = 400_000, 10
    x = rng.standard_normal((paths, n))
    sums, squares = np.cumsum(x, axis=1), np.cumsum(x * x, axis=1)
    nominal = levels(tuple(range(3, n + 1)), tuple(k / n for k in range(3, n + 1)), 0.025)
    hit = np.zeros(paths, dtype=bool)
    for k, level in zip(range(3, n + 1), nominal):
        mean = sums[:, k - 1] / k
        se = np.sqrt((squares[:, k - 1] - k * mean * mean) / (k - 1) / k)
        hit |= special.stdtr(k - 1, -mean / se) <= level
    assert 0.0235 <= hit.mean() <= 0.0255, hit.mean()
    naive = np.zeros(paths, dtype=bool)  # every look at 2.5%: far more
    for k in range(3, n + 1):
        mean = sums[:, k - 1] / k
        naive |= special.stdtr(k - 1, -mean / np.sqrt((squares[:, k - 1] - k * mean * mean) / (k - 1) / k)) <= 0.025
    assert naive.mean() > 0.06


def false_rate(noise: Noise, variants: int, design: Design, trials: int, seed: int) -> tuple[int, list[int]]:
    rng = np.random.default_rng(seed)
    false, rounds = 0, []
    for _ in range(trials):
        run = simulate_run(rng, noise, [0.0] * variants, design)
        false += any(t.verdict in (FASTER, SLOWER) for t in run.tracks)
        rounds.append(run.rounds)
    return false, rounds


def test_identical_variants_get_at_most_five_percent_false_verdicts() -> None:
    # 2000 A/A runs: 4% shared drift a round, 2% restart noise, 10 s windows, up to 10 rounds:
    # not significantly above 5% (bench/sequential.py: 4.6-5.1% over 1000-run cases)
    false, rounds = false_rate(Noise(round_sd=0.04, restart_sd=0.02), 2, Design(max_rounds=10), 2000, 21)
    assert lower(false, 2000) <= 0.05 and false / 2000 <= 0.058
    assert max(rounds) == 10 and min(rounds) >= 3


def test_holm_keeps_the_family_wise_rate_over_four_comparisons() -> None:
    false, _ = false_rate(Noise(round_sd=0.05, restart_sd=0.01), 5, Design(max_rounds=8), 600, 22)
    assert lower(false, 600) <= 0.05 and false / 600 <= 0.06


def test_a_five_percent_slowdown_is_called_sooner_than_a_fixed_protocol_does() -> None:
    # 2% restart noise: the fixed 3 x 60 s protocol calls it in about 40% of runs (438 s each);
    # adaptive 10 s rounds stop on `slower` in about 99%, after about 310 s
    rng = np.random.default_rng(23)
    effect = [0.0, math.log(0.95)]
    noise = Noise(round_sd=0.04, restart_sd=0.02)
    fixed = [fixed_run(rng, noise, effect, 3, Protocol(duration=60)) for _ in range(300)]
    adaptive = [simulate_run(rng, noise, effect, Design(max_rounds=10)) for _ in range(300)]
    p_fixed = sum(r.tracks[0].verdict == SLOWER for r in fixed) / 300
    p_adaptive = sum(r.tracks[0].verdict == SLOWER for r in adaptive) / 300
    assert p_adaptive > 0.95 and p_fixed < 0.6
    assert all(r.tracks[0].verdict != FASTER for r in adaptive)
    per_correct = np.mean([r.seconds for r in adaptive]) / p_adaptive
    assert per_correct <= fixed[0].seconds / p_fixed / 3


def test_a_null_effect_can_stop_as_equivalent() -> None:
    rng = np.random.default_rng(24)
    runs = [
        simulate_run(rng, Noise(round_sd=0.04, restart_sd=0.005), [0.0, 0.0], Design(max_rounds=20)) for _ in range(200)
    ]
    equivalent = [r for r in runs if r.tracks[0].verdict == EQUIVALENT]
    assert len(equivalent) > 150
    assert np.mean([r.rounds for r in equivalent]) < 20


def test_replay_from_stored_values_repeats_the_run_decisions() -> None:
    rng = np.random.default_rng(25)
    values = cells(rng, Noise(), [0.0, math.log(0.9), 0.0], 10, 10.0)
    pairs = [(by_round(values[0], 10), by_round(row, 10)) for row in values[1:]]
    tracks = replay(pairs, Design(max_rounds=10), 10)
    assert tracks[0].verdict == SLOWER and tracks[0].round is not None and tracks[0].round < 10
    # cutting the variant's values after its stop round changes nothing: it did not run then
    pairs[0] = (pairs[0][0], {r: v for r, v in pairs[0][1].items() if r <= tracks[0].round})
    again = replay(pairs, Design(max_rounds=10), 10)
    assert [(t.verdict, t.round) for t in again] == [(t.verdict, t.round) for t in tracks]


def test_a_comparison_without_an_interval_waits() -> None:
    tracks = [Track()]
    est = sequential.ratio.estimate({1: 1.0, 2: 1.0}, {1: 1.0, 3: 1.0})[0]  # one round holds both
    sequential.look(tracks, [est], 3, Design())
    assert tracks[0].verdict == INCONCLUSIVE and tracks[0].ns == []
