"""The host-speed slope and its covariates' weights, pooled within rounds: what `perflab calibrate`
stores of the host's speed, and whether a run's own cells contradict a calibrated slope.

Input: a run's cells (settled, with a canary figure: analyze/host_speed.py's `log_speed`). The
slope is that of log(metric) on log(speed) with an effect per (variant, threads) group and per
(round, threads) block taken out by least squares; the chase's and the steal's weights are their
own slopes over the spin's, used only when resolved (`usable_weight`, `usable_steal_weight`).
analyze/host_speed.py then adjusts the verdicts with the slope (docs/methodology.md#host-speed).

    calibrate(cells)  -> {"slope": 0.52, "se": 0.04, "r": 0.81, "cells": 48, "rounds": 12, ...}
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from perflab.analyze.host_speed import (
    MIN_CELLS,
    less_steal,
    log_of_inverse,
    log_speed,
    metric_value,
    usable_cell,
    weights,
)
from perflab.store import calibration
from perflab.variants import variant_key

Covariate = Callable[[dict[str, Any]], float | None]


def _rows(
    cells: list[dict[str, Any]], metric: str, covariates: list[Covariate]
) -> list[tuple[dict[str, Any], list[float | None], float]]:
    """(cell, its covariates, log(metric)) of the settled cells with every covariate and a metric above 0."""
    rows = []
    for cell in cells:
        xs, y = [f(cell) for f in covariates], metric_value(cell, metric)
        if usable_cell(cell) and None not in xs and y is not None and y > 0:
            rows.append((cell, xs, math.log(y)))
    return rows


def _within(
    cells: list[dict[str, Any]], metric: str, covariates: list[Covariate]
) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The settled cells' covariates (one column each) and log(metric), with the effect of each
    (variant, threads) group and each (round, threads) block taken out by least squares, and
    the degrees of freedom those effects leave; None with fewer than MIN_CELLS such cells."""
    rows = _rows(cells, metric, covariates)
    if len(rows) < MIN_CELLS:
        return None
    groups = sorted({(variant_key(c["variant"]), c["threads"]) for c, _, _ in rows})
    blocks = sorted({(c.get("repeat"), c["threads"]) for c, _, _ in rows}, key=str)
    dummies = np.array(
        [
            [float((variant_key(c["variant"]), c["threads"]) == g) for g in groups]
            + [float((c.get("repeat"), c["threads"]) == b) for b in blocks[1:]]
            for c, _, _ in rows
        ]
    )

    def residual(v: np.ndarray) -> np.ndarray:
        return v - dummies @ np.linalg.lstsq(dummies, v, rcond=None)[0]

    x = residual(np.array([xs for _, xs, _ in rows], dtype=float))
    return x, residual(np.array([y for _, _, y in rows])), len(rows) - int(np.linalg.matrix_rank(dummies))


def within_rounds(
    cells: list[dict[str, Any]], metric: str = "qps", chase_weight: float = 0.0, steal_weight: float = 0.0
) -> dict[str, Any] | None:
    """The pooled within-round slope of log(metric) on log(speed) (with the chase and the steal
    weighed in, `log_speed`): least squares with an effect per (variant, threads) group and per (round,
    threads) block, over the settled cells with a canary figure (what `perflab calibrate`
    stores); {slope, se, r, cells}, or None with fewer than MIN_CELLS of them or no spread of
    speed left. `se`: the slope's standard error (the residual variance on the degrees of
    freedom the effects leave)."""
    found = _within(cells, metric, [lambda c: log_speed(c, chase_weight, steal_weight)])
    if found is None:
        return None
    x, ry, df = found
    rx = x[:, 0]
    sxx, syy = float(rx @ rx), float(ry @ ry)
    if sxx <= 1e-12:
        return None
    r = float(rx @ ry) / math.sqrt(sxx * syy) if syy > 0 else 0.0
    slope = float(rx @ ry) / sxx
    df -= 1
    se = math.sqrt(float((ry - slope * rx) @ (ry - slope * rx)) / df / sxx) if df > 0 else math.inf
    return {"slope": slope, "se": se, "r": r, "cells": len(rx)}


def calibrate(cells: list[dict[str, Any]], chase: bool = False, steal: bool = True) -> dict[str, Any] | str:
    """What `perflab calibrate` stores of the host's speed: the weights first (the chase's when
    `chase` and resolved, `chase_weight`; the steal's when `steal` and resolved, `steal_weight`), then the
    within-round slope on the weighed covariate; {slope, se, r, cells, rounds, chase_weight,
    steal_weight} (a weight None: not weighed in), or why there is none: too few cells, no spread of
    speed within rounds, or a wild fit (beyond calibration.MAX_SLOPE: a few cells' fit, which the
    calibration file would refuse)."""
    weight = round(usable_weight(chase_weight(cells, "qps")), 4) if chase else 0.0
    taken = round(usable_steal_weight(steal_weight(cells, "qps", weight)), 4) if steal else 0.0
    found = within_rounds(cells, "qps", weight, taken)
    if found is None:
        usable = len(_rows(cells, "qps", [lambda c: log_speed(c, weight, taken)]))
        if usable < MIN_CELLS:
            return f"fewer than {MIN_CELLS} settled cells with a canary figure ({usable})"
        return f"the canary's speed did not vary within rounds ({usable} cells)"
    if abs(found["slope"]) > calibration.MAX_SLOPE:
        return (
            f"the fit on {found['cells']} cells, slope {found['slope']:.2f} ± {found['se']:.2f}, is beyond "
            f"±{calibration.MAX_SLOPE:.0f}: too few rounds to place it (calibrate with more --rounds)"
        )
    rounds = len({c["repeat"] for c in cells if log_speed(c, weight, taken) is not None})
    return {
        "slope": round(found["slope"], 4),
        "se": round(found["se"], 4),
        "r": round(found["r"], 4),
        "cells": found["cells"],
        "rounds": rounds,
        "chase_weight": weight or None,
        "steal_weight": taken or None,
    }


CHASE_T = 2.0  # the chase (or steal) is weighed in when its own slope is at least this many standard errors above 0


def chase_weight(cells: list[dict[str, Any]], metric: str = "qps") -> dict[str, Any] | None:
    """How much the canary's pointer chase adds to its spin as a covariate: log(metric) on both
    log speeds, pooled within rounds as `within_rounds`; {weight, spin, chase, chase_se}, the
    weight the chase's slope over the spin's. None without chase figures (an older canary) or
    too few cells; `usable_weight` says whether the weight is worth using."""
    found = _second(cells, metric, log_speed, lambda c: log_of_inverse(c, "chase_ns"))
    return None if found is None else {"weight": found[0], "spin": found[1], "chase": found[2], "chase_se": found[3]}


def steal_weight(cells: list[dict[str, Any]], metric: str = "qps", chase_weight: float = 0.0) -> dict[str, Any] | None:
    """How much the host's steal time adds to the canary (its spin, and its chase with
    `chase_weight`) as a covariate: log(metric) on the canary's log speed and on minus the steal
    in cores, pooled within rounds as `within_rounds`; {weight, speed, steal, steal_se}, the
    weight the steal's slope over the canary's. None without steal figures or too few cells;
    `usable_steal_weight` says whether it is worth using.

    Why both: the canary sees a slower vCPU and the CPU taken from it only as far as its own
    short spin was descheduled; steal counts every CPU-second taken. Measured here
    (bench/archive/steal_covariate.py, within-round residual of log QPS): in a heavy-steal half hour
    steal left 9% of the variance and the canary 48%, in a quiet one 58% and 18%; both 5-9%."""
    found = _second(cells, metric, lambda c: log_speed(c, chase_weight), less_steal)
    return None if found is None else {"weight": found[0], "speed": found[1], "steal": found[2], "steal_se": found[3]}


def _second(
    cells: list[dict[str, Any]], metric: str, first: Covariate, second: Covariate
) -> tuple[float, float, float, float] | None:
    """log(metric) on two covariates within rounds (`_within`): (the second's slope over the
    first's, the first's slope, the second's, the second's standard error); None with too few
    cells or covariates that do not vary apart."""
    found = _within(cells, metric, [first, second])
    if found is None:
        return None
    x, ry, df = found
    xtx = x.T @ x
    df -= 2
    if df <= 0 or np.linalg.cond(xtx) > 1e12:
        return None
    inverse = np.linalg.inv(xtx)
    one, two = (float(b) for b in inverse @ x.T @ ry)
    e = ry - x @ np.array([one, two])
    se = math.sqrt(float(e @ e) / df * float(inverse[1, 1]))
    return (two / one if one > 0 else math.inf), one, two, se


def usable_weight(found: dict[str, Any] | None) -> float:
    """The chase's weight to use (0: the spin alone): both slopes positive, the chase's
    resolved (CHASE_T standard errors) and the weight within what a calibration file may hold."""
    if not found:
        return 0.0
    return _usable_weight(
        found["spin"], found["chase"], found["chase_se"], found["weight"], calibration.MAX_CHASE_WEIGHT
    )


def usable_steal_weight(found: dict[str, Any] | None) -> float:
    """The steal's weight to use (0: the canary alone), as `usable_weight`."""
    if not found:
        return 0.0
    return _usable_weight(
        found["speed"], found["steal"], found["steal_se"], found["weight"], calibration.MAX_STEAL_WEIGHT
    )


def _usable_weight(first: float, second: float, se: float, weight: float, most: float) -> float:
    if first <= 0 or second < CHASE_T * se:
        return 0.0
    return weight if 0 < weight <= most else 0.0


MIN_T = 4.0  # a calibrated slope is used when it is positive and at least this many standard errors


def usable_slope(found: dict[str, Any] | None) -> str | None:
    """Why a calibration's slope is not used for the verdicts, or None when it is: a slope that
    is negative or not resolved (a short or quiet A/A run) would cost power (any fixed slope
    keeps the test valid), so the run fits its own instead."""
    if not found or not isinstance(found.get("slope"), int | float):
        return "the calibration has no host-speed slope (no canary in its A/A run, or too few cells for a slope)"
    slope, se = float(found["slope"]), found.get("se")
    if slope <= 0:
        return f"its host-speed slope {slope:.2f} is not positive"
    if not isinstance(se, int | float) or slope < MIN_T * se:
        return f"its host-speed slope {slope:.2f} is not resolved (under {MIN_T:g} standard errors; more A/A rounds)"
    return None


# a run's own slope this many combined standard errors from its calibrated one: said. Measured: 8 runs
# of 2026-11-25/26 fitted 0.49-0.55 (se 0.02-0.10) and lay 2.6-2.8 se from a quiet hour's 1.60 +/- 0.40
DISAGREE_Z = 2.5


def disagreement(cells: list[dict[str, Any]], calibrated: dict[str, Any] | None) -> dict[str, Any] | None:
    """Whether the run's own pooled within-round slope (`within_rounds`, with the calibration's
    chase and steal weights) lies more than DISAGREE_Z combined standard errors from the calibrated slope
    its verdicts used: {own, calibrated, z}, or None (no calibrated slope, too few cells, or
    they agree). The verdicts stay valid (the slope was fixed before the data); a wrong one
    costs power: too large over-adjusts (a fixed 1 against a true 0.5 took a 3.7% slowdown from
    73% called to 8%), too small leaves noise in."""
    if not calibrated or not isinstance(calibrated.get("slope"), int | float):
        return None
    own = within_rounds(cells, "qps", *weights(calibrated))
    given = calibrated.get("se")
    cal_se = float(given) if isinstance(given, int | float) else 0.0
    if own is None or not math.isfinite(own["se"]):
        return None
    spread = math.hypot(own["se"], cal_se)
    z = (own["slope"] - float(calibrated["slope"])) / spread if spread > 0 else 0.0
    return {"own": own, "calibrated": calibrated, "z": z} if abs(z) > DISAGREE_Z else None
