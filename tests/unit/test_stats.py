"""Confidence intervals (coverage by simulation), ratio intervals, verdicts, comparisons."""

from __future__ import annotations

import random

import pytest

from perflab.analyze import compare, stats, summary
from perflab.errors import UsageError
from perflab.variants import variant_key


def draw(rng: random.Random, n: int, mean: float, cv: float) -> list[float]:
    return [rng.gauss(mean, mean * cv) for _ in range(n)]


@pytest.mark.parametrize("n", [3, 5, 10])
def test_mean_interval_covers_95_percent(n: int) -> None:
    rng = random.Random(n)
    trials = 3000
    covered = 0
    for _ in range(trials):
        interval = stats.ci(draw(rng, n, 1000.0, 0.02))
        covered += interval.low <= 1000.0 <= interval.high
    assert 0.93 <= covered / trials <= 0.97


@pytest.mark.parametrize(("n_a", "n_b", "cv_a", "cv_b"), [(3, 3, 0.01, 0.01), (3, 6, 0.01, 0.03), (5, 5, 0.02, 0.005)])
def test_ratio_interval_covers_95_percent(n_a: int, n_b: int, cv_a: float, cv_b: float) -> None:
    rng = random.Random(n_a * 7 + n_b)
    trials, truth = 3000, 1.04
    covered = 0
    for _ in range(trials):
        ratio, low, high = stats.ratio_ci(draw(rng, n_a, 100.0, cv_a), draw(rng, n_b, 104.0, cv_b))
        covered += low <= truth <= high
    assert 0.93 <= covered / trials <= 0.97


def test_fewer_than_three_repeats_give_no_interval() -> None:
    assert stats.ci([1.0, 2.0]) == stats.Interval(1.5, None, None, 2)
    assert stats.ci([]).mean is None
    result = stats.compare([100.0, 101.0], [110.0, 111.0, 112.0])
    assert result.verdict is None and result.low is None
    assert "at least 3" in result.reason
    assert result.ratio == pytest.approx(111.0 / 100.5)


def test_verdicts_with_known_differences() -> None:
    rng = random.Random(1)
    base = draw(rng, 5, 1000.0, 0.01)
    assert stats.compare(base, draw(rng, 5, 1100.0, 0.01)).verdict == stats.FASTER
    assert stats.compare(base, draw(rng, 5, 900.0, 0.01)).verdict == stats.SLOWER
    # latency: lower is better
    assert stats.compare(base, draw(rng, 5, 900.0, 0.01), higher_is_better=False).verdict == stats.FASTER


def test_false_positive_rate_of_identical_variants() -> None:
    rng = random.Random(2)
    trials = 3000
    wrong = sum(
        stats.compare(draw(rng, 3, 1000.0, 0.01), draw(rng, 3, 1000.0, 0.01)).verdict != stats.SAME
        for _ in range(trials)
    )
    assert wrong / trials <= 0.06
    strict = sum(
        stats.compare(draw(rng, 3, 1000.0, 0.01), draw(rng, 3, 1000.0, 0.01), level=0.999).verdict != stats.SAME
        for _ in range(trials)
    )
    assert strict / trials <= 0.005


def test_power_for_a_three_percent_difference() -> None:
    rng = random.Random(3)
    hits = sum(
        stats.compare(draw(rng, 5, 1000.0, 0.01), draw(rng, 5, 970.0, 0.01)).verdict == stats.SLOWER
        for _ in range(1000)
    )
    assert hits / 1000 > 0.9


def test_cv_and_half_width() -> None:
    assert stats.cv([1.0]) is None
    assert stats.cv([99.0, 101.0]) == pytest.approx(2**0.5 / 100)
    assert stats.ci([100.0, 100.0, 100.0]).half_width == 0.0


# --- groups and comparisons over stored cells ---------------------------------------------


def cell(
    i: int, variant: dict, threads: int, qps: float, *, status: str = "ok", settled: bool = True, p95: float = 1.0
) -> dict:
    return {
        "id": i,
        "key": f"{variant_key(variant)}/t{threads}/r{i}",
        "variant": variant,
        "threads": threads,
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
    for _ in range(repeats):
        for alloc in ("glibc", "jemalloc"):
            for buf in ("32K", "2M"):
                mean = 1000.0 * effect.get(("alloc", alloc), 1.0) * effect.get(("buf", buf), 1.0)
                cells.append(cell(len(cells), {"alloc": alloc, "buf": buf}, 2, rng.gauss(mean, mean * 0.005)))
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
    cells = matrix({("alloc", "jemalloc"): 1.05, ("buf", "2M"): 1.0})
    base = compare.baseline_variant(AXES, [])
    rows = compare.within(summary.groups(cells, base), AXES, base)
    variant_rows = {variant_key(r.variant): r for r in rows if r.kind == "variant"}
    assert set(variant_rows) == {"alloc=glibc,buf=2M", "alloc=jemalloc,buf=32K", "alloc=jemalloc,buf=2M"}
    assert variant_rows["alloc=glibc,buf=2M"].verdict == stats.SAME
    assert variant_rows["alloc=jemalloc,buf=32K"].verdict == stats.FASTER
    effects = [r for r in rows if r.kind == "axis"]
    alloc = [r for r in effects if r.axis == "alloc"]
    assert len(alloc) == 2 and all(
        r.verdict == stats.FASTER and r.ratio == pytest.approx(1.05, abs=0.01) for r in alloc
    )
    # the jemalloc effect within buf=2M is measured against glibc with buf=2M
    assert {r.baseline["buf"] for r in alloc} == {"32K", "2M"}
    assert all(r.baseline["buf"] == r.variant["buf"] for r in alloc)
    assert all(r.verdict == stats.SAME for r in effects if r.axis == "buf")


def test_baseline_choice() -> None:
    cells = matrix({("alloc", "jemalloc"): 0.9})
    base = compare.baseline_variant(AXES, ["alloc=jemalloc"])
    assert base == {"alloc": "jemalloc", "buf": "32K"}
    rows = [r for r in compare.within(summary.groups(cells, base), AXES, base) if r.kind == "variant"]
    glibc = next(r for r in rows if r.variant == {"alloc": "glibc", "buf": "32K"})
    assert glibc.verdict == stats.FASTER and glibc.ratio == pytest.approx(1 / 0.9, abs=0.02)
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
    assert row.metric == "p95" and row.verdict == stats.FASTER and row.ratio == pytest.approx(0.8, abs=0.01)
    assert set(row.to_dict()) >= {"threads", "baseline", "variant", "metric", "ratio", "ci_low", "ci_high", "verdict"}


def test_across_runs_matches_cells_and_reports_the_rest() -> None:
    before = matrix({})
    after = matrix({("buf", "2M"): 0.95}, seed=1)[:-4] + [cell(99, {"alloc": "tcmalloc", "buf": "2M"}, 2, 1000.0)]
    rows, unmatched = compare.across(summary.groups(before), summary.groups(after))
    verdicts = {variant_key(r.variant): r.verdict for r in rows}
    assert verdicts["alloc=glibc,buf=2M"] == stats.SLOWER and verdicts["alloc=glibc,buf=32K"] == stats.SAME
    assert all(r.kind == "runs" for r in rows)
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
