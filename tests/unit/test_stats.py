"""Confidence intervals (coverage by simulation), ratio intervals, verdicts, comparisons."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

from perflab.analyze import compare, ratio, stats, summary
from perflab.analyze.verdict import EQUIVALENT, FASTER, INCONCLUSIVE, SLOWER, judge
from perflab.errors import UsageError
from tests.unit.rates import assert_at_most, assert_not_above, assert_within


def draw(rng: random.Random, n: int, mean: float, cv: float) -> list[float]:
    return [rng.gauss(mean, mean * cv) for _ in range(n)]


def verdict_of(base: list[float], other: list[float], higher_is_better: bool = True) -> str:
    """The verdict of one unpaired comparison alone (a family of one)."""
    return judge([ratio.welch(base, other)], higher_is_better)[0].verdict


# --- rates by simulation ------------------------------------------------------------------
# Each claim of the README's "Explaining the numbers" is held by the real code on numpy arrays
# (stats.mean_half_width and stats.log_ratio_interval are what ci and ratio.welch compute;
# test_the_array_path_is_the_scalar_path checks that) with enough trials for a binomial bound:
# the rate's Clopper-Pearson 95% bound must lie within the claim. bench/stats_rates.py measures
# the same on a larger grid (every CV and design) with 200,000 trials a case.

OUTLIER_P, OUTLIER_DROP = 0.05, 0.25


def noise(rng: np.random.Generator, family: str, mean: float, cv: float, shape: tuple[int, int]) -> np.ndarray:
    """Repeats of true mean `mean` and CV `cv` (outlier: 1 repeat in 20 is 25% low; `mean` is the mixture's)."""
    if family == "gauss":
        return mean * (1 + cv * rng.standard_normal(shape))
    if family == "lognormal":
        s = np.sqrt(np.log1p(cv * cv))
        return mean * np.exp(s * rng.standard_normal(shape) - s * s / 2)
    if family == "t3":
        return mean * (1 + cv * rng.standard_t(3, shape) / np.sqrt(3))
    values = mean * (1 + cv * rng.standard_normal(shape))
    values = np.where(rng.random(shape) < OUTLIER_P, values * (1 - OUTLIER_DROP), values)
    return values / (1 - OUTLIER_P * OUTLIER_DROP)


def mean_covered(rng: np.random.Generator, family: str, cv: float, n: int, trials: int) -> int:
    x = noise(rng, family, 1000.0, cv, (trials, n))
    return int(np.sum(np.abs(x.mean(1) - 1000.0) <= stats.mean_half_width(x.std(1, ddof=1), n)))


def log_ratios(
    rng: np.random.Generator, family: str, design: tuple, truth: float, trials: int, level: float = stats.LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """(log ratio - log truth, half-width) of `trials` comparisons; design = (n_a, cv_a, n_b, cv_b)."""
    na, cva, nb, cvb = design
    a, b = noise(rng, family, 100.0, cva, (trials, na)), noise(rng, family, 100.0 * truth, cvb, (trials, nb))
    with np.errstate(invalid="ignore"):  # t3 at 20% CV: a mean below 0 now and then (no interval: not covered)
        log_ratio, half = stats.log_ratio_interval(
            a.mean(1), a.var(1, ddof=1), na, b.mean(1), b.var(1, ddof=1), nb, level
        )
    return log_ratio - np.log(truth), half


@pytest.mark.parametrize(
    ("family", "cv", "n"),
    [
        ("gauss", 0.02, 3),
        ("gauss", 0.02, 5),
        ("gauss", 0.2, 10),
        ("lognormal", 0.2, 3),
        ("lognormal", 0.2, 5),
        ("lognormal", 0.05, 10),
    ],
)
def test_mean_interval_covers_95_percent(family: str, cv: float, n: int) -> None:
    # README: 95% +- 1% for Gaussian and lognormal noise, CV 1-20%, 3-10 repeats (lowest: lognormal 20%, 94.4%)
    trials = 100_000
    assert_within(mean_covered(np.random.default_rng(n), family, cv, n, trials), trials, 0.94, 0.96)


def test_mean_interval_with_heavy_tails_and_outliers() -> None:
    rng = np.random.default_rng(7)
    trials = 40_000
    # README: heavy tails (t, 3 df) make the interval wider than needed: 96% (95.8-96.3%)
    for n in (3, 10):
        assert_within(mean_covered(rng, "t3", 0.1, n, trials), trials, 0.95, 0.97)
    # README: one repeat in 20 that is 25% low, at 2% CV, leaves it at 91% (3 repeats) and 75% (10)
    assert_within(mean_covered(rng, "outlier", 0.02, 3, trials), trials, 0.90, 0.92)
    assert_within(mean_covered(rng, "outlier", 0.02, 10, trials), trials, 0.73, 0.77)


# README: the same repeat count and CV on both sides: coverage 94.5-97% (Gaussian, lognormal),
# 95-98.5% (t with 3 df, an outlier repeat); false positives at most 5% at 95%.
COVERAGE = {"gauss": (0.945, 0.97), "lognormal": (0.945, 0.97), "t3": (0.95, 0.985), "outlier": (0.95, 0.985)}


@pytest.mark.parametrize("family", list(COVERAGE))
@pytest.mark.parametrize("design", [(3, 0.01, 3, 0.01), (5, 0.05, 5, 0.05), (10, 0.2, 10, 0.2)], ids=str)
def test_ratio_interval_with_equal_designs(family: str, design: tuple) -> None:
    rng = np.random.default_rng(zlib.crc32(repr((family, design)).encode()))
    trials = 40_000
    error, half = log_ratios(rng, family, design, 1.04, trials)
    assert_within(int(np.sum(np.abs(error) <= half)), trials, *COVERAGE[family])
    error, half = log_ratios(rng, family, design, 1.0, trials)
    false_positives = int(np.sum(np.abs(error) > half))
    if design[0] == 10 and family in ("gauss", "lognormal"):
        assert_not_above(false_positives, trials, 0.05)  # Welch at equal repeats: 5% from below (4.9% at 10)
    else:
        assert_at_most(false_positives, trials, 0.05)


def test_false_positives_at_99_9_percent() -> None:
    # README: at --confidence 99.9, 0.03-0.09% with Gaussian noise, up to 0.11% with lognormal at 20% CV
    rng = np.random.default_rng(999)
    trials = 220_000
    error, half = log_ratios(rng, "gauss", (10, 0.1, 10, 0.1), 1.0, trials, level=0.999)
    assert_not_above(int(np.sum(np.abs(error) > half)), trials, 0.001, slack=0.25)
    error, half = log_ratios(rng, "lognormal", (10, 0.2, 10, 0.2), 1.0, trials, level=0.999)
    assert_at_most(int(np.sum(np.abs(error) > half)), trials, 0.0015)


def test_ratio_interval_when_the_side_with_fewer_repeats_is_noisier() -> None:
    # README: then Welch overestimates its degrees of freedom: at worst (3 repeats at 10% CV against
    # 10 at 3.3%) coverage 93%, false positives 7% at 95% and 1.2% at 99.9%; the other way round, <= 5%
    rng = np.random.default_rng(310)
    trials = 100_000
    worst = (3, 0.1, 10, 0.1 / 3)
    error, half = log_ratios(rng, "lognormal", worst, 1.04, trials)
    assert_within(int(np.sum(np.abs(error) <= half)), trials, 0.925, 0.95)
    error, half = log_ratios(rng, "lognormal", worst, 1.0, trials)
    assert_at_most(int(np.sum(np.abs(error) > half)), trials, 0.075)
    error, half = log_ratios(rng, "lognormal", worst, 1.0, trials, level=0.999)
    assert_at_most(int(np.sum(np.abs(error) > half)), trials, 0.013)
    error, half = log_ratios(rng, "lognormal", (3, 0.1 / 3, 10, 0.1), 1.0, trials)
    assert_at_most(int(np.sum(np.abs(error) > half)), trials, 0.05)


def test_the_array_path_is_the_scalar_path() -> None:
    # the simulations above call stats.mean_half_width / log_ratio_interval on arrays: the same
    # numbers as ci / ratio.welch / the verdict give one comparison at a time
    rng = np.random.default_rng(1)
    a, b = noise(rng, "lognormal", 100.0, 0.05, (200, 3)), noise(rng, "lognormal", 103.0, 0.05, (200, 5))
    log_ratio, half = stats.log_ratio_interval(a.mean(1), a.var(1, ddof=1), 3, b.mean(1), b.var(1, ddof=1), 5)
    mean_half = stats.mean_half_width(a.std(1, ddof=1), 3)
    for i in range(200):
        welch = ratio.welch(list(a[i]), list(b[i]))
        assert welch.low == pytest.approx(np.exp(log_ratio[i] - half[i]), rel=1e-12)
        assert welch.high == pytest.approx(np.exp(log_ratio[i] + half[i]), rel=1e-12)
        interval = stats.ci(list(a[i]))
        assert interval.high - interval.mean == pytest.approx(mean_half[i], rel=1e-9)
        verdict = verdict_of(list(a[i]), list(b[i]))
        assert (verdict in (FASTER, SLOWER)) == (abs(log_ratio[i]) > half[i])


def test_fewer_than_three_repeats_give_no_interval() -> None:
    assert stats.ci([1.0, 2.0]) == stats.Interval(1.5, None, None, 2)
    assert stats.ci([]).mean is None
    est = ratio.welch([100.0, 101.0], [110.0, 111.0, 112.0])
    assert est.low is None and est.ratio == pytest.approx(111.0 / 100.5)
    (j,) = judge([est], True)
    assert j.verdict == INCONCLUSIVE and "at least 3" in (j.reason or "") and j.rounds_needed == 1
    (j,) = judge([ratio.welch([], [1.0, 2.0, 3.0])], True)
    assert (
        j.verdict == INCONCLUSIVE
        and (j.reason or "").startswith("no settled repeats on one side")
        and j.rounds_needed is None
    )


def test_verdicts_with_known_differences() -> None:
    rng = random.Random(1)
    base = draw(rng, 5, 1000.0, 0.01)
    assert verdict_of(base, draw(rng, 5, 1100.0, 0.01)) == FASTER
    assert verdict_of(base, draw(rng, 5, 900.0, 0.01)) == SLOWER
    # latency: lower is better
    assert verdict_of(base, draw(rng, 5, 900.0, 0.01), higher_is_better=False) == FASTER
    assert verdict_of(draw(rng, 10, 1000.0, 0.002), draw(rng, 10, 1000.0, 0.002)) == EQUIVALENT


def test_power_for_a_three_percent_difference() -> None:
    rng = random.Random(3)
    hits = sum(verdict_of(draw(rng, 5, 1000.0, 0.01), draw(rng, 5, 970.0, 0.01)) == SLOWER for _ in range(1000))
    assert hits / 1000 > 0.9


def test_cv_and_half_width() -> None:
    assert stats.cv([1.0]) is None
    assert stats.cv([99.0, 101.0]) == pytest.approx(2**0.5 / 100)
    assert stats.ci([100.0, 100.0, 100.0]).half_width == 0.0


# --- groups and comparisons over stored cells ---------------------------------------------


def cell(
    i: int,
    variant: dict,
    threads: int,
    qps: float,
    *,
    status: str = "ok",
    settled: bool = True,
    p95: float = 1.0,
    repeat: int | None = None,
) -> dict:
    return {
        "id": i,
        "key": f"{summary.variant_key(variant)}/t{threads}/r{i}",
        "variant": variant,
        "threads": threads,
        "repeat": i + 1 if repeat is None else repeat,
        "status": status,
        "settled": settled,
        "window_start_s": 5.0,
        "stalls": [],
        "summary": None if status != "ok" else {"qps": qps, "tps": qps / 20, "latency_ms": {"p95": p95}},
        "resources": {"rss_end_bytes": 100, "rss_peak_bytes": 120},
    }


def matrix(effect: dict[tuple[str, str], float], repeats: int = 4, seed: int = 0) -> list[dict]:
    """Two axes (alloc x buf); QPS = 1000 x product of the effects of its labels, 0.5% noise."""
    rng = random.Random(seed)
    cells = []
    for r in range(repeats):
        for alloc in ("glibc", "jemalloc"):
            for buf in ("32K", "2M"):
                mean = 1000.0 * effect.get(("alloc", alloc), 1.0) * effect.get(("buf", buf), 1.0)
                qps = rng.gauss(mean, mean * 0.005)
                cells.append(cell(len(cells), {"alloc": alloc, "buf": buf}, 2, qps, repeat=r + 1))
    return cells


AXES = {"alloc": ["glibc", "jemalloc"], "buf": ["32K", "2M"]}


def test_groups_leave_out_unsettled_and_failed_cells() -> None:
    cells = [
        cell(0, {"a": "x"}, 1, 100.0),
        cell(1, {"a": "x"}, 1, 50.0, settled=False),
        cell(2, {"a": "x"}, 1, 0, status="failed"),
        cell(3, {"a": "x"}, 1, 102.0),
    ]
    (group,) = summary.groups(cells)
    assert group.qps == [100.0, 102.0] and group.unsettled == [1] and group.failed == 1
    assert group.to_dict()["unsettled"] == 1 and group.to_dict()["cells"] == [0, 3]


def test_within_finds_the_axis_effects() -> None:
    cells = matrix({("alloc", "jemalloc"): 1.05, ("buf", "2M"): 1.0}, repeats=5)
    base = compare.baseline_variant(AXES, [])
    rows = compare.within(summary.groups(cells, base), AXES, base)
    variant_rows = {summary.variant_key(r.variant): r for r in rows if r.kind == "variant"}
    assert set(variant_rows) == {"alloc=glibc,buf=2M", "alloc=jemalloc,buf=32K", "alloc=jemalloc,buf=2M"}
    assert variant_rows["alloc=glibc,buf=2M"].verdict in (EQUIVALENT, INCONCLUSIVE)
    assert variant_rows["alloc=jemalloc,buf=32K"].verdict == FASTER
    assert all(r.method == "paired" and r.pairs == 5 and r.family == 3 for r in variant_rows.values())
    effects = [r for r in rows if r.kind == "axis"]
    alloc = [r for r in effects if r.axis == "alloc"]
    assert len(alloc) == 2 and all(r.verdict == FASTER and r.ratio == pytest.approx(1.05, abs=0.01) for r in alloc)
    # the jemalloc effect within buf=2M is measured against glibc with buf=2M
    assert {r.baseline["buf"] for r in alloc} == {"32K", "2M"}
    assert all(r.baseline["buf"] == r.variant["buf"] for r in alloc)
    assert all(r.verdict in (EQUIVALENT, INCONCLUSIVE) for r in effects if r.axis == "buf")
    assert all(r.family == 4 for r in effects)  # the axis rows are their own Holm family


def test_baseline_choice() -> None:
    cells = matrix({("alloc", "jemalloc"): 0.9})
    base = compare.baseline_variant(AXES, ["alloc=jemalloc"])
    assert base == {"alloc": "jemalloc", "buf": "32K"}
    rows = [r for r in compare.within(summary.groups(cells, base), AXES, base) if r.kind == "variant"]
    glibc = next(r for r in rows if r.variant == {"alloc": "glibc", "buf": "32K"})
    assert glibc.verdict == FASTER and glibc.ratio == pytest.approx(1 / 0.9, abs=0.02)
    with pytest.raises(UsageError, match="no axis 'colour'"):
        compare.baseline_variant(AXES, ["colour=red"])
    with pytest.raises(UsageError, match="has no label 'tcmalloc'") as info:
        compare.baseline_variant(AXES, ["alloc=tcmalloc"])
    assert "glibc, jemalloc" in info.value.hint


def test_p95_metric_lower_is_better() -> None:
    cells = [
        cell(i, {"a": v}, 1, 100.0, p95=p)
        for i, (v, p) in enumerate([("x", 1.00), ("y", 0.80), ("x", 1.01), ("y", 0.81), ("x", 0.99), ("y", 0.79)])
    ]
    (row,) = compare.within(summary.groups(cells), {"a": ["x", "y"]}, {"a": "x"}, "p95")
    assert row.metric == "p95" and row.verdict == FASTER and row.ratio == pytest.approx(0.8, abs=0.01)
    assert set(row.to_dict()) >= {"threads", "baseline", "variant", "metric", "ratio", "ci_low", "ci_high", "verdict"}


def test_across_runs_matches_cells_and_reports_the_rest() -> None:
    before = matrix({})
    after = matrix({("buf", "2M"): 0.95}, seed=1)[:-4] + [cell(99, {"alloc": "tcmalloc", "buf": "2M"}, 2, 1000.0)]
    rows, unmatched = compare.across(summary.groups(before), summary.groups(after))
    verdicts = {summary.variant_key(r.variant): r.verdict for r in rows}
    assert verdicts["alloc=glibc,buf=2M"] == SLOWER and verdicts["alloc=glibc,buf=32K"] in (EQUIVALENT, INCONCLUSIVE)
    assert all(r.kind == "runs" and r.method == "welch" and "two runs" in r.method_reason for r in rows)
    assert unmatched == ["only in B: alloc=tcmalloc, buf=2M at 2 threads"]


def test_metadata_differences() -> None:
    a = {"host": {"kernel": "6.1", "cpu_model": "X"}, "experiment": {"duration": 20.0}}
    b = {"host": {"kernel": "6.5", "cpu_model": "X"}, "experiment": {"duration": 20.0}}
    assert compare.metadata_differences(a, a) == []
    assert compare.metadata_differences(a, b) == ["host.kernel: A has '6.1', B has '6.5'"]


def test_adaptive_targets() -> None:
    cells = [cell(i, {"a": "x"}, 1, q) for i, q in enumerate([1000.0, 1001.0, 999.0])]
    cells += [cell(10 + i, {"a": "y"}, 1, q) for i, q in enumerate([1000.0, 1100.0, 900.0])]
    targets = summary.adaptive_targets(cells, 0.01)
    assert targets[("a=x", 1)]["met"] and not targets[("a=y", 1)]["met"]
    assert targets[("a=y", 1)]["repeats"] == 3 and targets[("a=y", 1)]["half_width"] > 0.2
