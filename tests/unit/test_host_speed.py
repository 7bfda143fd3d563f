"""[observe] host_speed: the canary's output, the window's figure, and the verdicts' covariate
(analysis of covariance on synthetic runs whose host speed and effect are known)."""

from __future__ import annotations

import math
import random
import re
import statistics

import pytest

from perflab.analyze import compare, host_slope, host_speed, sequential, stats
from perflab.report import findings
from perflab.observers import host_speed as canary
from perflab.variants import variant_key

A, B = {"v": "a"}, {"v": "b"}
META = {"experiment": {"axes": {"v": ["a", "b"]}}}


def test_the_canarys_lines_parse_and_a_half_written_one_is_left_out():
    text = "10.000000 800000\n10.200000 812000 1\nnot a line\n10.300000 9 x\n10.400000 0 0\n10.6000"
    assert canary.parse(text) == [(10.0, 800000.0, -1, 0.0), (10.2, 812000.0, 1, 0.0)]  # older canaries' lines
    text = "10.000000 800000 0 1050000\n10.100000 790000 1 990000\n10.200000 1 2 3 4\n10.3 800000 -1 12"
    assert canary.parse(text) == [(10.0, 800000.0, 0, 1050000.0), (10.1, 790000.0, 1, 990000.0)]


def test_the_chase_has_its_own_figure_as_the_spin_does():
    samples = [(100.0 + i * 0.2, 1e6, 0, 2e6) for i in range(25)] + [(100.1 + i * 0.2, 1e6, 1, 8e6) for i in range(25)]
    samples += [(99.0, 1e6, 0, 9e9), (106.0, 1e6, 1, 9e9)]  # outside the window
    fields = canary.window_fields(samples, 100.0, 105.0)
    assert fields["work_ns"] == 1e6
    assert fields["chase_ns"] == pytest.approx(4e6) and fields["chase_per_cpu"] == {"0": 2e6, "1": 8e6}
    older = canary.window_fields([(at, w, c, 0.0) for at, w, c, _ in samples], 100.0, 105.0)
    assert older["work_ns"] == 1e6 and older["chase_ns"] is None and older["chase_per_cpu"] == {}


def test_the_window_figure_is_the_median_of_its_samples_with_per_second_medians():
    samples = [(99.0, 5e6, -1, 0.0)] + [(100.0 + i * 0.2, 1e6 + (i % 5) * 1e4, -1, 0.0) for i in range(25)]
    samples += [(106.0, 9e6, -1, 0.0)]
    fields = canary.window_fields(samples, 100.0, 105.0)
    assert fields["samples"] == 25  # 100.0 .. 104.8: the samples outside are not the window's
    assert fields["work_ns"] == 1.02e6 and fields["period_ms"] == canary.PERIOD_MS
    assert [s for s, _ in fields["seconds"]] == [0, 1, 2, 3, 4]
    assert fields["seconds"][0] == [0, 1.02e6] and 0 < fields["spread"] < 0.05
    assert fields["per_cpu"] == {}  # one unpinned thread


def test_with_a_thread_per_cpu_the_figure_is_the_geometric_mean_of_each_cpus_median():
    # CPU 0 runs at 1 ms a piece of work, CPU 1 at 4 ms (a busy sibling on the host): the
    # workload runs on both, so the cell's figure is their geometric mean, 2 ms, not the
    # median of the pooled samples (which would be whichever CPU had more of them)
    samples = [(100.0 + i * 0.2, 1e6, 0, 0.0) for i in range(25)] + [(100.1 + i * 0.2, 4e6, 1, 0.0) for i in range(25)]
    samples += [(100.05 + i * 0.2, 4e6, 1, 0.0) for i in range(10)]  # more samples of CPU 1 do not weigh more
    fields = canary.window_fields(samples, 100.0, 105.0)
    assert fields["work_ns"] == pytest.approx(2e6)
    assert fields["per_cpu"] == {"0": 1e6, "1": 4e6} and fields["samples"] == 60
    assert fields["seconds"][0] == [0, pytest.approx(2e6)]


def test_a_cpu_with_too_few_samples_is_left_out_of_the_figure():
    samples = [(100.0 + i * 0.2, 1e6, 0, 0.0) for i in range(25)] + [(100.1, 9e6, 1, 0.0), (100.3, 9e6, 1, 0.0)]
    fields = canary.window_fields(samples, 100.0, 105.0)
    assert fields["work_ns"] == 1e6 and fields["per_cpu"] == {"0": 1e6}


def test_a_window_with_too_few_samples_has_no_figure():
    fields = canary.window_fields([(1.0, 1e6, 0, 0.0), (1.2, 1e6, 0, 0.0)], 0.0, 2.0)
    assert fields["work_ns"] is None and fields["samples"] == 2 and fields["seconds"] == []


def cell(i: int, variant: dict, repeat: int, qps: float, work_ns: float | None, settled: bool = True) -> dict:
    return {
        "id": i, "key": f"{variant_key(variant)}/t2/r{repeat}", "variant": variant, "threads": 2, "repeat": repeat,
        "status": "ok", "settled": settled, "window_start_s": 5.0, "stalls": [],
        "summary": {"qps": qps, "tps": qps / 20, "latency_ms": {"p95": 1000 / qps}},
        "resources": {"rss_end_bytes": 100, "rss_peak_bytes": 120},
        "host_speed": None if work_ns is None else {"work_ns": work_ns},
    }  # fmt: skip


def run(effect: float, rounds: int = 12, slope: float = 0.7, noise: float = 0.01, seed: int = 1,
        speed_of_b: float = 1.0) -> list[dict]:  # fmt: skip
    """Rounds of A and B whose QPS follows the host's speed (which varies +/-25% from cell to
    cell) with `slope`, B `effect` times A, plus 1% of other noise; `speed_of_b`: B itself
    changes the canary's speed (a variant the covariate is not blind to)."""
    rng = random.Random(seed)
    cells = []
    for r in range(1, rounds + 1):
        for variant, factor in ((A, 1.0), (B, effect)):
            speed = math.exp(rng.gauss(0, 0.25))
            qps = 1000 * factor * speed**slope * math.exp(rng.gauss(0, noise))
            seen = speed * (speed_of_b if variant is B else 1.0)  # what the canary measures
            cells.append(cell(len(cells), variant, r, qps, 1e6 / seen))
    return cells


def qps_row(cells: list[dict]) -> compare.Comparison:
    rows = compare.verdicts(META, cells, metrics=("qps",)).comparisons
    assert len(rows) == 1
    return rows[0]


def test_the_slope_is_fitted_within_variants_so_the_effect_does_not_enter_it():
    adjustment = host_speed.fit(run(effect=0.5), "qps")
    assert adjustment is not None and adjustment.cells == 24
    assert adjustment.slope == pytest.approx(0.7, abs=0.05) and adjustment.r > 0.95
    p95 = host_speed.fit(run(effect=0.5), "p95")
    assert p95 is not None and p95.slope == pytest.approx(-0.7, abs=0.05)  # latency falls as the host speeds up


def test_adjusting_narrows_the_interval_and_finds_an_effect_the_host_hides():
    row = qps_row(run(effect=0.97))
    assert row.adjusted and row.method == "paired" and row.adjustment.startswith("host speed: slope 0.") and "within 12 rounds" in row.adjustment
    assert row.ratio == pytest.approx(0.97, abs=0.015)
    assert row.verdict == "slower"  # 3% under 25% host-speed noise: seen once the host is accounted for
    assert row.unadjusted_ratio is not None and row.unadjusted_ci_low is not None
    plain, adjusted = row.unadjusted_ci_high - row.unadjusted_ci_low, row.ci_high - row.ci_low
    assert adjusted < plain / 5
    assert row.unadjusted_ci_low < 0.97 < row.unadjusted_ci_high  # the truth, in a much wider interval


def test_identical_variants_stay_equal_after_adjusting():
    for seed in range(5):
        row = qps_row(run(effect=1.0, seed=seed))
        assert row.adjusted and row.ci_low < 1.0 < row.ci_high
        assert row.verdict in ("equivalent", "inconclusive")


def test_a_variant_that_moves_the_canary_is_not_adjusted_and_says_why():
    row = qps_row(run(effect=1.0, speed_of_b=0.7))  # B slows the canary by 30%, not its own QPS by it
    assert not row.adjusted and "the variant itself may change the vCPU's speed" in row.adjustment
    assert "the canary ran 3" in row.adjustment and "% slower beside the variant" in row.adjustment
    assert row.ratio == row.unadjusted_ratio and row.ci_low < 1.0 < row.ci_high


def test_too_few_cells_or_a_cell_without_a_figure_leave_the_row_unadjusted():
    few = run(effect=1.0, rounds=3)
    assert host_speed.fit(few, "qps") is None
    row = qps_row(few)
    assert not row.adjusted and "fewer than 8 settled cells" in row.adjustment
    cells = run(effect=1.0)
    cells[5]["host_speed"] = None
    row = qps_row(cells)
    assert not row.adjusted and row.adjustment.endswith("1 cell(s) without a canary figure")


def test_without_a_canary_nothing_changes():
    cells = run(effect=0.97)
    for c in cells:
        c["host_speed"] = None
    row = qps_row(cells)
    assert not row.adjusted and row.adjustment is None and row.unadjusted_ratio is None
    assert row.to_dict()["adjusted"] is False


def test_unsettled_cells_are_not_fitted():
    cells = run(effect=1.0)
    cells[0]["settled"] = False
    adjustment = host_speed.fit(cells, "qps")
    assert adjustment is not None and adjustment.cells == 23 and cells[0]["id"] not in adjustment.speeds


def test_the_sequential_looks_use_the_adjusted_values():
    cells = run(effect=0.97, rounds=10)
    design = sequential.Design(max_rounds=10, min_rounds=3)
    found = sequential.monitor(cells, A, {"v": ["a", "b"]}, design, 10)
    assert found[0].track.verdict == "slower"  # resolved by its looks, on values at the mean host speed
    for c in cells:
        c["host_speed"] = None
    assert sequential.monitor(cells, A, {"v": ["a", "b"]}, design, 10)[0].track.verdict == "inconclusive"


# A slope measured in advance (perflab calibrate with [observe] host_speed), fixed for the verdicts.

CALIBRATED = {"slope": 0.7, "r": 0.9, "cells": 40, "rounds": 20, "created_at": "2026-11-25T14:00:00+00:00"}


def with_round_effects(cells: list[dict], seed: int = 3) -> list[dict]:
    """The same cells with a level shared by each round (drift): within-round slopes ignore it."""
    rng = random.Random(seed)
    level = {r: math.exp(rng.gauss(0, 0.2)) for r in {c["repeat"] for c in cells}}
    return [{**c, "summary": {**c["summary"], "qps": c["summary"]["qps"] * level[c["repeat"]]}} for c in cells]


def test_the_pooled_within_round_slope_is_the_hosts_and_ignores_drift_and_the_variants_effect():
    found = host_slope.within_rounds(with_round_effects(run(effect=0.5, rounds=20)), "qps")
    assert found is not None and found["cells"] == 40
    assert found["slope"] == pytest.approx(0.7, abs=0.05) and found["r"] > 0.95
    assert 0 < found["se"] < 0.05 and host_slope.usable_slope(found) is None
    assert host_slope.within_rounds(run(effect=1.0, rounds=3), "qps") is None  # fewer than 8 cells
    noisy = host_slope.within_rounds(run(effect=1.0, rounds=4, noise=0.5, seed=3), "qps")  # 8 cells, mostly noise
    assert noisy is not None and "is not resolved" in (host_slope.usable_slope(noisy) or "")


def test_a_calibrated_slope_is_used_fixed_paired_on_the_adjusted_values():
    cells = run(effect=0.97)
    meta = {**META, "calibration": {"used": True, "host_speed": CALIBRATED}}
    (row,) = compare.verdicts(meta, cells, metrics=("qps",)).comparisons
    assert row.adjusted and row.method == "paired"
    assert row.adjustment.startswith("host speed: calibrated slope 0.70 (perflab calibrate of 2026-11-25, 20 A/A")
    # exactly the paired t interval of d_r - 0.7 c_r over the rounds (n - 1 df: nothing fitted)
    by = {(c["variant"]["v"], c["repeat"]): c for c in cells}
    d = [math.log(by["b", r]["summary"]["qps"] / by["a", r]["summary"]["qps"])
         - 0.7 * (host_speed.log_speed(by["b", r]) - host_speed.log_speed(by["a", r]))
         for r in range(1, 13)]  # fmt: skip
    half = stats.t_quantile(0.975, 11) * statistics.stdev(d) / math.sqrt(12)
    assert row.ratio == pytest.approx(math.exp(statistics.fmean(d)), rel=1e-9)
    assert row.ci_low == pytest.approx(math.exp(statistics.fmean(d) - half), rel=1e-9)
    assert row.verdict == "slower" and row.ratio == pytest.approx(0.97, abs=0.015)


def test_a_calibrated_slope_is_not_used_for_p95_nor_when_the_variant_moves_the_canary():
    meta = {**META, "calibration": {"used": True, "host_speed": CALIBRATED}}
    rows = compare.verdicts(meta, run(effect=0.97), metrics=("p95",)).comparisons
    assert rows[0].adjusted and "calibrated" not in rows[0].adjustment  # p95 fits its own slope
    (moved,) = compare.verdicts(meta, run(effect=1.0, speed_of_b=0.7), metrics=("qps",)).comparisons
    assert not moved.adjusted and "the variant itself may change the vCPU's speed" in moved.adjustment


def test_the_sequential_looks_use_the_calibrated_slope():
    cells = run(effect=0.97, rounds=10)
    design = sequential.Design(max_rounds=10, min_rounds=3)
    right = sequential.monitor(cells, A, {"v": ["a", "b"]}, design, 10, CALIBRATED)
    assert right[0].track.verdict == "slower"
    wrong = sequential.monitor(cells, A, {"v": ["a", "b"]}, design, 10, {**CALIBRATED, "slope": 0.0})
    assert wrong[0].track.verdict == "inconclusive"  # slope 0: no adjustment at all, the host hides 3%


def test_calibrated_slope_reads_only_a_number_from_the_runs_meta():
    assert host_speed.calibrated_slope({"calibration": {"host_speed": CALIBRATED}}) == CALIBRATED
    for meta in ({}, {"calibration": None}, {"calibration": {"used": False}}, {"calibration": {"host_speed": {}}},
                 {"calibration": {"host_speed": {"slope": "0.7"}}}):  # fmt: skip
        assert host_speed.calibrated_slope(meta) is None


def test_a_run_whose_own_slope_contradicts_the_calibrated_one_is_warned_about_and_an_agreeing_one_is_not():
    cells = with_round_effects(run(effect=0.97, rounds=20, slope=0.5))  # the host's slope tonight: 0.5

    def said(calibrated: dict) -> list[str]:
        meta = {**META, "calibration": {"used": True, "host_speed": calibrated}}
        return [f.text for f in findings.collect([], cells, meta) if f.kind == "host-speed"]

    (text,) = said({**CALIBRATED, "slope": 1.6, "se": 0.39})  # a quiet hour's calibration
    own = re.search(r"own within-round slope is (\d\.\d\d) ± (\d\.\d\d) \(40 cells\)", text)
    assert own and float(own[1]) == pytest.approx(0.5, abs=0.03) and float(own[2]) < 0.03, text
    assert "calibrated one its verdicts used 1.60 ± 0.39" in text and "2.8 standard errors apart" in text
    assert "over-adjusts" in text and "perflab calibrate again" in text
    (low,) = said({**CALIBRATED, "slope": 0.1, "se": 0.02})
    assert "takes out less of the host's noise" in low
    assert said({**CALIBRATED, "slope": 0.52, "se": 0.1}) == []  # agrees within its errors
    assert said({**CALIBRATED, "slope": 1.6, "se": 0.5}) == []  # 2.2 standard errors: not said
    assert [f for f in findings.collect([], cells, META) if f.kind == "host-speed"] == []  # nothing calibrated


def with_chase(cells: list[dict], spin: float = 0.4, chase: float = 0.3, seed: int = 5,
               noise: float = 0.01) -> list[dict]:  # fmt: skip
    """Cells whose QPS follows two host speeds apart: the core's (the spin) and the caches' (the
    chase), independent, +/-25% each; QPS = speed_spin^spin x speed_chase^chase, B 3% slower."""
    rng = random.Random(seed)
    out = []
    for c in cells:
        core, caches = math.exp(rng.gauss(0, 0.25)), math.exp(rng.gauss(0, 0.25))
        factor = 0.97 if c["variant"] is B else 1.0
        qps = 1000 * factor * core**spin * caches**chase * math.exp(rng.gauss(0, noise))
        out.append({**c, "summary": {**c["summary"], "qps": qps},
                    "host_speed": {"work_ns": 1e6 / core, "chase_ns": 1e6 / caches}})  # fmt: skip
    return out


def test_the_chases_weight_is_its_slope_over_the_spins_pooled_within_rounds():
    cells = with_round_effects(with_chase(run(effect=1.0, rounds=20)))
    found = host_slope.chase_weight(cells, "qps")
    assert found is not None
    assert found["spin"] == pytest.approx(0.4, abs=0.03) and found["chase"] == pytest.approx(0.3, abs=0.03)
    assert found["weight"] == pytest.approx(0.75, abs=0.1) and host_slope.usable_weight(found) == found["weight"]
    # with the weight the one covariate explains what the spin alone leaves
    alone, both = host_slope.within_rounds(cells, "qps"), host_slope.within_rounds(cells, "qps", found["weight"])
    assert alone["r"] < 0.85 < 0.95 < both["r"] and both["slope"] == pytest.approx(0.4, abs=0.03)


def test_a_chase_that_does_not_matter_or_an_older_canary_weighs_nothing():
    cells = with_chase(run(effect=1.0, rounds=20), chase=0.0, noise=0.05)
    found = host_slope.chase_weight(cells, "qps")
    assert found is not None and abs(found["chase"]) < 3 * found["chase_se"]
    assert host_slope.usable_weight(found) == 0.0
    assert host_slope.usable_weight({"weight": 9.0, "spin": 0.1, "chase": 0.9, "chase_se": 0.01}) == 0.0  # wild
    assert host_slope.usable_weight({"weight": -1.0, "spin": -0.3, "chase": 0.3, "chase_se": 0.01}) == 0.0
    assert host_slope.chase_weight(run(effect=1.0, rounds=20), "qps") is None  # no chase figures: no fit
    assert host_speed.log_speed({"host_speed": {"work_ns": 1e6}}, 0.5) is None  # weighed, the chase is needed


def test_a_calibrated_chase_weight_adjusts_on_both_figures():
    cells = with_chase(run(effect=1.0, rounds=20))
    weighed = {**CALIBRATED, "slope": 0.4, "chase_weight": 0.75}
    meta = {**META, "calibration": {"used": True, "host_speed": weighed}}
    (row,) = compare.verdicts(meta, cells, metrics=("qps",)).comparisons
    assert row.adjusted and "calibrated slope 0.40, chase weight 0.75" in row.adjustment
    spin_only = {**META, "calibration": {"used": True, "host_speed": {**CALIBRATED, "slope": 0.4}}}
    (plain,) = compare.verdicts(spin_only, cells, metrics=("qps",)).comparisons
    assert row.ratio == pytest.approx(0.97, abs=0.01) and row.verdict == "slower"
    assert (row.ci_high - row.ci_low) < 0.5 * (plain.ci_high - plain.ci_low)  # the caches' swings taken out too


def test_calibrate_chase_saves_the_chases_weight_with_the_slope_on_both(monkeypatch):
    import importlib

    calibrate = importlib.import_module("perflab.cli.calibrate")  # the module, not the click command
    monkeypatch.setattr(calibrate.host_slope, "usable_slope", lambda found: "not planned here")  # no Results needed
    noise = calibrate.power.Noise(per_second=0.016, restart=0.0029, overhead=6.0)
    cells = with_round_effects(with_chase(run(effect=1.0, rounds=20)))
    saved = calibrate._host_speed(None, cells, noise, 600, 10, chase=True)["host_speed"]
    assert saved["chase_weight"] == pytest.approx(0.75, abs=0.1) and saved["slope"] == pytest.approx(0.4, abs=0.03)
    assert saved["rounds"] == 20 and saved["r"] > 0.95
    spin = calibrate._host_speed(None, cells, noise, 600, 10)["host_speed"]  # opt-in: without --chase the spin alone
    assert spin["chase_weight"] is None and spin["r"] < 0.85
    older = calibrate._host_speed(None, with_round_effects(run(effect=1.0, rounds=20)), noise, 600, 10)["host_speed"]
    assert older["chase_weight"] is None and older["slope"] == pytest.approx(0.7, abs=0.05)  # an older canary


def with_steal(cells: list[dict], spin: float = 0.4, steal: float = 0.6, seed: int = 9,
               noise: float = 0.01) -> list[dict]:  # fmt: skip
    """Cells whose QPS follows the core's speed (the canary's spin, +/-25%) and, apart from it,
    the CPU the hypervisor took (steal, 0 to 1 core: exponential, mean 0.15, as measured here);
    log QPS = spin x log speed - steal x cores; B 3% slower."""
    rng = random.Random(seed)
    out = []
    for c in cells:
        core, taken = math.exp(rng.gauss(0, 0.25)), min(1.0, rng.expovariate(1 / 0.15))
        factor = 0.97 if c["variant"] is B else 1.0
        qps = 1000 * factor * core**spin * math.exp(-steal * taken + rng.gauss(0, noise))
        out.append({**c, "summary": {**c["summary"], "qps": qps}, "host_speed": {"work_ns": 1e6 / core},
                    "resources": {**c["resources"], "steal_cpu_cores": round(taken, 3)}})  # fmt: skip
    return out


def test_the_steals_weight_is_its_slope_over_the_canarys_pooled_within_rounds():
    cells = with_round_effects(with_steal(run(effect=1.0, rounds=20)))
    found = host_slope.steal_weight(cells, "qps")
    assert found is not None
    assert found["speed"] == pytest.approx(0.4, abs=0.03) and found["steal"] == pytest.approx(0.6, abs=0.05)
    assert found["weight"] == pytest.approx(1.5, abs=0.2) and host_slope.usable_steal_weight(found) == found["weight"]
    alone, both = host_slope.within_rounds(cells, "qps"), host_slope.within_rounds(cells, "qps", 0.0, found["weight"])
    assert alone["r"] < 0.9 < 0.97 < both["r"] and both["slope"] == pytest.approx(0.4, abs=0.03)
    # more steal, a slower host: minus the cores, weighed, on the canary's log speed
    spin, steal = -math.log(cells[0]["host_speed"]["work_ns"]), cells[0]["resources"]["steal_cpu_cores"]
    assert host_speed.log_speed(cells[0], 0.0, 2.0) == pytest.approx(spin - 2.0 * steal)


def test_steal_that_does_not_matter_or_a_cell_without_it_weighs_nothing():
    cells = with_steal(run(effect=1.0, rounds=20), steal=0.0, noise=0.05)
    found = host_slope.steal_weight(cells, "qps")
    assert found is not None and abs(found["steal"]) < 3 * found["steal_se"]
    assert host_slope.usable_steal_weight(found) == 0.0
    assert host_slope.usable_steal_weight({"weight": 30.0, "speed": 0.02, "steal": 0.6, "steal_se": 0.01}) == 0.0
    assert host_slope.usable_steal_weight({"weight": -2.0, "speed": -0.3, "steal": 0.6, "steal_se": 0.01}) == 0.0
    assert host_slope.steal_weight(run(effect=1.0, rounds=20), "qps") is None  # no steal figures: no fit
    assert host_speed.log_speed({"host_speed": {"work_ns": 1e6}}, 0.0, 1.5) is None  # weighed, steal is needed
    assert host_speed.log_speed({"host_speed": {"work_ns": 1e6}, "resources": {"steal_cpu_cores": None}}, 0, 1) is None


def test_a_calibrated_steal_weight_adjusts_on_the_canary_and_the_steal():
    cells = with_steal(run(effect=1.0, rounds=20))
    weighed = {**CALIBRATED, "slope": 0.4, "steal_weight": 1.5}
    meta = {**META, "calibration": {"used": True, "host_speed": weighed}}
    (row,) = compare.verdicts(meta, cells, metrics=("qps",)).comparisons
    assert row.adjusted and "calibrated slope 0.40, steal weight 1.50" in row.adjustment
    spin_only = {**META, "calibration": {"used": True, "host_speed": {**CALIBRATED, "slope": 0.4}}}
    (plain,) = compare.verdicts(spin_only, cells, metrics=("qps",)).comparisons
    assert row.ratio == pytest.approx(0.97, abs=0.01) and row.verdict == "slower"
    assert (row.ci_high - row.ci_low) < 0.5 * (plain.ci_high - plain.ci_low)  # the CPU taken away taken out too


def test_calibrate_saves_the_steals_weight_when_steal_matters(monkeypatch):
    import importlib

    calibrate = importlib.import_module("perflab.cli.calibrate")  # the module, not the click command
    monkeypatch.setattr(calibrate.host_slope, "usable_slope", lambda found: "not planned here")  # no Results needed
    noise = calibrate.power.Noise(per_second=0.016, restart=0.0029, overhead=6.0)
    cells = with_round_effects(with_steal(run(effect=1.0, rounds=20)))
    saved = calibrate._host_speed(None, cells, noise, 600, 10)["host_speed"]
    assert saved["steal_weight"] == pytest.approx(1.5, abs=0.2) and saved["slope"] == pytest.approx(0.4, abs=0.03)
    assert saved["chase_weight"] is None and saved["r"] > 0.95
    flat = with_steal(run(effect=1.0, rounds=20), steal=0.0, noise=0.05)
    quiet = calibrate._host_speed(None, flat, noise, 600, 10)["host_speed"]
    assert quiet["steal_weight"] is None  # steal that does not move QPS is not weighed in
    both = with_round_effects(with_chase(with_steal(run(effect=1.0, rounds=20))))  # the chase's cells keep no steal
    assert calibrate._host_speed(None, both, noise, 600, 10, chase=True)["host_speed"]["steal_weight"] is None


def test_calibrate_says_why_it_saves_no_slope():
    """Too few cells, no spread of the canary within rounds, a wild fit: no slope, and the reason,
    printed with the calibration; without the canary, neither."""
    import importlib

    calibrate = importlib.import_module("perflab.cli.calibrate")
    noise = calibrate.power.Noise(per_second=0.016, restart=0.0029, overhead=6.0)
    few = calibrate._host_speed(None, run(effect=1.0, rounds=3), noise, 600, 10)
    assert few == {"host_speed": None, "host_speed_missing": "fewer than 8 settled cells with a canary figure (6)"}
    flat = [{**c, "host_speed": {"work_ns": 1e6}} for c in run(effect=1.0, rounds=6)]
    assert calibrate._host_speed(None, flat, noise, 600, 10)["host_speed_missing"] == (
        "the canary's speed did not vary within rounds (12 cells)"
    )
    # QPS that follows the canary 8 times over: no host's slope (the calibration file would refuse it)
    wild = calibrate._host_speed(None, run(effect=1.0, rounds=6, slope=8.0), noise, 600, 10)
    assert wild["host_speed"] is None and wild["host_speed_missing"].startswith("the fit on 12 cells, slope 7.9")
    assert "is beyond ±5: too few rounds to place it" in wild["host_speed_missing"]
    plain = [{**c, "host_speed": None} for c in run(effect=1.0, rounds=6)]
    assert calibrate._host_speed(None, plain, noise, 600, 10) == {"host_speed": None, "host_speed_missing": None}
    with calibrate.out.capture() as captured:
        calibrate.show_host_speed(wild, "10 min")
    assert "host speed: no slope measured: the fit on 12 cells" in " ".join(captured.get().split())
