"""The variance decomposition (analyze/variance.py) on simulated experiments whose components
are known: per-second AR(1) noise in the window, a restart effect per cell, a round effect
shared by every cell of a round; and on a recorded real run."""

from __future__ import annotations

import math
import random
import shutil
import statistics
from pathlib import Path

import pytest

from perflab.analyze import summary, variance
from perflab.store.results import Results

REPORT_RUN = Path(__file__).parent.parent / "data" / "report" / "tiny"


def _cell(rng: random.Random, variant: str, repeat: int, level: float, window: int, ar: float, sd_s: float) -> dict:
    """One cell: `window` seconds of AR(1) log-noise (per-second sd `sd_s`, lag-1 `ar`) around `level`."""
    e, series = rng.gauss(0, sd_s), []
    for t in range(window):
        e = ar * e + math.sqrt(1 - ar * ar) * rng.gauss(0, sd_s)
        series.append({"t": float(t + 1), "qps": 1000.0 * math.exp(level + e)})
    qps = statistics.fmean(iv["qps"] for iv in series)
    return {"variant": {"v": variant}, "threads": 1, "repeat": repeat, "status": "ok", "settled": True,
            "summary": {"qps": qps}, "window_start_s": 0.0, "series": series}  # fmt: skip


def simulate(seed: int, rounds: int = 8, variants: int = 2, restart: float = 0.01, drift: float = 0.02,
             window: int = 40, ar: float = 0.5, sd_s: float = 0.02) -> list[dict]:  # fmt: skip
    rng = random.Random(seed)
    cells = []
    for r in range(1, rounds + 1):
        shared = rng.gauss(0, drift)
        for v in range(variants):
            level = 0.05 * v + shared + rng.gauss(0, restart)
            cells.append({"id": len(cells), **_cell(rng, f"v{v}", r, level, window, ar, sd_s)})
    return cells


def decompose(cells: list[dict]) -> variance.Decomposition:
    return variance.decompose(cells, {c["id"]: c["series"] for c in cells})


def _mean_components(trials: int, **kw) -> dict[str, float]:
    found: dict[str, list[float]] = {"window": [], "restarts": [], "drift": []}
    for seed in range(trials):
        dec = decompose(simulate(seed, **kw))
        for name, values in found.items():
            values.append(dec.component(name).variance)
    return {name: statistics.fmean(v) for name, v in found.items()}


def test_recovers_known_components_on_average():
    # AR(1), lag-1 correlation 0.5: the window mean's variance is about sd^2 (1 + a) / (1 - a) / n
    sd_s, ar, window = 0.02, 0.5, 40
    got = _mean_components(300, restart=0.01, drift=0.02, window=window, ar=ar, sd_s=sd_s)
    assert got["window"] == pytest.approx(sd_s**2 * 3 / window, rel=0.15)
    assert got["restarts"] == pytest.approx(0.01**2, rel=0.3)
    assert got["drift"] == pytest.approx(0.02**2, rel=0.3)


@pytest.mark.parametrize("window", [10, 40])
def test_autocorrelation_is_allowed_for(window):
    # a per-second variance / n would be 3x too small for a = 0.5; a short window too
    white = _mean_components(200, restart=0.0, drift=0.0, ar=0.0, window=window)["window"]
    correlated = _mean_components(200, restart=0.0, drift=0.0, ar=0.5, window=window)["window"]
    assert white == pytest.approx(0.02**2 / window, rel=0.15)
    assert correlated / white == pytest.approx(3.0, rel=0.2)


def test_a_negative_lag1_shrinks_the_window_as_an_ar1_does():
    # a = -0.4: the window mean's variance is sd^2 (0.6 / 1.4) / n, 0.43 of white noise's; clamped
    # at 0 (before 2026-11-26) it was counted as white
    sd_s, window = 0.02, 40
    got = _mean_components(200, restart=0.0, drift=0.0, ar=-0.4, window=window, sd_s=sd_s)["window"]
    assert got == pytest.approx(sd_s**2 * 0.6 / 1.4 / window, rel=0.2)
    rho = decompose(simulate(1, rounds=20, restart=0.0, drift=0.0, ar=-0.4, window=window)).rho
    assert -0.55 < rho < -0.25
    assert variance.autocorrelated_variance([[1.0, -1.0] * 20])[1] == variance.MIN_RHO  # no series lies below


def test_fractions_and_advice_follow_the_dominant_component():
    drifting = decompose(simulate(1, rounds=12, restart=0.002, drift=0.05, sd_s=0.002))
    assert drifting.component("drift").fraction == 0.0  # a paired ratio cancels it
    assert drifting.component("drift").fraction_unpaired > 0.8
    assert "drifts" in drifting.advice
    restarts = decompose(simulate(2, rounds=12, restart=0.03, drift=0.0, sd_s=0.002))
    assert restarts.component("restarts").fraction > 0.8
    assert "restarts dominate" in restarts.advice
    noisy = decompose(simulate(3, rounds=40, restart=0.0, drift=0.0, sd_s=0.05, window=10))
    assert noisy.component("window").fraction > 0.5
    assert "longer window would help" in noisy.advice and "little" not in noisy.advice
    paired = [c.fraction for c in noisy.components]
    assert sum(paired) == pytest.approx(1.0)


def test_too_few_rounds_and_one_variant_say_so():
    few = decompose(simulate(4, rounds=2))
    assert few.component("restarts").variance is None and "too few complete rounds (2)" in few.advice
    one_second = decompose(simulate(6, rounds=4, window=1))  # every round, but no window to measure
    assert one_second.component("window").variance is None and one_second.rounds == 4
    assert "longer duration" in one_second.advice and "rounds" not in one_second.advice
    one = decompose(simulate(5, variants=1))
    assert one.component("drift").variance is None
    assert one.component("restarts").variance is not None
    assert "cannot be told apart" in one.advice


def test_incomplete_rounds_and_unsettled_cells_are_left_out():
    cells = simulate(6, rounds=5)
    cells[0]["settled"] = False  # round 1 loses v0: not a complete block
    cells[3]["status"] = "failed"  # round 2 loses v1
    dec = decompose(cells)
    assert dec.rounds == 3 and dec.cells == 8
    assert dec.to_dict()["df_residual"] == 2


def test_recorded_run_decomposes(tmp_path: Path):
    copy = tmp_path / "tiny"
    shutil.copytree(REPORT_RUN, copy)  # opening a database writes beside it: never in tests/data
    with Results(copy) as results:
        _, cells = summary.load(results)
        doc = variance.load(results, cells).to_dict()
    assert [c["name"] for c in doc["components"]] == ["window", "restarts", "drift"]
    assert doc["cells"] > 0 and doc["advice"]


def test_too_few_rounds_is_empty():
    assert decompose([]).empty
    assert decompose(simulate(7, rounds=2)).empty  # the window alone: no table in the reports
    assert not decompose(simulate(7)).empty


def _interleaved(seed: int, rounds: int = 12, window: int = 10, host_sd: float = 0.08, own_sd: float = 0.01,
                 restart: float = 0.01) -> list[dict]:  # fmt: skip
    """Rounds of two identical cells taking turns: every second a host speed both share (sd
    `host_sd`, independent from second to second), each cell's own per-second noise and restart."""
    rng = random.Random(seed)
    cells: list[dict] = []
    for r in range(1, rounds + 1):
        host = [rng.gauss(0, host_sd) for _ in range(window)]
        group = [len(cells) + 1, len(cells) + 2]
        for v in range(2):
            level = rng.gauss(0, restart)
            series = [{"t": float(t + 1), "qps": 1000.0 * math.exp(level + h + rng.gauss(0, own_sd))}
                      for t, h in enumerate(host)]  # fmt: skip
            cells.append({"id": len(cells), "variant": {"v": f"v{v}"}, "threads": 1, "repeat": r, "status": "ok",
                          "settled": True, "summary": {"qps": statistics.fmean(iv["qps"] for iv in series)},
                          "window_start_s": 0.0, "series": series,
                          "design": {"name": "interleaved", "group": group}})  # fmt: skip
    return cells


def test_interleaved_window_leaves_out_what_the_group_shares():
    """The host's swings fall on both cells of a group alike: the window component is the
    cells' own noise (0.01^2 / 10 s), not the host's (0.08^2 / 10), and the paired variance it
    predicts is the one the rounds show; the same cells read as sequential ones would count the
    host's swings as window noise and predict a paired variance many times too large."""
    own, predicted, seen, raw = [], [], [], []
    for seed in range(60):
        cells = _interleaved(seed)
        dec = decompose(cells)
        own.append(dec.component("window").variance)
        predicted.append(dec.paired_variance)
        logs = {}
        for c in cells:
            logs.setdefault(c["repeat"], []).append(math.log(c["summary"]["qps"]))
        seen.append(statistics.variance([b - a for a, b in logs.values()]))
        plain = decompose([{k: v for k, v in c.items() if k != "design"} for c in cells])
        raw.append(plain.paired_variance)
        assert "interleaved" in dec.method and "interleaved" not in plain.method
    assert statistics.fmean(own) == pytest.approx(0.01**2 / 10, rel=0.35)
    assert statistics.fmean(predicted) == pytest.approx(statistics.fmean(seen), rel=0.3)
    assert statistics.fmean(raw) > 5 * statistics.fmean(seen)


def test_an_interleaved_cell_alone_in_its_group_has_no_window():
    cells = _interleaved(1, rounds=4)
    alone = [c for c in cells if c["variant"] == {"v": "v0"}]
    assert variance.own_windows(alone[:1], {c["id"]: c["series"] for c in alone}) == []
