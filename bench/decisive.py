"""Issue 32's figures from real interleaved runs: how decisive perflab's defaults are, and how often
they are wrong.

What: a kept results directory of `bench/fidelity.py --design interleaved --copies K --ns ...`
(identical servers `none`, `same`, `same2`, ... and calibrated slowdowns `slowN`, all in each
round, 100 ms turns). From its stored cells alone, with perflab's own code:
  1. paired fixed-sample verdicts of identical pairs at n = 2, 3, 4 and 5 rounds (analyze/ratio
     paired, analyze/verdict.judge, a family of one): the rounds cut into consecutive, disjoint
     blocks of n (every real block, nothing resampled) and, beside it, blocks resampled from the
     rounds with replacement (more experiments, all drawn from this run's rounds). A `faster` or
     `slower` is a false verdict;
  2. the default stopping rule (no `repeats`: rounds until a verdict, Pocock-type spending, at
     most the rounds a 10-minute budget holds for a two-variant experiment at this run's own time
     per cell, analyze/sequential.replay): its false verdicts on the identical pairs (resampled:
     centred; disjoint real: as they are), and for each
     slowdown the share called `slower`, the rounds and the wall time it took (a two-variant
     round: 2 x this run's time per cell), over experiments of resampled rounds and over the
     disjoint real ones (each starts where the last stopped);
  3. the warm-up rule on every ok cell (all run the same workload, so every unsettled cell is a
     false alarm): unsettled by its own series (the rule before 2026-11-27: the stored settled =
     false, or design.own_unsettled_reason where the group-relative check overruled it), and by
     the rule now (stored settled = false).
Each figure with other_cpu_cores of the cells it used. The identical pairs of one round share
cells (none-same and none-same2 share none's), so their verdicts are not independent; the
Clopper-Pearson bounds assume they are.

Run: python3 bench/decisive.py DIR [DIR...]   (analysis only; make DIR with bench/fidelity.py
     --design interleaved --copies 3 --ns 800,1800,4000 --duration 8 --warmup 3 --results DIR)
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from itertools import combinations
from pathlib import Path
from typing import Any

import _common as C
import fidelity as F

from perflab.analyze import ratio, sequential, verdict

BUDGET_S = 600.0  # [experiment] budget's default
RESAMPLES = 2000
SEED = 20261127


def label(cell: dict[str, Any]) -> str:
    return "/".join(str(v) for v in cell["variant"].values())


def by_round(cells: list[dict[str, Any]], name: str) -> dict[int, float]:
    """QPS of `name`'s usable cells by round (a retry in place of the cell it replaces)."""
    replaced = {c.get("retry_of") for c in cells} - {None}
    return {c["repeat"]: c["summary"]["qps"] for c in cells
            if label(c) == name and F._usable(c) and c["id"] not in replaced}  # fmt: skip


def fixed(base: dict[int, float], other: dict[int, float], rounds: list[int]) -> str:
    """The fixed-sample verdict of these rounds (paired where 2 hold both), a family of one."""
    est = ratio.estimate({r: base[r] for r in rounds}, {r: other[r] for r in rounds})[0]
    return verdict.judge([est], True)[0].verdict


def stopping(base: dict[int, float], other: dict[int, float], rounds: list[int], k: int) -> tuple[str, int]:
    """The default rule on these rounds (in this order, renumbered 1..): (verdict, rounds it ran)."""
    b = {i + 1: base[r] for i, r in enumerate(rounds)}
    o = {i + 1: other[r] for i, r in enumerate(rounds)}
    design = sequential.Design(max_rounds=k, spending=sequential.POCOCK)
    (track,) = sequential.replay([(b, o)], design, len(rounds))
    return track.verdict, track.round or len(rounds)


def centred(base: dict[int, float], other: dict[int, float]) -> dict[int, float]:
    """`other` with the pair's mean log-ratio over all its rounds taken out: for resampled A/A
    experiments the null must hold in the population the rounds are drawn from (uncentred, this
    run's own chance offset between two identical servers would count as an effect in every draw)."""
    both = sorted(set(base) & set(other))
    shift = sum(math.log(other[r] / base[r]) for r in both) / len(both)
    return {r: v / math.exp(shift) for r, v in other.items()}


def analyse(path: Path) -> dict[str, Any]:
    doc = json.loads(C.cli("export", str(path)))
    cells = doc["cells"]
    names = sorted({label(c) for c in cells})
    same = [n for n in names if n == F.BASE or F.is_copy(n)]
    slow = sorted((n for n in names if n.startswith("slow")), key=lambda n: int(n[4:]))
    values = {n: by_round(cells, n) for n in names}
    cell_s = F.cell_seconds(doc)
    k = max(3, int(BUDGET_S // (2 * cell_s)))  # the rounds a 10-minute budget holds, two variants
    rng = random.Random(SEED)
    out: dict[str, Any] = {"run": str(path), "cell_s": round(cell_s, 1), "budget_rounds": k,
                           "other_cpu_cores": C.other_cpu_cores(cells)}  # fmt: skip

    pairs = [(a, b) for a, b in combinations(same, 2)]
    fixed_rates = []
    for n in (2, 3, 4, 5):
        real = resampled = wrong_real = wrong_resampled = 0
        for a, b in pairs:
            both = sorted(set(values[a]) & set(values[b]))
            for i in range(0, len(both) - n + 1, n):
                real += 1
                wrong_real += fixed(values[a], values[b], both[i : i + n]) in ("faster", "slower")
            null = centred(values[a], values[b])
            for _ in range(RESAMPLES // len(pairs)):
                drawn = [rng.choice(both) for _ in range(n)]
                if len(set(drawn)) < 2:
                    continue
                resampled += 1
                wrong_resampled += fixed(values[a], null, drawn) in ("faster", "slower")
        fixed_rates.append({"n": n, "real": real, "false_real": wrong_real, "resampled": resampled,
                            "false_resampled": wrong_resampled,
                            "upper_real": C.rnd(C.upper(wrong_real, real)) if real else None})  # fmt: skip
    out["fixed_aa"] = fixed_rates

    def experiments(a: str, b: str, null: bool = False) -> dict[str, Any]:
        both = sorted(set(values[a]) & set(values[b]))
        found = {"faster": 0, "slower": 0, "equivalent": 0, "inconclusive": 0}
        rounds_to = []
        other = centred(values[a], values[b]) if null else values[b]
        for _ in range(RESAMPLES // max(1, len(pairs))):
            drawn = [rng.choice(both) for _ in range(k)]
            v, used = stopping(values[a], other, drawn, k)
            found[v] += 1
            if v != "inconclusive":
                rounds_to.append(used)
        disjoint, start = [], 0
        while start + 3 <= len(both):
            v, used = stopping(values[a], values[b], both[start:], k)
            disjoint.append((v, used))
            start += used
        return {"resampled": found, "rounds_to_verdict": rounds_to, "disjoint": disjoint}

    aa = {"faster": 0, "slower": 0, "equivalent": 0, "inconclusive": 0}
    aa_disjoint = []
    for a, b in pairs:
        found = experiments(a, b, null=True)
        for key, count in found["resampled"].items():
            aa[key] += count
        aa_disjoint += found["disjoint"]
    total = sum(aa.values())
    out["stopping_aa"] = {**aa, "experiments": total, "false": aa["faster"] + aa["slower"],
                          "upper": C.rnd(C.upper(aa["faster"] + aa["slower"], total)),
                          "disjoint": aa_disjoint}  # fmt: skip
    effects = []
    for name in slow:
        both = sorted(set(values[F.BASE]) & set(values[name]))
        whole = ratio.estimate({r: values[F.BASE][r] for r in both}, {r: values[name][r] for r in both})[0]
        found = experiments(F.BASE, name)
        called = found["resampled"]["slower"] / max(1, sum(found["resampled"].values()))
        rounds_to = sorted(found["rounds_to_verdict"]) or [None]
        median = rounds_to[len(rounds_to) // 2]
        effects.append({
            "variant": name, "measured": C.rnd(whole.ratio), "low": C.rnd(whole.low), "high": C.rnd(whole.high),
            "called_slower": C.rnd(called), "median_rounds": median,
            "median_s": round(median * 2 * cell_s) if median else None,
            "p90_rounds": rounds_to[min(len(rounds_to) - 1, int(0.9 * len(rounds_to)))],
            "disjoint": found["disjoint"],
        })  # fmt: skip
    out["effects"] = effects

    ok = [c for c in cells if c["status"] == "ok"]
    own = [c for c in ok if c.get("settled") in (False, 0) or (c.get("design") or {}).get("own_unsettled_reason")]
    now = [c for c in ok if c.get("settled") in (False, 0)]
    out["unsettled"] = {"cells": len(ok), "own_series": len(own), "now": len(now),
                        "own_rate": C.rnd(len(own) / len(ok)) if ok else None,
                        "now_rate": C.rnd(len(now) / len(ok)) if ok else None,
                        "now_upper": C.rnd(C.upper(len(now), len(ok))) if ok else None,
                        "reasons": [c.get("unsettled_reason") or c["design"].get("own_unsettled_reason")
                                    for c in own]}  # fmt: skip
    return out


def show(out: dict[str, Any]) -> None:
    C.say(f"{out['run']}: {out['cell_s']} s a cell; a 10-minute budget holds {out['budget_rounds']} two-variant rounds; "
          f"other_cpu_cores {out['other_cpu_cores']}")  # fmt: skip
    C.say("paired fixed-sample verdicts of identical pairs (false = faster or slower):")
    C.say(C.table(["n", "real blocks", "false", "95% upper", "resampled", "false"],
                  [[r["n"], r["real"], r["false_real"], C.pct(r["upper_real"]), r["resampled"],
                    C.pct(r["false_resampled"] / r["resampled"] if r["resampled"] else None)]
                   for r in out["fixed_aa"]]))  # fmt: skip
    aa = out["stopping_aa"]
    C.say(f"default stopping rule, identical pairs: {aa['false']} false of {aa['experiments']} resampled experiments "
          f"({C.pct(aa['false'] / aa['experiments'])}, upper {C.pct(aa['upper'])}); equivalent {aa['equivalent']}, "
          f"inconclusive {aa['inconclusive']}; disjoint real: {aa['disjoint']}")  # fmt: skip
    C.say(C.table(["variant", "measured [95%]", "called slower", "median rounds", "median time", "p90 rounds"],
                  [[e["variant"], f"{e['measured']} [{e['low']}-{e['high']}]", C.pct(e["called_slower"]),
                    e["median_rounds"], f"{e['median_s']} s", e["p90_rounds"]] for e in out["effects"]]))  # fmt: skip
    for e in out["effects"]:
        C.say(f"  {e['variant']} disjoint real experiments (verdict, rounds): {e['disjoint']}")
    u = out["unsettled"]
    C.say(
        f"warm-up rule on {u['cells']} ok cells: unsettled by its own series {u['own_series']} "
        f"({C.pct(u['own_rate'])}), now {u['now']} ({C.pct(u['now_rate'])}, upper {C.pct(u['now_upper'])})"
    )
    for reason in u["reasons"]:
        C.say(f"  {reason}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="kept results directories of bench/fidelity.py")
    args = parser.parse_args()

    def run() -> None:
        found = [analyse(path) for path in args.runs]
        for out in found:
            show(out)
        C.final_json({"bench": "decisive", "runs": found})

    C.main_guard(run)


if __name__ == "__main__":
    sys.exit(main())
