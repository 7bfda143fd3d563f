"""Warm-up detection (MSER) and stalls on synthetic series with known answers."""

from __future__ import annotations

import random

import pytest

from perflab.analyze import steady


def series(values: list[float], start: int = 1) -> list[dict]:
    return [{"t": float(start + i), "qps": q} for i, q in enumerate(values)]


def noisy(n: int, level: float = 100_000.0, cv: float = 0.01, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(level, level * cv) for _ in range(n)]


# The warm-up of reference report 001 (1024 threads): one slow second, twelve seconds
# without a report, four ramping seconds, then steady around 565k QPS.
REFERENCE_001 = (
    [{"t": 1.0, "qps": 2262.99}]
    + [{"t": float(t), "qps": q} for t, q in zip(range(13, 17), [245703.40, 171515.46, 99505.91, 320745.02])]
    + series([555273.09, 561789.27, 564603.88, 570236.52] + noisy(36, 565_000, 0.01, 1), start=17)
)


@pytest.mark.parametrize("warmup", [0, 3, 8, 15])
@pytest.mark.parametrize("n", [30, 60])
def test_known_warmup_is_found(warmup: int, n: int) -> None:
    values = [20_000.0 + 70_000 * i / max(warmup, 1) for i in range(warmup)] + noisy(n - warmup, seed=warmup)
    state = steady.detect(series(values), window_start=20)
    assert state.warmup_s is not None
    assert warmup - 1 <= state.warmup_s <= warmup + 2, state
    assert state.settled


def test_method_depends_on_length() -> None:
    assert steady.detect(series(noisy(30)), 10).method == "mser-1"
    assert steady.detect(series(noisy(60)), 10).method == "mser-5"


def test_reference_001_warmup_and_stall() -> None:
    state = steady.detect(REFERENCE_001, window_start=20)
    assert 16 <= state.warmup_s <= 18
    assert state.settled
    assert len(state.stalls) == 1
    stall = state.stalls[0]
    assert (stall.start_s, stall.end_s, stall.kind) == (0, 15, "no-report")  # t=16 is back above half
    assert stall.min_qps == 0.0


def test_window_starting_inside_the_warmup_is_unsettled() -> None:
    state = steady.detect(REFERENCE_001, window_start=10)
    assert not state.settled
    assert "past the window start at 10 s" in state.reason


def test_stationary_series_are_settled() -> None:
    # false alarms on pure noise must be rare: they drop a cell from the intervals
    flagged = sum(not steady.detect(series(noisy(n, seed=s)), window_start=n // 3).settled
                  for s in range(300) for n in (11, 20, 40))  # fmt: skip
    assert flagged / 900 < 0.02


def test_drift_in_the_window_is_reported_not_dropped() -> None:
    # a drift confined to the measured window, after a steady start: reported, the cell kept
    values = noisy(20) + [100_000 * (1 - 0.003 * i) for i in range(20)]
    state = steady.detect(series(values), window_start=15)
    assert state.settled and state.drift is not None and state.drift < -0.03
    assert steady.detect(series(noisy(40)), window_start=10).drift is None


def test_wander_is_not_a_warmup() -> None:
    """QPS on a VM wanders several percent over a minute (a random walk): rarely flagged."""
    flagged = 0
    for seed in range(200):
        rng = random.Random(seed)
        level, values = 100_000.0, []
        for _ in range(65):
            level += rng.gauss(0, 800)
            values.append(rng.gauss(level, 1000))
        flagged += not steady.detect(series(values), window_start=5).settled
    assert flagged / 200 < 0.02


def test_step_up_in_the_window_is_unsettled() -> None:
    values = noisy(10, 50_000) + noisy(30, 100_000, seed=3)
    state = steady.detect(series(values), window_start=3)
    assert not state.settled
    assert 9 <= state.warmup_s <= 11


def test_stall_in_the_window_is_found_and_merged() -> None:
    values = noisy(40)
    values[20:24] = [30_000.0, 5_000.0, 0.0, 45_000.0]
    state = steady.detect(series(values), window_start=5)
    assert [(s.start_s, s.end_s, s.min_qps, s.kind) for s in state.stalls] == [(20, 24, 0.0, "low")]


def test_stall_threshold_is_configurable() -> None:
    values = noisy(40)
    values[25] = 70_000.0
    assert steady.detect(series(values), 5).stalls == []
    assert [s.start_s for s in steady.detect(series(values), 5, threshold=0.8).stalls] == [25]


def test_missing_reports_are_a_stall() -> None:
    points = series(noisy(10)) + series(noisy(20, seed=2), start=16)
    stalls = steady.detect(points, 3).stalls
    assert [(s.start_s, s.end_s, s.kind) for s in stalls] == [(10, 15, "no-report")]


def test_too_short() -> None:
    state = steady.detect(series([1.0, 2.0, 3.0]), 1)
    assert (state.method, state.settled, state.warmup_s, state.reason) == ("none", True, None, None)


def test_mser_truncation_directly() -> None:
    assert steady.mser_truncation([1.0] * 3 + [10.0] * 20, batch=1) == (3, True)
    d, settled = steady.mser_truncation([float(i) for i in range(30)], batch=1)  # never settles
    assert d == 15 and not settled


def test_window_figures_use_batch_means() -> None:
    values = noisy(40, seed=5)
    figures = steady.window_figures(series(values), window_start=10, qps_mean=100_000.0)
    assert figures["seconds"] == 30 and figures["batch_s"] == 3
    assert figures["qps_ci_low"] < 100_000 < figures["qps_ci_high"]
    assert 0.005 < figures["cv"] < 0.02
    # correlated seconds: a slow wave makes batch means vary, so the interval widens
    wave = [100_000 + 3_000 * (1 if (i // 6) % 2 else -1) for i in range(40)]
    wide = steady.window_figures(series(wave), 10, 100_000.0)
    assert wide["qps_ci_high"] - wide["qps_ci_low"] > figures["qps_ci_high"] - figures["qps_ci_low"]


def test_complete_fills_an_old_cell() -> None:
    cell = {"window_start_s": 20.0, "summary": {"qps": 565_000.0}}
    steady.complete(cell, REFERENCE_001)
    assert cell["warmup_method"] == "mser-1" and cell["settled"] is True
    assert cell["stalls"][0]["kind"] == "no-report"
    assert cell["steady"]["qps_mean"] == 565_000.0
