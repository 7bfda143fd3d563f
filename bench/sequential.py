"""Adaptive rounds that stop on a verdict (stop = "verdict"): false verdicts of identical
variants, and the time to a correct verdict on a 5% effect against a fixed 3 x 60 s protocol,
by simulation.

What: runs of randomized blocks on a simulated machine (tests/unit/seqsim.py: a level shared by
every cell of a round, 3-5%; a fresh server per cell, 1-4%; second-to-second noise averaged over
the window, 3% / sqrt(seconds); a small wander inside a round), driven exactly as the scheduler
drives them: every variant for min_repeats (3) rounds, then only the variants whose comparison
has no verdict yet (and the baseline), each round tested at the group-sequential boundaries of
perflab.analyze.sequential (O'Brien-Fleming-type alpha spending, TOST, Holm). Per case:
- A/A: identical variants (2 and 4 variants, up to 10 and 20 rounds of 10 s windows): the
  share of runs with a false `faster` or `slower` anywhere (family-wise), with its 95%
  Clopper-Pearson interval, the share that stopped on `equivalent`, the mean rounds;
- a 5% slowdown, 2 variants: the fixed protocol (3 rounds of 60 s windows, 10 s warm-up,
  judged by analyze/verdict.py; 438 s) against adaptive 10 s rounds: how often each calls it
  `slower`, the wall time of a run, and the expected time to a correct verdict (the run's
  mean time / its rate of correct verdicts: repeating a protocol until it calls the effect).
Seeded: the same figures on every run. CPU only: no server, no sysbench.

Run: python3 bench/sequential.py           # the figures docs/methodology.md quotes (~3 minutes)
     python3 bench/sequential.py --quick   # smoke test (~15 s)
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import _common as C
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perflab.analyze.sequential import Design
from tests.unit.rates import lower, upper
from tests.unit.seqsim import Noise, Protocol, fixed_run, simulate_run

SEED = 20261123
NOISES = [Noise(round_sd=d, restart_sd=r) for d in (0.03, 0.05) for r in (0.01, 0.02, 0.04)]
FIXED = Protocol(duration=60.0, warmup=10.0)
ADAPTIVE = Protocol(duration=10.0, warmup=10.0)


def label(n: Noise) -> str:
    return f"round {n.round_sd:.0%}, restart {n.restart_sd:.0%}"


def null_case(rng: np.random.Generator, noise: Noise, variants: int, rounds: int, trials: int) -> dict[str, Any]:
    false = equivalent = 0
    used = []
    for _ in range(trials):
        run = simulate_run(rng, noise, [0.0] * variants, Design(max_rounds=rounds), ADAPTIVE)
        false += any(t.verdict in ("faster", "slower") for t in run.tracks)
        equivalent += all(t.verdict == "equivalent" for t in run.tracks)
        used.append(run.rounds)
    return {"false": false / trials, "false_low": lower(false, trials, 0.975),
            "false_high": upper(false, trials, 0.975), "equivalent": equivalent / trials,
            "rounds": float(np.mean(used))}  # fmt: skip


def effect_case(rng: np.random.Generator, noise: Noise, rounds: int, trials: int) -> dict[str, Any]:
    effect = [0.0, math.log(0.95)]
    fixed = [fixed_run(rng, noise, effect, 3, FIXED) for _ in range(trials)]
    adaptive = [simulate_run(rng, noise, effect, Design(max_rounds=rounds), ADAPTIVE) for _ in range(trials)]
    out: dict[str, Any] = {}
    for name, runs in (("fixed", fixed), ("adaptive", adaptive)):
        right = sum(r.tracks[0].verdict == "slower" for r in runs) / trials
        seconds = float(np.mean([r.seconds for r in runs]))
        out[name] = {"correct": right, "wrong": sum(r.tracks[0].verdict == "faster" for r in runs) / trials,
                     "seconds": seconds, "to_correct_s": seconds / right if right else None}  # fmt: skip
    f, a = out["fixed"]["to_correct_s"], out["adaptive"]["to_correct_s"]
    out["time_ratio"] = a / f if a and f else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials: a smoke test, not the quoted figures")
    args = parser.parse_args()
    trials = 100 if args.quick else 1000
    rng = np.random.default_rng(SEED)
    result: dict[str, Any] = {"seed": SEED, "trials": trials, "null": [], "effect": []}
    C.say(f"## Identical variants (A/A), 10 s windows, {trials} runs a case\n")
    rows = []
    for noise in NOISES:
        for variants in (2, 4):
            for rounds in (10, 20):
                r = null_case(rng, noise, variants, rounds, trials)
                result["null"].append({"noise": label(noise), "variants": variants, "max_rounds": rounds, **r})
                false = f"{C.pct(r['false'], 1)} ({C.pct(r['false_low'], 1)} - {C.pct(r['false_high'], 1)})"
                rows.append([label(noise), variants, rounds, false, C.pct(r["equivalent"], 0), f"{r['rounds']:.1f}"])
    C.say(C.table(["noise", "variants", "max rounds", "false faster/slower", "all equivalent", "rounds"], rows) + "\n")
    C.say(f"## A 5% slowdown: fixed 3 x 60 s against adaptive 10 s rounds, {trials} runs a case\n")
    rows = []
    for noise in NOISES:
        for rounds in (10, 20):
            r = effect_case(rng, noise, rounds, trials)
            result["effect"].append({"noise": label(noise), "max_rounds": rounds, **r})
            f, a = r["fixed"], r["adaptive"]
            ratio = "-" if r["time_ratio"] is None else f"{r['time_ratio']:.2f}"
            rows.append([label(noise), rounds, C.pct(f["correct"], 0), f"{f['seconds']:.0f}",
                         C.pct(a["correct"], 0), f"{a['seconds']:.0f}", ratio])  # fmt: skip
    headers = ["noise", "max rounds", "fixed: slower", "fixed s", "adaptive: slower", "adaptive s", "time to correct"]
    C.say(C.table(headers, rows))
    C.say("\ntime to correct: adaptive / fixed, each its mean run time / its rate of correct verdicts")
    C.final_json(result)


if __name__ == "__main__":
    C.main_guard(main)
