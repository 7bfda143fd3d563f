"""History on a machine that drifts: the nightly gate with and without an in-run reference.

What (issue 51): nightly histories of one configuration on a machine whose speed moves from night
to night, with a step of 5% or 20% at a known run, judged by `perflab history --fail-on` as a
nightly job would (perflab/history/gate.py, night by night), two ways:
  - absolute: the configuration alone; each run's estimate carries the machine's level of that
    night (the drift) and its repeats' noise;
  - reference: a pinned reference beside it in the same run, interleaved; the history follows
    the ratio of the two (history/series.py's ratio series), whose interval the run measured from
    its paired rounds; the drift falls on both sides and cancels, up to what the ratio itself
    varies by from run to run.
Printed, per way and step:
  - detection delay: runs from the step (1: the step's own run) until the gate first exits 4,
    median over histories, and the share found within 4 runs;
  - false alarms per 100 A/A runs: nights whose gate exits 4 on histories with no step.
Change points are counted too (delay until one within 3 runs of the step is reported).

The noise model: the machine's level is an AR(1) on log QPS (sd DRIFT_SD, lag-1 correlation
DRIFT_RHO: a host that stays at a level for a few nights), a run's repeats vary by WITHIN_CV
around it; a ratio's rounds vary by PAIR_CV (what the paired log-ratio of one round varies by) and
runs' ratios by RATIO_TAU beyond that. With results directories as arguments (real runs of one
experiment with a baseline beside a variant, e.g. examples/nightly.toml's, in run order) every
parameter is estimated from them instead (`from_runs`); the figures then are those of that
machine. Defaults: the issue's VM (absolute QPS 13.7% apart from run to run), 3 rounds a run.

Pure simulation once the parameters are known: seeded, CPU only. Do not run it beside measuring
benchmarks; it starts no server.

Run: nice -n 19 python3 bench/history_drift.py [RESULTS_DIR ...]            # ~4 minutes
     nice -n 19 python3 bench/history_drift.py DIR... --drift-sd 0.137 --drift-rho 0.5   # the runs' ratio
                                                 # noise, a drift measured over nights
     nice -n 19 python3 bench/history_drift.py --histories 3 --smoke          # a smoke test, seconds
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from _common import BenchError, final_json, main_guard, say, table, upper

from perflab.analyze.gate import parse
from perflab.history import gate, record
from perflab.history.index import StoredRun
from perflab.history.series import RATIO, Series

STEPS = (0.05, 0.20)
NEAR, WITHIN = 3, 4  # a change point within NEAR runs of the step finds it; the goal: found within WITHIN runs


@dataclass(frozen=True)
class Noise:
    drift_sd: float = 0.137  # the machine's level, sd of log QPS over nights (issue 51: 13.7%)
    drift_rho: float = 0.5  # its lag-1 correlation: a level persists a few nights
    within_cv: float = 0.04  # a run's repeats around its level
    pair_cv: float = 0.03  # one round's paired log-ratio (drift within the run left in it)
    ratio_tau: float = 0.01  # runs' ratios beyond their own interval (a fresh dataset copy each night)
    rounds: int = 3


def from_runs(directories: list[Path]) -> Noise:
    """The noise model's parameters from real runs (oldest first) that each measured a baseline
    beside a variant: the baseline's absolute estimates give the drift and the repeats' CV; the
    variant's ratios, their per-round CV (from se) and what they vary by beyond it."""
    runs = [record.read(d) for d in directories]
    usable = [r for r in runs if r.ratios]
    if len(usable) < 3:
        raise BenchError(f"{len(usable)} of {len(runs)} runs hold a ratio to a baseline: at least 3 needed")
    base = [_baseline_estimate(r) for r in usable]
    logs = np.log([b.mean for b in base])
    ratios = [next(q for q in r.ratios if q.metric == "qps") for r in usable]
    log_ratios = np.log([q.mean for q in ratios])
    pair_cv = statistics.median(q.se * math.sqrt(q.n) for q in ratios if q.se)
    spread = float(np.var(log_ratios, ddof=1)) - statistics.median(q.se**2 for q in ratios if q.se)
    return Noise(
        drift_sd=float(np.std(logs, ddof=1)),
        drift_rho=float(np.clip(np.corrcoef(logs[:-1], logs[1:])[0, 1], 0.0, 0.95)) if len(logs) > 3 else 0.5,
        within_cv=statistics.median(float(np.std(b.values, ddof=1) / b.mean) for b in base if len(b.values) > 1),
        pair_cv=pair_cv,
        ratio_tau=math.sqrt(max(spread, 0.0)),
        rounds=round(statistics.median(q.n for q in ratios)),
    )


def _baseline_estimate(run: record.RunRecord) -> record.Estimate:
    baseline = run.ratios[0].baseline
    return next(e for e in run.estimates if e.metric == "qps" and e.variant == baseline)


# ----------------------------------------------------------------------------- histories


def drift(noise: Noise, runs: int, rng: np.random.Generator) -> np.ndarray:
    """The machine's log level, night by night: AR(1) with sd drift_sd and lag-1 correlation rho."""
    out = np.empty(runs)
    out[0] = rng.normal(0, noise.drift_sd)
    shock = noise.drift_sd * math.sqrt(1 - noise.drift_rho**2)
    for i in range(1, runs):
        out[i] = noise.drift_rho * out[i - 1] + rng.normal(0, shock)
    return out


def absolute_series(noise: Noise, levels: np.ndarray, rng: np.random.Generator) -> Series:
    """The configuration alone: each run's repeats around 100,000 x its level x the machine's."""
    s = Series("k", "w", {"config": "tonight"}, 2, "qps")
    for i, level in enumerate(levels * np.exp(drift(noise, len(levels), rng))):
        values = [float(v) for v in 100_000 * level * np.exp(rng.normal(0, noise.within_cv, noise.rounds))]
        _append(s, i, record.Estimate(s.variant, 2, "qps", float(np.mean(values)), None, None, len(values), values))
    return s


def ratio_series(noise: Noise, levels: np.ndarray, rng: np.random.Generator) -> Series:
    """Tonight's ratio to the reference run beside it: its rounds' log-ratios, their mean and se."""
    s = Series("k", "w", {"config": "tonight"}, 2, "qps", kind=RATIO, baseline={"config": "reference"})
    for i, level in enumerate(levels):
        per_round = math.log(level) + rng.normal(0, noise.ratio_tau) + rng.normal(0, noise.pair_cv, noise.rounds)
        se = float(np.std(per_round, ddof=1) / math.sqrt(noise.rounds))
        ratio = record.Ratio(s.variant, s.baseline, 2, "qps", math.exp(float(np.mean(per_round))), None, None,
                             noise.rounds, "paired", se, noise.rounds - 1.0)  # fmt: skip
        _append(s, i, ratio)
    return s


def _append(s: Series, i: int, estimate: object) -> None:
    run = record.RunRecord("drift", "k", {}, f"night-{i:04d}", None, f"/n{i}", "complete", {}, [])
    s.runs.append(StoredRun(i, run))
    s.estimates.append(estimate)


def prefix(s: Series, k: int) -> Series:
    """The series as the nightly job saw it after run k (its first k runs), analysed."""
    cut = replace(s, runs=s.runs[:k], estimates=s.estimates[:k], analysis=None)
    cut.analysis = cut.detect(cut.points())
    return cut


# ----------------------------------------------------------------------------- measures


def delays(s: Series, step_at: int, horizon: int, threshold: str) -> tuple[int | None, int | None]:
    """(runs from the step until the gate first fails, until a change point within NEAR runs of
    the step is reported); 1 is the step's own run; None: not within `horizon` runs."""
    gated = found = None
    for night in range(1, horizon + 1):
        cut = prefix(s, step_at + night)
        if gated is None and gate.fails(gate.check([cut], parse(threshold))[0], parse(threshold)):
            gated = night
        if found is None and any(abs(c.index - step_at) <= NEAR for c in cut.analysis.change_points):
            found = night
        if gated is not None and found is not None:
            break
    return gated, found


def false_alarms(s: Series, start: int, threshold: str) -> tuple[int, int]:
    """(nights whose gate fails, nights asked) on a history without a step, from run `start` on."""
    nights = range(start, len(s.runs) + 1)
    failed = sum(gate.fails(gate.check([prefix(s, k)], parse(threshold))[0], parse(threshold)) for k in nights)
    return failed, len(nights)


@dataclass
class Figures:
    way: str
    step: float | None
    histories: int
    gate_delay_median: float | None = None
    gate_within: float | None = None
    change_delay_median: float | None = None
    false_per_100: float | None = None
    false_per_100_upper: float | None = None


def measure(way: str, noise: Noise, args: argparse.Namespace) -> list[Figures]:
    make = absolute_series if way == "absolute" else ratio_series
    out = []
    for step in STEPS:
        gated, found = [], []
        for h in range(args.histories):
            rng = np.random.default_rng([args.seed, h, int(step * 1000)])
            levels = np.array([1.0] * args.before + [1 - step] * args.horizon)
            g, f = delays(make(noise, levels, rng), args.before, args.horizon, args.threshold)
            gated.append(g)
            found.append(f)
        out.append(_delay_figures(way, step, gated, found))
    failed = asked = 0
    for h in range(args.histories):
        rng = np.random.default_rng([args.seed, h, 0])
        f, n = false_alarms(make(noise, np.ones(args.aa_runs), rng), args.before, args.threshold)
        failed, asked = failed + f, asked + n
    out.append(Figures(way, None, args.histories, false_per_100=100 * failed / asked,
                       false_per_100_upper=100 * upper(failed, asked)))  # fmt: skip
    return out


def _delay_figures(way: str, step: float, gated: list, found: list) -> Figures:
    def median(xs: list) -> float | None:  # a history not found within the horizon counts as beyond it
        return float(np.median([math.inf if x is None else x for x in xs])) if xs else None

    within = sum(1 for g in gated if g is not None and g <= WITHIN) / len(gated)
    return Figures(way, step, len(gated), median(gated), within, median(found))


# ----------------------------------------------------------------------------- main


def options() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", type=Path, help="results directories of real runs, oldest first: the noise")
    p.add_argument("--histories", type=int, default=100, help="histories per way and step")
    p.add_argument("--before", type=int, default=10, help="stable runs before the step (before A/A nights are asked)")
    p.add_argument("--horizon", type=int, default=10, help="runs after the step a history is followed for")
    p.add_argument("--aa-runs", type=int, default=40, help="runs of an A/A history")
    p.add_argument("--threshold", default="slower:3%", help="the gate's --fail-on")
    p.add_argument("--seed", type=int, default=51)
    p.add_argument("--smoke", action="store_true", help="tiny histories (before 6, horizon 4, 10 A/A runs)")
    # runs made one after another hold the machine's drift within an hour, not from night to night: keep
    # a drift measured over nights (the issue's 13.7%) beside the ratios' noise the runs measured
    p.add_argument("--drift-sd", type=float, help="the machine's night-to-night sd of log QPS (overrides the runs')")
    p.add_argument("--drift-rho", type=float, help="its lag-1 correlation (overrides the runs')")
    args = p.parse_args()
    if args.smoke:
        args.before, args.horizon, args.aa_runs = 6, 4, 10
    return args


def run() -> None:
    args = options()
    noise = from_runs(args.runs) if args.runs else Noise()
    source = f"from {len(args.runs)} runs" if args.runs else "defaults: the issue 51 VM"
    if args.drift_sd is not None or args.drift_rho is not None:
        given = {"drift_sd": args.drift_sd, "drift_rho": args.drift_rho}
        noise = replace(noise, **{k: v for k, v in given.items() if v is not None})
        source += f"; drift given: {', '.join(f'{k} {v}' for k, v in given.items() if v is not None)}"
    say(f"noise model ({source}): {asdict(noise)}")
    figures = [f for way in ("absolute", "reference") for f in measure(way, noise, args)]
    rows = [
        [f.way, "A/A" if f.step is None else f"{f.step:.0%}", f.histories,
         _num(f.gate_delay_median), "-" if f.gate_within is None else f"{f.gate_within:.0%}",
         _num(f.change_delay_median), _num(f.false_per_100), _num(f.false_per_100_upper)]
        for f in figures
    ]  # fmt: skip
    say(table(["way", "step", "histories", "gate delay (median runs)", f"gate within {WITHIN}",
               "change point delay (median)", "false alarms / 100 runs", "upper 95%"], rows))  # fmt: skip
    # a median beyond the horizon (most histories not found) is null in the JSON, "never" in the table
    found = [{k: None if isinstance(v, float) and math.isinf(v) else v for k, v in asdict(f).items()} for f in figures]
    final_json({"noise": asdict(noise), "threshold": args.threshold, "horizon": args.horizon, "figures": found})


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return "never" if math.isinf(value) else f"{value:.2f}".rstrip("0").rstrip(".")


if __name__ == "__main__":
    main_guard(run)
