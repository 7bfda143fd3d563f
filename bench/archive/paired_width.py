"""Paired vs unpaired: how much narrower the ratio's interval is within rounds, by simulation.

What: experiments of randomized blocks (every round runs each variant once, in random order)
on a simulated machine whose QPS drifts (tests/unit/drift.py: restart noise per cell, a slow
wander shared by every cell), analysed both ways perflab can: paired (the mean of the
per-round log-ratios, t over rounds) and Welch (the ratio of the means, delta method). Per
case: the median ratio of the paired interval's width to Welch's on the same data, the
coverage of the true ratio (a 3% slowdown) by each, the false faster/slower rate of identical
variants (A/A, one comparison alone: no Holm), and the power for the 3% slowdown (one
comparison alone). Plus, per machine, the CV of five consecutive cells of one variant (what
bench/noise.py measures on the real machine: 1.3% in one run and 3.8% in the next, issue 12)
and the median wander over 30 minutes (max/min - 1 of the drift alone).
How: the real code (perflab.analyze.ratio.estimate, verdict.judge) on every simulated
experiment. Seeded: the same figures on every run. CPU only: no server, no sysbench.

Run: python3 bench/archive/paired_width.py           # the figures docs/methodology.md quotes (~2 minutes)
     python3 bench/archive/paired_width.py --quick   # smoke test (~15 s)
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: _common and the scripts imported below
import _common as C
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perflab.analyze import verdict
from perflab.analyze.ratio import estimate
from tests.unit.drift import Machine, by_round, simulate

SEED = 20261122
SLOWDOWN = float(np.log(0.97))
MACHINES = [Machine(restart_cv=r, drift_sd=d) for r in (0.01, 0.02) for d in (0.0, 0.015, 0.03, 0.05)]
VARIANTS = (2, 4)  # baseline included
ROUNDS = (3, 5, 10)


def pairs(values: np.ndarray) -> list[tuple[Any, Any]]:
    """(paired, welch) estimates of every variant of every trial against its baseline."""
    out = []
    for trial in values:
        base = by_round(trial[0])
        for row in trial[1:]:
            chosen, welch, _ = estimate(base, by_round(row))
            out.append((chosen, welch))
    return out


def rates(found: list[tuple[Any, Any]], truth: float) -> dict[str, float]:
    """Coverage of `truth` and the share of comparisons called slower / faster-or-slower, per method."""
    out = {}
    for i, method in enumerate(("paired", "welch")):
        ests = [pair[i] for pair in found]
        verdicts = [verdict.judge([e], True)[0].verdict for e in ests]
        out[f"{method}_covered"] = float(np.mean([e.low <= np.exp(truth) <= e.high for e in ests]))
        out[f"{method}_slower"] = verdicts.count(verdict.SLOWER) / len(ests)
        out[f"{method}_called"] = (verdicts.count(verdict.SLOWER) + verdicts.count(verdict.FASTER)) / len(ests)
    return out


def case(rng: np.random.Generator, machine: Machine, variants: int, rounds: int, trials: int) -> dict[str, float]:
    effect = pairs(simulate(rng, machine, [0.0] + [SLOWDOWN] * (variants - 1), rounds, trials))
    null = pairs(simulate(rng, machine, [0.0] * variants, rounds, trials))
    width = np.median([np.log(p.high / p.low) / np.log(w.high / w.low) for p, w in effect])
    a, b = rates(effect, SLOWDOWN), rates(null, 0.0)
    return {
        "width_ratio": float(width),
        "paired_coverage": a["paired_covered"],
        "welch_coverage": a["welch_covered"],
        "paired_fp": b["paired_called"],
        "welch_fp": b["welch_called"],
        "paired_power": a["paired_slower"],
        "welch_power": a["welch_slower"],
    }


def calibration(rng: np.random.Generator, machine: Machine, trials: int) -> tuple[float, float, float, float]:
    """CV of 5 consecutive cells of one variant (median, 10th, 90th percentile); the drift's
    median wander over 30 minutes (max/min - 1, restart noise left out)."""
    five = simulate(rng, machine, [0.0], 5, trials)[:, 0, :]
    cv = five.std(1, ddof=1) / five.mean(1)
    calm = Machine(0.0, machine.drift_sd, machine.drift_minutes, machine.cell_seconds)
    half_hour = simulate(rng, calm, [0.0], int(1800 / machine.cell_seconds), min(trials, 2000))[:, 0, :]
    wander = float(np.median(half_hour.max(1) / half_hour.min(1) - 1))
    p10, p50, p90 = np.percentile(cv, [10, 50, 90])
    return float(p50), float(p10), float(p90), wander


def label(m: Machine) -> str:
    return f"restart {m.restart_cv:.1%}, drift {m.drift_sd:.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials: a smoke test, not the quoted figures")
    args = parser.parse_args()
    trials = 200 if args.quick else 2000
    rng = np.random.default_rng(SEED)
    C.say(f"## Machines (drift correlation time 5 min, one cell every 33 s; {trials} trials)\n")
    rows, result = [], {"seed": SEED, "trials": trials, "machines": [], "cases": []}
    for m in MACHINES:
        p50, p10, p90, wander = calibration(rng, m, trials * 5)
        rows.append([label(m), C.pct(p50, 1), f"{C.pct(p10, 1)} - {C.pct(p90, 1)}", C.pct(wander, 1)])
        result["machines"].append({"machine": label(m), "cv5_median": p50, "cv5_p10": p10, "cv5_p90": p90,
                                   "wander_30min": wander})  # fmt: skip
    C.say(C.table(["machine", "CV of 5 cells", "10-90%", "30-min wander"], rows) + "\n")
    C.say("## Paired vs Welch on the same experiments (3% slowdown; A/A for false positives)\n")
    rows = []
    for m in MACHINES:
        for variants in VARIANTS:
            for rounds in ROUNDS:
                r = case(rng, m, variants, rounds, trials)
                result["cases"].append({"machine": label(m), "variants": variants, "rounds": rounds, **r})
                rows.append([label(m), variants, rounds, f"{r['width_ratio']:.2f}",
                             f"{C.pct(r['paired_coverage'], 1)} / {C.pct(r['welch_coverage'], 1)}",
                             f"{C.pct(r['paired_fp'], 1)} / {C.pct(r['welch_fp'], 1)}",
                             f"{C.pct(r['paired_power'], 0)} / {C.pct(r['welch_power'], 0)}"])  # fmt: skip
    headers = ["machine", "variants", "rounds", "width paired/welch", "coverage p/w", "A/A false p/w", "power 3% p/w"]
    C.say(C.table(headers, rows))
    C.final_json(result)


if __name__ == "__main__":
    C.main_guard(main)
