"""Change points in run histories (perflab/history/changes.py) and the newest-run gate
(perflab/history/gate.py), on synthetic histories with known answers: seeded, CPU only.

A history: runs whose estimates differ by a run effect (CV 1.4%) and by their own 3-8 repeats
(CV 3.2% each), about 2% CV over runs, the shape bench/history_detection.py measures at scale."""

from __future__ import annotations

import numpy as np
import pytest

from perflab.analyze import stats
from perflab.analyze.gate import parse
from perflab.history import changes, gate, record
from perflab.history.index import StoredRun
from perflab.history.series import Series
from tests.unit.rates import assert_at_most


def history(levels: list[float], seed: int, within: float = 0.032, run: float = 0.014) -> list[changes.Point]:
    rng = np.random.default_rng(seed)
    out = []
    for level in levels:
        mean = 1000 * level * (1 + rng.normal(0, run))
        values = [float(v) for v in mean * (1 + rng.normal(0, within, int(rng.choice((3, 5, 8)))))]
        out.append(changes.Point(float(np.mean(values)), values, n=len(values)))
    return out


def test_a_three_percent_step_is_found_where_it_is():
    found = []
    for seed in range(20):
        analysis = changes.detect(history([1.0] * 40 + [0.97] * 20, seed))
        found.append([(c.index, c.low, c.high) for c in analysis.change_points])
    near = [f for f in found if len(f) == 1 and abs(f[0][0] - 40) <= 4]
    assert len(near) >= 18, found  # 20 runs after the step: found, once, within 4 runs of it
    covered = sum(1 for f in near if f[0][1] <= 0.97 <= f[0][2])
    assert covered >= 16, found  # the step's interval holds the true ratio


def test_stable_histories_have_at_most_one_false_change_point_per_100_runs():
    false = sum(len(changes.detect(history([1.0] * 100, 100 + s)).change_points) for s in range(40))
    assert_at_most(false, 40 * 100, 0.01)


def test_segments_tile_the_history_with_their_levels():
    analysis = changes.detect(history([1.0] * 30 + [0.9] * 30, 7))
    assert [(s.start, s.end) for s in analysis.segments] == [(0, 30), (30, 60)]
    low, high = analysis.segments
    assert low.low < low.level < low.high and abs(low.level / 1000 - 1) < 0.02 and abs(high.level / 900 - 1) < 0.02


def test_the_run_to_run_variation_is_estimated_beside_the_runs_own():
    taus = [changes.detect(history([1.0] * 80, s)).tau for s in range(10)]
    assert 0.009 < float(np.median(taus)) < 0.02, taus  # the run effect's CV is 1.4%


def test_a_run_with_a_wide_interval_weighs_less():
    """Four runs 6% low after thirty: a change point when their repeats agree; with the same means
    but repeats that disagree (+-20%: each run's interval some 8% wide), not evidence enough."""
    base = history([1.0] * 30, 3, within=0.004, run=0.004)
    tight = [
        changes.Point(p.mean * 0.94, [v * 0.94 for v in p.values], n=p.n) for p in history([1.0] * 4, 4, 0.004, 0.004)
    ]
    wide = [changes.Point(p.mean, [p.mean * (1 + d) for d in (-0.2, 0.0, 0.2)], n=3) for p in tight]
    assert [p.mean for p in wide] == pytest.approx([p.mean for p in tight])
    assert [c.index for c in changes.detect(base + tight).change_points] == [30]
    assert changes.detect(base + wide).change_points == []


def test_runs_without_an_estimate_are_left_out():
    points = history([1.0] * 20 + [0.9] * 20, 5)
    points[10] = changes.Point(None)
    analysis = changes.detect(points)
    assert 10 not in analysis.usable and len(analysis.usable) == 39
    assert [c.index for c in analysis.change_points] == [20]  # indices are the history's, not the kept runs'


def test_the_answer_is_the_same_every_time():
    points = history([1.0] * 25 + [0.97] * 25, 11)
    assert changes.detect(points) == changes.detect(points)


# ---------------------------------------------------------------------------------------- the gate


def series_of(points: list[changes.Point]) -> Series:
    s = Series("k", "w", {"log": "OFF"}, 2, "qps")
    for i, p in enumerate(points):
        estimate = record.Estimate({"log": "OFF"}, 2, "qps", p.mean, None, None, p.n, p.values)
        s.runs.append(
            StoredRun(
                i, record.RunRecord("n", "k", {}, f"2026-11-{i + 1:02d}", None, f"/r{i}", "complete", {}, [estimate])
            )
        )
        s.estimates.append(estimate)
    s.analysis = changes.detect(points)
    return s


def test_a_newest_run_far_below_fails_the_gate():
    points = history([1.0] * 20, 21, within=0.01, run=0.005) + history([0.85], 22, within=0.01, run=0.005)
    found = gate.check([series_of(points)], parse("slower:3%"))
    assert found[0].comparison.verdict == "slower" and found[0].comparison.ratio < 0.9
    assert gate.fails(found[0], parse("slower:3%")) and not gate.fails(found[0], parse("slower:20%"))


def test_a_change_point_the_newest_run_confirms_fails_once():
    """A 6% step: the night its change point becomes detectable fails; the next night, the new
    level is the reference and the gate passes."""
    points = history([1.0] * 30 + [0.94] * 10, 31, within=0.01, run=0.005)
    threshold = parse("slower:3%")
    nights = [gate.check([series_of(points[:k])], threshold)[0] for k in range(31, 41)]
    confirmed = [i for i, f in enumerate(nights) if f.confirmed is not None]
    assert len(confirmed) == 1 and confirmed[0] <= 4, [(f.confirmed, f.comparison.verdict) for f in nights]
    assert not any(gate.fails(f, threshold) for f in nights[confirmed[0] + 2 :])


def test_an_inconclusive_newest_run_says_what_would_settle_it():
    """Two repeats of 4% spread: no interval; the gate says how many rounds would give one."""
    points = history([1.0] * 20, 41, within=0.01, run=0.004)
    points.append(changes.Point(990.0, [970.0, 1010.0], n=2))
    finding = gate.check([series_of(points)], parse("slower:3%"))[0]
    assert finding.comparison.verdict == "inconclusive" and finding.comparison.rounds_needed == 1
    assert "1 more round(s) in the next run would settle it" in gate.unsettled_line(finding)
    assert not gate.fails(finding, parse("slower:3%"))


@pytest.mark.parametrize("more", [0, 5])
def test_more_rounds_never_shrink_the_run_to_run_part(more: int):
    est = gate.RunEstimate("welch", 0.99, 5, -0.01, ((0.0004, 5),), fixed=0.0002, fixed_df=20)
    se, _ = est.se_df(more)
    assert se**2 == pytest.approx(0.0002 + 0.0004 / (5 + more))


def test_one_wild_run_after_a_step_does_not_hide_it():
    """CI's six nightly ratios (tests/integration/test_history_nightly.py): 1.00, 1.02, 0.98, then
    0.66, 0.58 with an interval of 0.34-1.00 (one wild round), 0.67. The wild run's spread is its
    own, not the runs' variation: the step at run 3 is found (it was not when wide spreads were
    shrunk toward the median, which made tau 0.10)."""
    t = stats.t_quantile(0.975, 3)

    def ratio(mean: float, low: float, high: float) -> changes.Point:
        se = (np.log(high) - np.log(low)) / 2 / t
        return changes.Point(mean, var=float(se * se), n=4, df=3)

    for low4, high4 in ((0.63, 0.69), (0.55, 0.79)):
        points = [ratio(1.0045, 0.9644, 1.0463), ratio(1.0178, 0.9727, 1.0649), ratio(0.976, 0.94, 1.01),
                  ratio(0.660, low4, high4), ratio(0.5824, 0.3401, 0.9974), ratio(0.6661, 0.6440, 0.6890)]  # fmt: skip
        analysis = changes.detect(points, test=changes.INTERVAL)
        assert [c.index for c in analysis.change_points] == [3], analysis
        assert analysis.tau < 0.07, analysis.tau
    assert changes.own_variances(points)[4] == pytest.approx(points[4].var)  # kept, not shrunk
