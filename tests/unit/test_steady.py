"""Warm-up detection (MSER) and stalls on synthetic series with known answers."""

from __future__ import annotations

import random
import statistics

import pytest
from scipy.stats import beta

from perflab.analyze import steady
from perflab.workloads import sysbench_output


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


# its first reports as sysbench printed them (the reference report's own lines)
REFERENCE_001_TEXT = "\n".join(
    f"[ {t}s ] thds: 1024 tps: {tps} qps: {qps} (r/w/o: {rwo}) lat (ms,95%): {lat} err/s: 0.00 reconn/s: 0.00"
    for t, tps, qps, rwo, lat in [
        (1, "76.28", "2262.99", "2026.93/0.00/236.06", "8638.96"),
        (13, "15443.84", "245703.40", "214793.65/0.00/30909.74", "1032.01"),
        (14, "10660.46", "171515.46", "150188.53/0.00/21326.93", "337.94"),
        (15, "6271.36", "99505.91", "86959.18/0.00/12546.73", "484.44"),
        (16, "20259.38", "320745.02", "280335.26/0.00/40409.76", "240.02"),
    ]
)


def test_reference_001_as_parsed_has_its_stall_with_its_depth() -> None:
    """The same warm-up as perflab reads it from sysbench's output: the report at 13 s is over the 12 s
    since the one at 1 s (a 43% rate), so seconds 2-12 have that rate: a stall of known depth
    (`low`), from the start to 15 s, and the warm-up where the gap-as-no-report series had it."""
    parsed = [{"t": float(iv.t), "qps": iv.qps} for iv in sysbench_output.parse_intervals(REFERENCE_001_TEXT)]
    assert [p["t"] for p in parsed] == list(range(1, 17)) and {p["qps"] for p in parsed[1:13]} == {245703.40}
    state = steady.detect(parsed + REFERENCE_001[5:], window_start=20)
    assert [p["t"] for p in parsed + REFERENCE_001[5:]] == list(range(1, 57))
    assert 16 <= state.warmup_s <= 18 and state.settled
    (stall,) = state.stalls
    assert (stall.start_s, stall.end_s, stall.kind, stall.min_qps) == (0, 15, "low", 2262.99)


def test_window_starting_inside_the_warmup_is_unsettled() -> None:
    state = steady.detect(REFERENCE_001, window_start=10)
    assert not state.settled
    assert "past the window start at 10 s" in state.reason


def upper_bound(flagged: int, n: int) -> float:
    """One-sided 95% Clopper-Pearson upper bound of a rate seen `flagged` times in `n`."""
    return 1.0 if flagged == n else float(beta.ppf(0.95, flagged + 1, n - flagged))


@pytest.mark.parametrize(("n", "start", "claim"), [(22, 2, 0.006), (70, 10, 0.0035)])
def test_stationary_series_are_settled(n: int, start: int, claim: float) -> None:
    # false alarms on pure noise must be rare: they drop a cell from the intervals
    # (docs/methodology.md: 0.3% of 22 s series, 0.1% from 50 s on; 95% upper bounds 0.6% and 0.35%)
    sims = 2000
    flagged = sum(not steady.detect(series(noisy(n, seed=s)), window_start=start).settled for s in range(sims))
    assert upper_bound(flagged, sims) <= claim, flagged


def test_drift_in_the_window_is_reported_not_dropped() -> None:
    # a drift confined to the measured window, after a steady start: reported, the cell kept
    values = noisy(20) + [100_000 * (1 - 0.003 * i) for i in range(20)]
    state = steady.detect(series(values), window_start=15)
    assert state.settled and state.drift is not None and state.drift < -0.03
    assert steady.detect(series(noisy(40)), window_start=10).drift is None


def walk(n: int, seed: int) -> list[float]:
    """QPS on a VM wanders several percent over a minute: a random walk of 0.8% a second plus 1% noise."""
    rng = random.Random(seed)
    level, values = 100_000.0, []
    for _ in range(n):
        level += rng.gauss(0, 800)
        values.append(rng.gauss(level, 1000))
    return values


def test_wander_is_rarely_a_warmup() -> None:
    # docs/methodology.md: 3.6% of 65 s random walks are called unsettled (95% upper bound 5%)
    sims = 1000
    flagged = sum(not steady.detect(series(walk(65, seed)), window_start=5).settled for seed in range(sims))
    assert upper_bound(flagged, sims) <= 0.05, flagged


def ramp(n: int, length: int, depth: float, seed: int) -> list[float]:
    """A linear warm-up from depth x the steady level up to it over `length` seconds, 1% noise."""
    rng = random.Random(seed)
    return [rng.gauss(100_000 * (depth + (1 - depth) * min((t + 1) / length, 1.0)), 1000) for t in range(n)]


def window_bias(n: int, length: int, depth: float, start: int) -> float:
    return 1 - statistics.fmean(depth + (1 - depth) * min(t / length, 1.0) for t in range(start + 1, n + 1))


def caught(n: int, length: int, depth: float, start: int, sims: int = 40) -> float:
    return statistics.fmean(not steady.detect(series(ramp(n, length, depth, s)), start).settled for s in range(sims))


# Ramps of every length, from one that ends before the window to one as long as the series,
# on the MSER-1 path (22 s) and the MSER-5 path (70 s). A ramp that pulls the window's mean
# down by 1% or more is never taken for steady: depth 0.55 is the 24k -> 44k QPS ramp of
# issue 16, caught every time; a 20% ramp (depth 0.8) is caught in most series.
@pytest.mark.parametrize(("n", "start"), [(22, 2), (70, 10)])
@pytest.mark.parametrize(("depth", "rate"), [(0.55, 0.95), (0.8, 0.7)])
def test_ramps_into_the_window_are_unsettled(n: int, start: int, depth: float, rate: float) -> None:
    for length in range(start + 1, n + 1, 1 if n < 50 else 3):
        bias = window_bias(n, length, depth, start)
        if bias >= (0.01 if depth < 0.6 else 0.02):
            assert caught(n, length, depth, start) >= rate, (length, f"{bias:.1%}")


@pytest.mark.parametrize(("n", "start"), [(22, 2), (70, 10)])
def test_ramps_that_end_before_the_window_are_settled(n: int, start: int) -> None:
    for length in range(1, start + 1):
        assert caught(n, length, 0.55, start) <= 0.05, length


def test_the_ramp_of_issue_16() -> None:
    # ~24k -> ~44k QPS over the first 9 s, warmup = "2s", a 20 s window: settled before the fix
    values = [24_000 + 20_000 * min(t / 9, 1.0) for t in range(1, 23)]
    values = [q * (1 + 0.01 * ((i * 7) % 5 - 2)) for i, q in enumerate(values)]
    state = steady.detect(series(values), window_start=2)
    assert not state.settled
    assert "past the window start at 2 s" in state.reason and "to at least 11 s" in state.reason
    # and fed to detect() directly as the issue did: a ramp to t=9 in 21 s, window start 1 s
    state = steady.detect(series(ramp(21, 9, 0.55, seed=1)), window_start=1)
    assert not state.settled and 8 <= state.warmup_s <= 10


def test_a_ramp_as_long_as_the_series_is_unsettled() -> None:
    for n, start in ((22, 2), (70, 10)):
        state = steady.detect(series(ramp(n, n, 0.55, seed=2)), window_start=start)
        assert not state.settled and "half the series" in state.reason, state.reason


# Recorded on this VM (tests/integration/test_warmup.py's run, idle machine): ramp.lua with a
# 15 s ramp, steepest at its end, so only the last 3 s are steady and MSER truncates nothing;
# and the same script without a ramp, whose server still warmed up by 25% over 18 s.
REAL_LONG_RAMP = [
    21926,
    19799,
    21820,
    23153,
    25702,
    26299,
    28291,
    29329,
    31441,
    30218,
    30248,
    37864,
    40367,
    43960,
    42093,
    76416,
    69889,
    73011,
]
REAL_LONG_RAMP_2 = [
    12675,
    12956,
    15327,
    15633,
    17400,
    14283,
    16688,
    16742,
    21669,
    22774,
    20778,
    22568,
    25197,
    31730,
    43004,
    84958,
    64516,
    70412,
]  # a Welch test on its halves gives p = 0.014
REAL_SLOW_SERVER = [
    67875,
    69470,
    76154,
    74217,
    73983,
    76960,
    76526,
    82818,
    77474,
    82812,
    84653,
    88059,
    93072,
    90601,
    91340,
    89480,
    94548,
    87542,
]


@pytest.mark.parametrize("values", [REAL_LONG_RAMP, REAL_LONG_RAMP_2, REAL_SLOW_SERVER])
def test_recorded_climbs_are_unsettled(values: list[int]) -> None:
    state = steady.detect(series([float(v) for v in values]), window_start=2)
    assert not state.settled and "climbs" in state.reason and state.drift > 0.15, state.reason


# Recorded here (tests/integration/test_warmup.py's run, idle): ramp.lua with a 7 s ramp, whose
# server goes on warming up after it (the rest climbs from 67k to 94k QPS). MSER cuts at 8 s.
REAL_LATE_RAMP = [12216, 13270, 17076, 19736, 21527, 31531, 38645, 66780, 67682, 78824, 88277, 93210, 88063]
REAL_LATE_RAMP += [75841, 94378, 81565, 77538]


@pytest.mark.parametrize("dip", [None, (12, 60_000), (14, 50_000)])
def test_a_late_ramp_is_unsettled_however_wide_the_rest_spreads(dip: tuple[int, int] | None) -> None:
    # On CI the same run's rest spread wider, and the prediction test on its seconds let 6 s at 40%
    # of the rest through (t = 4.6 where 5.04 is needed): one second of the rest lower reproduces it
    # (both dips were settled before the FAR rule).
    values = [float(v) for v in REAL_LATE_RAMP]
    if dip is not None:
        values[dip[0]] = float(dip[1])
    state = steady.detect(series(values), window_start=2)
    assert not state.settled and "set warmup (or max_warmup) to at least" in state.reason, state.reason
    assert 5 <= state.warmup_s <= 8


def test_a_late_ramp_before_a_noisy_rest_is_unsettled() -> None:
    # the recorded 7 s of ramp, then 10 s of rest at 80k QPS with 11% noise: before the FAR rule
    # 10.5% of 2,000 such series came out settled, now 1 in 2,000
    rng = random.Random(1)
    settled = sum(
        steady.detect(series(REAL_LATE_RAMP[:7] + [rng.gauss(80_000, 9_000) for _ in range(10)]), 2).settled
        for _ in range(400)
    )
    assert settled <= 2, settled


def test_too_little_window_left_after_a_late_warmup() -> None:
    values = [20_000.0 + 4_000 * t for t in range(20)] + [100_000.0, 100_500.0]
    state = steady.detect(series(values), window_start=2)
    assert not state.settled


def test_a_short_window_is_unsettled_only_by_a_plain_warmup() -> None:
    """1 s of warm-up and 3 s of window (4 reports): MSER cuts into the window of 40% of white-noise
    series, and 2 s of rest hold no noise to judge the cut by. The interleaved cells of CI
    2026-11-27 (issue 32): flat, or falling, and called unsettled. A warm-up plain to see, more
    than 25% below the rest and climbing towards it, still is."""
    for values in ([7070, 7190, 7141, 7150], [120484, 120881, 101681, 110432], [105795, 107451, 119183, 121583]):
        state = steady.detect(series([float(v) for v in values], start=1), window_start=1)
        assert state.settled, (values, state.reason)
    rng = random.Random(5)
    flagged = sum(
        not steady.detect(series([1e5 * (1 + 0.05 * rng.gauss(0, 1)) for _ in range(4)], start=1), 1).settled
        for _ in range(2000)
    )
    assert flagged <= 20, flagged  # at most 1% (it was 40%)
    state = steady.detect(series([30_000.0, 55_000.0, 100_000.0, 101_000.0], start=1), window_start=1)
    assert not state.settled and "differ by -45" in state.reason, state.reason
    state = steady.detect(series([100_000.0, 55_000.0, 100_000.0, 101_000.0], start=1), window_start=1)
    assert state.settled, "a dip with the seconds before it on the rest's level is no warm-up"


def test_a_short_steady_climb_is_unsettled() -> None:
    """8 s, 2 s of warm-up, QPS climbing 10% of its start a second: every step is alike, so the
    noise taken from the steps (median |d|) was the slope itself and the climb passed as noise
    in half of such series; from the steps' spread about their median it does not (96% caught
    in simulation; white noise at CV 10% is flagged in 1.6% of such series)."""
    rng = random.Random(11)
    caught = sum(
        not steady.detect(series([100 * (1 + 0.1 * t) * (1 + 0.03 * rng.gauss(0, 1)) for t in range(8)]), 2).settled
        for _ in range(200)
    )
    assert caught >= 180, caught


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


@pytest.mark.parametrize("tail", [[0.0, 0.0], [0.0] * 12])
def test_a_window_whose_rest_is_idle_is_said_without_a_division_by_zero(tail: list[float]) -> None:
    """A client that stopped mid-window leaves seconds of zero after the warm-up's head (CI, test_client)."""
    from perflab.analyze.steady import _unsettled

    said = _unsettled([100.0] * 3, [100.0, 120.0, 140.0], tail, [100.0, 120.0, 140.0, *tail], False, 6.0, 3.0)
    assert said is None or ("differ by )" not in said and "by  " not in said), said
