"""Identical variants on real runs, not resampled: how often perflab calls them `faster` or `slower`.

What: kept results directories of real runs (bench/fidelity.py's `none`, `same`, `same2`, ...;
with `--copies K` a run holds K(K-1)/2 identical pairs in every round; `perflab calibrate`'s `A`
and `B`; a/b runs). Every pair of identical variants is cut into consecutive, disjoint blocks of
M rounds, M what the issue's 10-minute two-variant budget holds at that run's own wall time per
cell (a run with fewer rounds is one shorter experiment), and each block is judged with
perflab's own code as a run of those rounds would be:
  - the adaptive design (`stop = "verdict"`, O'Brien-Fleming looks, analyze/sequential) and a
    fixed M-round protocol;
  - unadjusted, and, with --calibrated-slope B, adjusted for the host's speed with that slope
    fixed (as a run planned on a `perflab calibrate` of its host does; analyze/host_speed).
Nothing is centred or drawn again: a run's own offset between two identical servers counts, as
it would for a user. `faster` or `slower` on such a pair is a false verdict.

Reported per run and pooled: experiments, false verdicts, and the one-sided 95% Clopper-Pearson
upper bound of the rate. The pairs of one block share cells (a with b and a with c share a's),
so their verdicts are not independent and the bound, which assumes they are, is too narrow; the
bound over the pairs that share no cell (a-b, c-d) is given beside it. Every start offset
(overlapping blocks, more experiments, all correlated) gives the same rate from more data.

Run: python3 bench/aa_real.py --runs DIR [DIR...] [--calibrated-slope B] [--chase-weight W]
     (analysis only, no measurement; make the runs with bench/fidelity.py --host-speed --copies 4)
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

import _common as C
import fidelity as F

IDENTICAL = ("none", "A", "B", "a", "b")  # besides fidelity's copies: calibrate's pair, a/b runs


def label(cell: dict[str, Any]) -> str:
    return "/".join(str(v) for v in cell["variant"].values())


def identical(names: set[str]) -> list[str]:
    return sorted(n for n in names if n in IDENTICAL or F.is_copy(n))


def usable(cells: list[dict[str, Any]], name: str) -> dict[int, dict[str, Any]]:
    return {c["repeat"]: c for c in cells if label(c) == name and F._usable(c)}


def judged(
    x: dict[int, dict[str, Any]], y: dict[int, dict[str, Any]], rounds: list[int], adjust: bool
) -> tuple[str, str]:
    """The adaptive and the fixed verdict of one experiment made of these rounds of x and y."""
    if not adjust:
        qx = {r: x[r]["summary"]["qps"] for r in rounds}
        qy = {r: y[r]["summary"]["qps"] for r in rounds}
        adaptive, _, fixed, _ = F.experiment(qx, qy, rounds)
        return adaptive, fixed
    pairs = [({**x[r], "variant": {"effect": F.BASE}}, {**y[r], "variant": {"effect": "other"}}) for r in rounds]
    adaptive, _, fixed, _ = F.adjusted_experiment(pairs, "other")
    return adaptive, fixed


def false(verdicts: list[str]) -> int:
    return sum(v in ("faster", "slower") for v in verdicts)


def analyse_run(path: Path, adjust: bool) -> dict[str, Any]:
    doc = json.loads(C.cli("export", str(path)))
    cells = doc["cells"]
    names = identical({label(c) for c in cells})
    cell_s = F.cell_seconds(doc)
    m = max(5, int(F.BUDGET_S // (2 * cell_s)))
    with_canary = adjust and all(c.get("host_speed") for c in cells if F._usable(c))
    out: dict[str, Any] = {"run": str(path), "names": names, "cell_s": round(cell_s, 1), "rounds_in_10_min": m,
                           "started": min(c["started_at"] for c in cells if c.get("started_at")),
                           "other_cpu_cores": C.other_cpu_cores([c for c in cells if label(c) in names]),
                           "ways": {}}  # fmt: skip
    ways = ["unadjusted"] + (["adjusted"] if with_canary else [])
    for way in ways:
        blocks: dict[str, list[str]] = {"adaptive": [], "fixed": [], "adaptive_no_shared": [], "fixed_no_shared": []}
        offsets: dict[str, list[str]] = {"adaptive": [], "fixed": []}
        apart: list[str] = []  # the variants of the pairs kept as sharing no cell
        size = m
        for a, b in combinations(names, 2):
            x, y = usable(cells, a), usable(cells, b)
            rounds = sorted(set(x) & set(y))
            if len(rounds) < 5:
                continue
            size = min(m, len(rounds))
            shares = a in apart or b in apart
            if not shares:
                apart += [a, b]
            for start in range(0, len(rounds) - size + 1):
                adaptive, fixed = judged(x, y, rounds[start : start + size], way == "adjusted")
                offsets["adaptive"].append(adaptive)
                offsets["fixed"].append(fixed)
                if start % size == 0:
                    blocks["adaptive"].append(adaptive)
                    blocks["fixed"].append(fixed)
                    if not shares:
                        blocks["adaptive_no_shared"].append(adaptive)
                        blocks["fixed_no_shared"].append(fixed)
        out["ways"][way] = {
            "experiments": len(blocks["adaptive"]), "block_rounds": size,
            **{k: {"false": false(v), "n": len(v), "verdicts": dict(Counter(v))} for k, v in blocks.items()},
            "offsets": {k: {"false": false(v), "n": len(v)} for k, v in offsets.items()},
        }  # fmt: skip
    return out


def pooled(runs: list[dict[str, Any]], way: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("adaptive", "fixed", "adaptive_no_shared", "fixed_no_shared"):
        k = sum(r["ways"][way][key]["false"] for r in runs if way in r["ways"])
        n = sum(r["ways"][way][key]["n"] for r in runs if way in r["ways"])
        out[key] = {"false": k, "n": n, "rate": C.rnd(k / n) if n else None,
                    "upper95": C.rnd(C.upper(k, n)) if n else None}  # fmt: skip
    for key in ("adaptive", "fixed"):
        k = sum(r["ways"][way]["offsets"][key]["false"] for r in runs if way in r["ways"])
        n = sum(r["ways"][way]["offsets"][key]["n"] for r in runs if way in r["ways"])
        out[f"{key}_offsets"] = {"false": k, "n": n, "rate": C.rnd(k / n) if n else None}
    return out


def show(runs: list[dict[str, Any]], total: dict[str, Any]) -> None:
    rows = []
    for r in runs:
        for way, w in r["ways"].items():
            rows.append([
                Path(r["run"]).name, r["started"][:16], ", ".join(r["names"]), r["cell_s"], w["block_rounds"], way,
                w["experiments"], f"{w['adaptive']['false']} ({dict(w['adaptive']['verdicts'])})",
                f"{w['fixed']['false']} ({dict(w['fixed']['verdicts'])})",
                f"{w['offsets']['adaptive']['false']}/{w['offsets']['adaptive']['n']}",
                f"{w['offsets']['fixed']['false']}/{w['offsets']['fixed']['n']}",
                f"{r['other_cpu_cores']['mean']} / {r['other_cpu_cores']['max']}",
            ])  # fmt: skip
    C.say(C.table(["run", "started", "identical", "s/cell", "rounds", "judged", "experiments", "adaptive false",
                   "fixed false", "every offset: adaptive", "fixed", "other cores mean/max"], rows))  # fmt: skip
    for way, p in total.items():
        def line(key: str) -> str:
            x = p[key]
            return f"{x['false']}/{x['n']} = {C.pct(x['rate'], 1)} (95% upper bound {C.pct(x['upper95'], 1)})"

        C.say(f"\npooled, {way}: adaptive {line('adaptive')}; fixed {line('fixed')}")
        C.say(f"  pairs sharing no cell: adaptive {line('adaptive_no_shared')}; fixed {line('fixed_no_shared')}")
        a, f = p["adaptive_offsets"], p["fixed_offsets"]
        C.say(f"  every start offset: adaptive {a['false']}/{a['n']} = {C.pct(a['rate'], 1)}; "
              f"fixed {f['false']}/{f['n']} = {C.pct(f['rate'], 1)}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", required=True, metavar="DIR", help="kept results directories")
    parser.add_argument("--calibrated-slope", type=float, metavar="B",
                        help="also judge adjusted for the host's speed with this slope fixed (a calibration's)")
    parser.add_argument("--chase-weight", type=float, metavar="W", default=0.0,
                        help="with --calibrated-slope: the canary's chase weighed in (a calibration's chase_weight)")
    args = parser.parse_args()
    if args.calibrated_slope is not None:
        F.CALIBRATED = F.calibration(args.calibrated_slope, args.chase_weight)

    def run() -> None:
        runs = [analyse_run(Path(d), args.calibrated_slope is not None) for d in args.runs]
        ways = sorted({w for r in runs for w in r["ways"]}, key=lambda w: w != "unadjusted")
        total = {way: pooled(runs, way) for way in ways}
        show(runs, total)
        C.final_json({"bench": "aa_real", "calibrated_slope": args.calibrated_slope,
                      "chase_weight": args.chase_weight, "runs": runs, "pooled": total})  # fmt: skip

    C.main_guard(run)


if __name__ == "__main__":
    sys.exit(main())
