"""The host's speed as a covariate of the verdicts ([observe] host_speed).

Why: on a shared VM the vCPU itself runs faster or slower over minutes (observers/
host_speed.py), and each cell's QPS follows it. A round's cells run a minute apart, so pairing
within rounds (analyze/ratio.py) cancels only the slow part of it; what changes between two
cells of one round stays in the per-round ratio. Measured here (bench/archive/host_speed.py, A/A):
log QPS against the canary's log speed, r = 0.88, slope 0.70; adjusting for it took the paired
interval from +/-10.7% to +/-6.8%. The paired estimate is adjusted within rounds (`paired`);
the scheme below is the Welch fallback's.

How: analysis of covariance. Within each (variant, threads) group, log(metric) is regressed on
log(speed) (speed = 1 / the canary's work_ns), one slope for the whole run, fitted on the
deviations from each group's means (so the variants' own effects do not enter the slope). A
cell's value is then brought to the run's mean speed:

    adjusted = value * exp(-slope * (log speed - mean log speed))

and the ratio, its interval and the verdict come from the adjusted values, paired or Welch as
before. The point estimate moves by slope * (the sides' difference in mean log speed): the
correction for one side having run on a faster host, not only a narrower interval.

When not: the covariate must not depend on the variant (a variant that itself slowed the
canary, a busy sibling hyperthread for example, would have its effect partly removed). Each
comparison checks it: a paired t test of the sides' log speeds over rounds (or Welch's between
all cells); at p < BALANCE_P the row keeps its unadjusted estimate and says why. Also
unadjusted: runs without the canary, fewer than MIN_CELLS cells with a figure, cells of two
runs (`compare A B`), rows with a cell that has no figure.

The slope `perflab calibrate` measures in advance, and its covariates' weights: analyze/host_slope.py.

    adj = fit(cells, "qps")          # None: nothing to fit
    adj.factor(cell)                 # 1.03: this cell ran on a slower host than the run's mean
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perflab.analyze import ratio, stats, summary
from perflab.analyze.ratio import MIN_PAIRS
from perflab.variants import variant_key

MIN_CELLS = 8  # settled cells with a canary figure in the run: fewer fit no slope
BALANCE_P = 0.01  # the sides' speeds differ beyond chance at this level: the variant moves the canary


def log_speed(cell: dict[str, Any], chase_weight: float = 0.0, steal_weight: float = 0.0) -> float | None:
    """log(1 / work_ns) of a cell's window, plus chase_weight x log(1 / chase_ns) when a
    calibration weighed the canary's pointer chase in (`chase_weight`), less steal_weight x the
    host's steal time in cores when it weighed that in (`steal_weight`); None without the
    figures it needs."""
    spin = log_of_inverse(cell, "work_ns")
    if spin is None:
        return None
    if chase_weight:
        chase = log_of_inverse(cell, "chase_ns")
        if chase is None:
            return None
        spin += chase_weight * chase
    if steal_weight:
        steal = less_steal(cell)
        if steal is None:
            return None
        spin += steal_weight * steal
    return spin


def weighed_in(calibrated: dict[str, Any] | None) -> str:
    """What a calibration weighed in beside the spin: ", chase weight 0.62, steal weight 1.40"."""
    chase, steal = weights(calibrated)
    return (f", chase weight {chase:.2f}" if chase else "") + (f", steal weight {steal:.2f}" if steal else "")


def log_of_inverse(cell: dict[str, Any], name: str) -> float | None:
    value = (cell.get("host_speed") or {}).get(name)
    return -math.log(value) if isinstance(value, int | float) and value > 0 else None


def less_steal(cell: dict[str, Any]) -> float | None:
    """Minus the steal time over the cell's window, in cores (resources.steal_cpu_cores): the
    CPU the hypervisor took away, signed as a speed (more steal, a slower host)."""
    value = (cell.get("resources") or {}).get("steal_cpu_cores")
    return -float(value) if isinstance(value, int | float) else None


def weights(calibrated: dict[str, Any] | None) -> tuple[float, float]:
    """(chase_weight, steal_weight) of a calibration's host-speed figure (0 when absent)."""
    c = calibrated or {}
    return tuple(
        float(w) if isinstance(w := c.get(k), int | float) else 0.0  # type: ignore[return-value]
        for k in ("chase_weight", "steal_weight")
    )


def metric_value(cell: dict[str, Any], metric: str) -> float | None:
    value = summary.metric_value(cell.get("summary") or {}, metric)
    return float(value) if value else None


def usable_cell(cell: dict[str, Any]) -> bool:
    return cell.get("status") == "ok" and cell.get("settled") not in (False, 0)


@dataclass(frozen=True)
class Adjustment:
    """One run's slope of log(metric) on log(speed) and the cells' speeds."""

    metric: str
    slope: float
    r: float | None
    cells: int
    reference: float  # the fitted cells' mean log speed
    speeds: dict[int, float] = field(repr=False, default_factory=dict)  # cell id -> log speed
    calibrated: dict[str, Any] | None = None  # the slope was fixed in advance: the calibration's figure

    def factor(self, cell: dict[str, Any]) -> float | None:
        """What the cell's value is multiplied by to bring it to the reference speed."""
        x = self.speeds.get(cell["id"])
        return None if x is None else math.exp(-self.slope * (x - self.reference))

    def describe(self) -> str:
        if self.calibrated is not None:
            c = self.calibrated
            when, r = str(c.get("created_at"))[:10], c.get("r")
            fit_r = f", r = {r:.2f}" if isinstance(r, int | float) else ""
            rounds = c.get("rounds")
            where = f"perflab calibrate of {when}, {rounds} A/A rounds{fit_r}"
            return f"host speed: calibrated slope {self.slope:.2f}{weighed_in(c)} ({where})"
        return f"host speed: slope {self.slope:.2f} over {self.cells} cells (r = {self.r:.2f})"

    def balance(self, base: list[dict[str, Any]], other: list[dict[str, Any]]) -> tuple[float, float | None]:
        """(the sides' difference in mean log speed, its two-sided p): paired over the rounds
        that hold both sides when there are MIN_PAIRS of them, else Welch; p None: too few."""
        xs = {
            side: {c.get("repeat"): self.speeds[c["id"]] for c in cells if c["id"] in self.speeds}
            for side, cells in (("base", base), ("other", other))
        }
        both = sorted(r for r in set(xs["base"]) & set(xs["other"]) if r is not None)
        if len(both) >= MIN_PAIRS:
            diffs = [xs["other"][r] - xs["base"][r] for r in both]
            return statistics.fmean(diffs), _t_p(diffs)
        a, b = list(xs["base"].values()), list(xs["other"].values())
        if len(a) < 2 or len(b) < 2:
            return 0.0, None
        return statistics.fmean(b) - statistics.fmean(a), stats.welch_p(a, b)


def _t_p(diffs: list[float]) -> float:
    mean, sd = statistics.fmean(diffs), statistics.stdev(diffs)
    if sd == 0:
        return 0.0 if mean else 1.0
    return stats.t_two_sided_p(mean / (sd / math.sqrt(len(diffs))), len(diffs) - 1)


def calibrated_slope(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """The host-speed slope a run was planned with (meta `calibration.host_speed`: a calibration
    of this host and workload that measured it, cli/calibrated.py), or None."""
    found = ((meta or {}).get("calibration") or {}).get("host_speed")
    return found if isinstance(found, dict) and isinstance(found.get("slope"), (int, float)) else None


def fit(
    cells: list[dict[str, Any]], metric: str = "qps", calibrated: dict[str, Any] | None = None
) -> Adjustment | None:
    """The run's slope over its settled cells that have a canary figure; None with fewer than
    MIN_CELLS of them or no spread of speed within the groups. With `calibrated` (a slope
    measured in advance, `calibrated_slope`) and metric qps, that slope, fixed: any slope fixed
    before the data keeps the paired test exact when the variant does not move the canary, and
    none is fitted on the rounds it adjusts (methodology.md#host-speed)."""
    groups: dict[tuple[str, int], list[tuple[int, float, float]]] = {}
    speeds = {}
    weighed = weights(calibrated) if metric == "qps" else (0.0, 0.0)
    for cell in cells:
        x, y = log_speed(cell, *weighed), metric_value(cell, metric)
        if not usable_cell(cell) or x is None or y is None or y <= 0:
            continue
        speeds[cell["id"]] = x
        groups.setdefault((variant_key(cell["variant"]), cell["threads"]), []).append((cell["id"], x, math.log(y)))
    if calibrated is not None and metric == "qps" and speeds:
        return Adjustment(
            metric,
            float(calibrated["slope"]),
            calibrated.get("r"),
            len(speeds),
            statistics.fmean(speeds.values()),
            speeds,
            calibrated,
        )
    dx, dy = [], []
    for members in groups.values():
        if len(members) < 2:
            continue
        mx, my = statistics.fmean(m[1] for m in members), statistics.fmean(m[2] for m in members)
        dx += [x - mx for _, x, _ in members]
        dy += [y - my for _, _, y in members]
    sxx = math.fsum(x * x for x in dx)
    if len(dx) < MIN_CELLS or sxx <= 0:
        return None
    sxy, syy = math.fsum(x * y for x, y in zip(dx, dy)), math.fsum(y * y for y in dy)
    r = sxy / math.sqrt(sxx * syy) if syy > 0 else 0.0
    return Adjustment(metric, sxy / sxx, r, len(dx), statistics.fmean(speeds.values()), speeds)


def decide(
    adjustment: Adjustment | None, base: list[dict[str, Any]], other: list[dict[str, Any]]
) -> tuple[Adjustment | None, str | None]:
    """Whether one comparison (its two sides' settled cells) is adjusted, and what it says:
    (the adjustment, its description) or (None, why not); (None, None) without a canary."""
    if adjustment is None:
        if any(log_speed(c) is not None for c in (*base, *other)):
            return None, f"not adjusted for host speed: fewer than {MIN_CELLS} settled cells with a canary figure"
        return None, None
    missing = sum(1 for c in (*base, *other) if adjustment.factor(c) is None)
    if missing:
        return None, f"not adjusted for host speed: {missing} cell(s) without a canary figure"
    diff, p = adjustment.balance(base, other)
    if p is not None and p < BALANCE_P:
        return None, (
            f"not adjusted for host speed: the canary{' with the steal' if weights(adjustment.calibrated)[1] else ''} "
            f"ran {abs(math.exp(diff) - 1):.1%} "
            f"{'faster' if diff > 0 else 'slower'} beside the variant than beside the baseline (p = {p:.2g}); "
            "the variant itself may change the vCPU's speed"
        )
    return adjustment, adjustment.describe()


def paired(
    base: list[dict[str, Any]], other: list[dict[str, Any]], metric: str, level: float = stats.LEVEL
) -> tuple[ratio.Estimate, float] | None:
    """The paired estimate adjusted within rounds: the per-round log-ratios d_r regressed on the
    per-round differences in log speed c_r (d = delta + slope * c + e, least squares over the
    rounds that hold both sides); delta, the log-ratio at equal host speed, with its
    heteroscedasticity-consistent (HC3) standard error on n - 2 degrees of freedom, and the
    slope. HC3, not the OLS formula: on this VM most rounds' c is ~0 and a few slow-host rounds
    carry the slope with residuals of their own; resampled A/A experiments called 12% of
    identical pairs different with the OLS error, 9-11% with HC3 (6% unadjusted; bench/fidelity.py).
    None below MIN_PAIRS such rounds, or when the rounds' speed differences do not vary."""
    sides = [{c.get("repeat"): c for c in cells} for cells in (base, other)]
    rounds = sorted(r for r in set(sides[0]) & set(sides[1]) if r is not None)
    d: list[float] = []
    c: list[float] = []
    values: tuple[list[float], list[float]] = ([], [])
    for r in rounds:
        (b, o) = (sides[0][r], sides[1][r])
        yb, yo, xb, xo = metric_value(b, metric), metric_value(o, metric), log_speed(b), log_speed(o)
        if yb and yo and yb > 0 and yo > 0 and xb is not None and xo is not None:
            d.append(math.log(yo / yb))
            c.append(xo - xb)
            values[0].append(yb)
            values[1].append(yo)
    n = len(d)
    if n < max(MIN_PAIRS, 3):  # an intercept and a slope: 3 rounds for one degree of freedom
        return None
    found = regress(np.array(d), np.array(c))
    if found is None:
        return None
    delta, se2, slope = found
    res = ratio.resolution_of(metric)  # a rounded metric's residuals can all be 0: its rounding is the floor
    per_round = max(se2 * n, res.log_variance(values[0]) + res.log_variance(values[1]))
    return ratio.Estimate(ratio.PAIRED, math.exp(delta), n, delta, ((per_round, n),), level, lost=1), slope


def regress(d: np.ndarray, c: np.ndarray, hc3: bool = True) -> tuple[float, float, float] | None:
    """d = delta + slope * c + e by least squares: (delta, its variance, slope); the variance
    HC3 (a high-leverage round counts in full) or, hc3=False, the OLS formula on n - 2 degrees of
    freedom. None when c does not vary."""
    x = np.column_stack([np.ones(len(d)), c])
    xtx = x.T @ x
    if np.linalg.cond(xtx) > 1e12:  # the rounds' speed differences do not vary
        return None
    inverse = np.linalg.inv(xtx)
    beta = inverse @ x.T @ d
    residual = d - x @ beta
    if hc3:
        leverage = np.einsum("ij,jk,ik->i", x, inverse, x)
        weights = residual**2 / np.maximum(1 - leverage, 1e-6) ** 2
        se2 = float((inverse @ (x.T * weights) @ x @ inverse)[0, 0])
    else:
        se2 = float(residual @ residual / (len(d) - 2) * inverse[0, 0])
    return float(beta[0]), se2, float(beta[1])


@dataclass(frozen=True)
class Estimated:
    """One comparison's estimates: `chosen` (the verdict's), `welch` (beside it), why, and the
    unadjusted `plain` one with whether the adjustment was used and what it says."""

    chosen: ratio.Estimate
    welch: ratio.Estimate
    why: str
    plain: ratio.Estimate
    adjusted: bool = False
    note: str | None = None


def estimate(
    base: summary.Group, other: summary.Group, metric: str, fit_: Adjustment | None, level: float = stats.LEVEL
) -> Estimated:
    """The estimate of `other` against `base` in one run: paired (within rounds) or Welch, as
    analyze/ratio.py chooses; with a host-speed fit that the comparison allows (`decide`),
    adjusted: paired by `paired` (the slope within this comparison's rounds), else Welch on
    the values brought to the run's mean speed by the run's slope."""
    res = ratio.resolution_of(metric)
    chosen, welch, why = ratio.estimate(summary.rounds(base, metric), summary.rounds(other, metric), level, res)
    used, note = decide(fit_, base.cells, other.cells)
    if used is None:
        return Estimated(chosen, welch, why, chosen, False, note)
    scaled = (summary.rounds(base, metric, used.factor), summary.rounds(other, metric, used.factor))
    adjusted_chosen, adjusted_welch, adjusted_why = ratio.estimate(*scaled, level, res)
    if used.calibrated is not None:  # d_r - slope c_r per round: the paired t of analyze/ratio.py
        return Estimated(adjusted_chosen, adjusted_welch, adjusted_why, chosen, True, note)
    found = paired(base.cells, other.cells, metric, level)
    if found is not None:
        within, slope = found
        return Estimated(
            within,
            adjusted_welch,
            f"paired: within the {within.n} rounds that hold both",
            chosen,
            True,
            f"host speed: slope {slope:.2f} within {within.n} rounds",
        )
    return Estimated(adjusted_chosen, adjusted_welch, adjusted_why, chosen, True, note)
