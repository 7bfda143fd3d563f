"""A metric known only to a step (sysbench's p95: a histogram bucket, printed to 0.01 ms) never
gets an interval narrower than its rounding allows: two rounds that report the very same p95s
gave a zero-width interval and a verdict of certainty (CI, 2026-11-27)."""

from __future__ import annotations

import math

import pytest

from perflab.analyze import ratio
from perflab.analyze.verdict import judge

P95 = ratio.resolution_of("p95")


def test_identical_rounds_of_a_rounded_metric_leave_an_honest_interval():
    base, other = {1: 4.09, 2: 4.09}, {1: 4.17, 2: 4.17}  # the CI case: one bucket apart, twice
    plain = ratio.paired(base, other)
    assert plain.low == plain.high == pytest.approx(4.17 / 4.09)  # what it was: certainty
    found = ratio.paired(base, other, res=P95)
    assert found.ratio == pytest.approx(4.17 / 4.09) and found.low < 0.99 and found.high > 1.05
    (verdict,) = judge([found], False, 0.02)
    assert verdict.verdict == "inconclusive"


def test_the_floor_is_the_rounding_of_each_value():
    # at 0.04 ms a 0.01 ms step is a quarter of the value: the floor dominates the bucket's width
    assert P95.log_variance([0.04]) == pytest.approx(((0.01 / 0.04) ** 2 + ratio.SYSBENCH_BUCKET**2) / 12)
    assert ratio.SYSBENCH_BUCKET == pytest.approx(math.expm1(math.log(1e8) / 1024)) and 0.018 < ratio.SYSBENCH_BUCKET < 0.0182
    assert ratio.resolution_of("qps").log_variance([100.0, 200.0]) == 0.0


def test_noise_larger_than_the_rounding_is_left_as_it_is():
    base, other = {1: 4.0, 2: 5.0, 3: 4.5}, {1: 4.4, 2: 5.0, 3: 5.2}
    assert ratio.paired(base, other, res=P95).high == pytest.approx(ratio.paired(base, other).high)
    chosen, welch, _ = ratio.estimate([4.0, 5.0, 4.5], [4.4, 5.0, 5.2], res=P95)
    assert chosen.high == pytest.approx(ratio.welch([4.0, 5.0, 4.5], [4.4, 5.0, 5.2]).high) and welch is chosen


def test_welch_of_identical_rounded_values_has_an_interval_too():
    found = ratio.welch([0.05, 0.05, 0.05], [0.06, 0.06, 0.06], res=P95)  # one 0.01 ms step apart
    assert found.low < found.ratio < found.high and found.high / found.low > 1.2  # +-10% rounding each
    plain = ratio.welch([0.05, 0.05, 0.05], [0.06, 0.06, 0.06])
    assert plain.low == pytest.approx(plain.high, rel=1e-12)  # without the floor: certainty
