"""Where an experiment's noise comes from: QPS variance split into the window, restarts and drift.

Input: the cells of one results directory as summary.load gives them (settled ok cells with
`summary.qps`, `variant`, `threads`, `repeat`, `window_start_s`) and each cell's per-second
rows (the store's `seconds` table: Results.intervals). Output: a Decomposition of the
variance of a cell's log QPS (log scale: a variance of 0.0001 is a 1% standard deviation)
into three components, and what each contributes to the variance of a ratio:

  window    second-to-second noise inside the measured window: the variance of the window's
            mean of log QPS, allowing for the autocorrelation of the per-second series by an
            effective sample size (AR(1)): var(mean) = s^2 tau / n, s^2 the per-second variance
            inside a cell, tau = (1 + rho) / (1 - rho) with rho the lag-1 autocorrelation. Both
            are pooled over the cells (a 10-second window alone gives no usable rho), and rho
            gets the small-sample correction of a demeaned series, + (1 + 4 rho) / n
            (Marriott and Pope), clamped to [-0.5, 0.9]. `per_second` = s^2 tau, so a window of L
            seconds has a variance of about per_second / L (perflab calibrate trades it
            against the cost of a restart). Batch means, which the per-cell `steady` CI uses,
            are not used here: a 10-20 s window gives batches of 1-2 s, which miss the
            autocorrelation.
  restarts  a fresh server per cell: what differs between repeats of the same (variant,
            threads) beyond the window's noise and beyond what the round shares.
  drift     the machine's slow wander across the session: the round effect, shared by every
            cell of a round.

  An interleaved cell (design = "interleaved": the cells of a group take turns through the
  same seconds of host speed) counts only its own noise: each second less its group's mean at
  that second (own_windows). Its raw seconds would count the host's swings, which every cell
  of the group shares and a ratio cancels.

The model is a randomized-block ANOVA on log QPS, per thread count, over the rounds that hold
a settled cell of every variant: y(v, r) = mu + variant(v) + round(r) + e(v, r). Its residual
mean square estimates var(e) = window + restarts; the round mean square estimates var(e) +
k x drift (k variants a round), so drift = (MS_round - MS_residual) / k and restarts =
MS_residual - window (each at least 0). Sums of squares and degrees of freedom are pooled over
thread counts. With one variant there is no residual: restarts and drift cannot be told apart
(`drift` is None and `restarts` holds both).

Fractions: a paired ratio (analyze/ratio.py) is the difference of two cells of one round, so
drift cancels and its variance is 2 (window + restarts); `fraction` is each component's share
of that. An unpaired (Welch) ratio counts drift too: `fraction_unpaired` is the share of
window + restarts + drift.

    decompose(cells).to_dict()["components"][0]
      -> {"name": "window", "variance": 2.1e-05, "sd": 0.0046, "fraction": 0.31, ...}
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from perflab.variants import variant_key

WINDOW, RESTARTS, DRIFT = "window", "restarts", "drift"
MIN_ROUNDS = 3  # complete rounds below which the components are not separated
MAX_RHO = 0.9  # beyond it tau (19) rests on a few seconds of a short window
# below it no AR(1) or MA(1) series lies (an MA(1)'s lag-1 is at least -0.5): tau 1/3. Negative, not 0: an
# interleaved cell's own seconds (each less its group's mean) had -0.03 to -0.45 (2026-11-26); clamped at 0,
# their window's variance was overstated by up to 1 / tau = 2.6 times
MIN_RHO = -0.5
DOMINATES = 0.5  # a component holding this share of a ratio's variance sets the advice


@dataclass(frozen=True)
class Component:
    name: str
    variance: float | None  # of a cell's log QPS (window: of the window's mean)
    fraction: float | None  # share of a paired ratio's variance (drift: 0, it cancels)
    fraction_unpaired: float | None  # share of an unpaired ratio's variance

    @property
    def sd(self) -> float | None:
        return None if self.variance is None else math.sqrt(self.variance)


@dataclass(frozen=True)
class Anova:
    """Pooled randomized-block sums of squares on log QPS."""

    ss_round: float = 0.0
    df_round: int = 0
    ss_residual: float = 0.0
    df_residual: int = 0
    k_weighted: float = 0.0  # sum of k x df_round, for the mean k over thread counts
    rounds: int = 0  # complete rounds, summed over thread counts
    groups: int = 0  # (variant, threads) groups in complete rounds

    def plus(self, other: Anova) -> Anova:
        return Anova(*(a + b for a, b in zip(self.astuple(), other.astuple(), strict=True)))

    def astuple(self) -> tuple:
        return (
            self.ss_round,
            self.df_round,
            self.ss_residual,
            self.df_residual,
            self.k_weighted,
            self.rounds,
            self.groups,
        )

    @property
    def ms_round(self) -> float | None:
        return self.ss_round / self.df_round if self.df_round else None

    @property
    def ms_residual(self) -> float | None:
        return self.ss_residual / self.df_residual if self.df_residual else None

    @property
    def k(self) -> float:
        return self.k_weighted / self.df_round if self.df_round else 0.0


@dataclass(frozen=True)
class Decomposition:
    components: list[Component]
    per_second: float | None  # window variance x window seconds: a window of L s has per_second / L
    window_s: float | None  # mean measured seconds per cell
    cells: int  # settled cells with a window variance
    rounds: int  # complete rounds (summed over thread counts)
    groups: int
    rho: float | None = None  # pooled lag-1 autocorrelation of per-second log QPS (corrected)
    method: str = "randomized-block ANOVA on log QPS; window: AR(1) effective sample size"
    advice: str = ""
    anova: Anova = field(default_factory=Anova, repr=False)

    def component(self, name: str) -> Component:
        return next(c for c in self.components if c.name == name)

    @property
    def empty(self) -> bool:
        """Restarts not separated from the window (too few complete rounds, no settled window):
        the reports leave their table out (the export keeps what there is), and the run's
        other warnings already say to run more repeats."""
        return self.component(RESTARTS).variance is None or self.component(WINDOW).variance is None

    @property
    def paired_variance(self) -> float | None:
        """Variance of one round's log-ratio of two variants: 2 (window + restarts)."""
        w, r = self.component(WINDOW).variance, self.component(RESTARTS).variance
        return None if w is None or r is None else 2 * (w + r)

    def to_dict(self) -> dict[str, Any]:
        return {
            "components": [
                {
                    "name": c.name,
                    "variance": c.variance,
                    "sd": c.sd,
                    "fraction": c.fraction,
                    "fraction_unpaired": c.fraction_unpaired,
                }
                for c in self.components
            ],
            "per_second_variance": self.per_second,
            "lag1_autocorrelation": self.rho,
            "window_s": self.window_s,
            "cells": self.cells,
            "rounds": self.rounds,
            "groups": self.groups,
            "paired_ratio_variance": self.paired_variance,
            "ms_round": self.anova.ms_round,
            "ms_residual": self.anova.ms_residual,
            "df_round": self.anova.df_round,
            "df_residual": self.anova.df_residual,
            "method": self.method,
            "advice": self.advice,
        }


def decompose(cells: list[dict[str, Any]], series: dict[int, list[dict[str, Any]]]) -> Decomposition:
    """The components of one results directory's settled cells (module docstring); `series`:
    cell id -> its per-second rows."""
    settled = [c for c in cells if _settled(c)]
    interleaved = [c for c in settled if _group(c)]
    windows = [w for w in (window_logs(c, series.get(c["id"]) or []) for c in settled if not _group(c)) if len(w) >= 2]
    windows += [w for w in own_windows(interleaved, series) if len(w) >= 2]
    per_second, rho = autocorrelated_variance(windows)
    window = statistics.fmean(per_second / len(w) for w in windows) if per_second is not None else None
    window_s = statistics.fmean(len(w) for w in windows) if windows else None
    anova = Anova()
    for threads in sorted({c["threads"] for c in settled}):
        anova = anova.plus(block_anova([c for c in settled if c["threads"] == threads]))
    restarts, drift = _between(anova, window)
    components = _fractions(window, restarts, drift)
    out = Decomposition(components, per_second, window_s, len(windows), anova.rounds, anova.groups, rho, anova=anova)
    method = out.method + ("; interleaved: each second less its group's mean" if interleaved else "")
    return dataclasses.replace(out, advice=advice(out), method=method)


def load(results: Any, cells: list[dict[str, Any]]) -> Decomposition:
    """decompose() of a results directory's cells, their per-second rows read from it."""
    return decompose(cells, {c["id"]: results.intervals(c["id"]) for c in cells if _settled(c)})


def window_logs(cell: dict[str, Any], rows: list[dict[str, Any]]) -> list[float]:
    """log QPS of each second of the cell's measured window."""
    start = cell.get("window_start_s") or 0.0
    ordered = sorted(rows, key=lambda iv: iv["t"])
    return [math.log(iv["qps"]) for iv in ordered if iv["t"] > start and (iv.get("qps") or 0) > 0]


def own_windows(cells: list[dict[str, Any]], series: dict[int, list[dict[str, Any]]]) -> list[list[float]]:
    """The windows of interleaved cells (design = "interleaved") without what their group
    shares: each second's log QPS less the mean of its group's cells at the same second of
    turns, times sqrt(k / (k - 1)) for k cells. The cells of a group take turns through the same
    seconds of host speed, so a change of speed moves them all and cancels in a ratio; the raw
    windows would count it as every cell's own noise (a pessimistic window, and restarts
    clamped at 0). Their lag-1 correlation was measured negative (-0.03 to -0.45, 2026-11-26):
    `autocorrelated_variance` keeps it (down to MIN_RHO), which shrinks their window's
    variance. A group with one settled cell has nothing to subtract: it is left out."""
    groups: dict[tuple[int, ...], list[tuple[dict[str, Any], dict[float, float]]]] = {}
    for cell in cells:
        start = cell.get("window_start_s") or 0.0
        logs = {
            iv["t"]: math.log(iv["qps"])
            for iv in series.get(cell["id"]) or []
            if iv["t"] > start and (iv.get("qps") or 0) > 0
        }
        groups.setdefault(_group(cell), []).append((cell, logs))
    out = []
    for members in groups.values():
        k = len(members)
        seconds = sorted(set.intersection(*(set(logs) for _, logs in members)))
        if k < 2 or not seconds:
            continue
        means = {t: statistics.fmean(logs[t] for _, logs in members) for t in seconds}
        scale = math.sqrt(k / (k - 1))
        out += [[(logs[t] - means[t]) * scale for t in seconds] for _, logs in members]
    return out


def _group(cell: dict[str, Any]) -> tuple[int, ...]:
    """The orders of the cells an interleaved cell ran beside (itself included); () otherwise."""
    design = cell.get("design") or {}
    return tuple(design.get("group") or ()) if design.get("name") == "interleaved" else ()


def autocorrelated_variance(windows: list[list[float]]) -> tuple[float | None, float | None]:
    """(s^2 tau, rho): the pooled per-second variance times the integrated autocorrelation
    time of an AR(1), and the pooled, bias-corrected lag-1 autocorrelation."""
    if not windows:
        return None, None
    centred = [[x - statistics.fmean(w) for x in w] for w in windows]
    ss = math.fsum(x * x for w in centred for x in w)
    df = sum(len(w) - 1 for w in centred)
    if ss == 0:
        return 0.0, 0.0
    lag1 = math.fsum(a * b for w in centred for a, b in itertools.pairwise(w)) / ss
    rho = min(MAX_RHO, max(MIN_RHO, lag1 + (1 + 4 * lag1) / statistics.fmean(len(w) for w in windows)))
    return ss / df * (1 + rho) / (1 - rho), rho


def block_anova(cells: list[dict[str, Any]]) -> Anova:
    """Sums of squares of one thread count's cells over its complete rounds."""
    table: dict[int, dict[str, float]] = {}
    for cell in cells:
        table.setdefault(cell["repeat"], {})[variant_key(cell["variant"])] = math.log(cell["summary"]["qps"])
    keys = {key for row in table.values() for key in row}
    rows = [[row[key] for key in sorted(keys)] for row in table.values() if set(row) == keys]
    r, k = len(rows), len(keys)
    if r < 2:
        return Anova()
    grand = statistics.fmean(y for row in rows for y in row)
    ss_total = math.fsum((y - grand) ** 2 for row in rows for y in row)
    ss_round = k * math.fsum((statistics.fmean(row) - grand) ** 2 for row in rows)
    ss_variant = r * math.fsum((statistics.fmean(col) - grand) ** 2 for col in zip(*rows, strict=True))
    ss_residual = max(0.0, ss_total - ss_round - ss_variant)
    return Anova(ss_round, r - 1, ss_residual, (k - 1) * (r - 1), k * (r - 1), r, k)


def _between(anova: Anova, window: float | None) -> tuple[float | None, float | None]:
    """(restarts, drift) from the pooled mean squares; drift None without a residual."""
    ms_round, ms_residual = anova.ms_round, anova.ms_residual
    if ms_round is None or anova.rounds < MIN_ROUNDS:
        return None, None
    if ms_residual is None:  # one variant: the round and the restart cannot be told apart
        return max(0.0, ms_round - (window or 0.0)), None
    return max(0.0, ms_residual - (window or 0.0)), max(0.0, (ms_round - ms_residual) / anova.k)


def _fractions(window: float | None, restarts: float | None, drift: float | None) -> list[Component]:
    values = {WINDOW: window, RESTARTS: restarts, DRIFT: drift}
    paired = _shares({WINDOW: window, RESTARTS: restarts})
    unpaired = _shares(values)
    return [
        Component(name, value, 0.0 if name == DRIFT and paired else paired.get(name), unpaired.get(name))
        for name, value in values.items()
    ]


def _shares(values: dict[str, float | None]) -> dict[str, float]:
    if any(v is None for v in values.values()):
        return {}
    total = math.fsum(v for v in values.values() if v is not None)
    return {name: (v or 0.0) / total for name, v in values.items()} if total > 0 else {}


def advice(dec: Decomposition) -> str:
    """One line: what would narrow the intervals most."""
    window, restarts, drift = (dec.component(n) for n in (WINDOW, RESTARTS, DRIFT))
    if window.variance is None:
        return (
            "no settled cell has two per-second reports in its window to measure the window's noise: "
            "run a longer duration"
        )
    if restarts.variance is None:
        return (
            f"too few complete rounds ({dec.rounds}) to separate the components: run at least {MIN_ROUNDS} rounds "
            "of every variant"
        )
    if drift.variance is None:
        return "one variant only: restarts and drift cannot be told apart (perflab calibrate runs an A/A pair)"
    if (drift.fraction_unpaired or 0) >= DOMINATES:
        return "the machine drifts: keep rounds short and pair (paired ratios cancel the drift)"
    if (window.fraction or 0) >= DOMINATES:
        return "second-to-second noise dominates: a longer window would help"
    return "a longer window would help little: restarts dominate; run more rounds"


def _settled(cell: dict[str, Any]) -> bool:
    qps = (cell.get("summary") or {}).get("qps")
    return cell.get("status") == "ok" and cell.get("settled") not in (False, 0) and qps is not None and qps > 0
