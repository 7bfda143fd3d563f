"""Does the canary's pointer chase make the host-speed covariate better, out of sample, and is
it blind to a variant that changes the server's use of the caches?

Why: with the spin alone (a register-only loop) adjusting QPS left 3-7% of noise per cell on
this VM; the spin does not see the host's other tenants in the caches and memory it shares
with them, which the server's workload does. The canary now also times a pointer chase through
a 1 MiB buffer each period (`host_speed.chase_ns`), and a calibration weighs it in
(`host_speed.chase_weight`, analyze/host_slope.py).

What: an experiment with the canary (oltp_read_only, 2 threads, 10 s windows, a fixed 5 s
warm-up, a fresh server per cell, ROUNDS randomized rounds) of two identical variants `a` and `b` (an
A/A pair) and `jemalloc` (the server preloaded with it: another allocator, another use of the
caches), or kept runs of it or of `perflab calibrate` (its A/A cells; --runs DIR ...). Then, for
every pair of variants and each round held out in turn, the slope(s) fitted on the other rounds
exactly as `perflab calibrate` fits them (analyze/host_slope.within_rounds, chase_weight,
usable_weight) and applied to the held-out round's log-ratio d - slope x c: the sd of those
adjusted per-round log-ratios, spin alone against spin and chase, and the variance ratio (what a
10-minute experiment's detectable effect shrinks by: its square root). With several runs, also
each run's fit applied to the others. Blindness: per pair, the mean per-round difference of each
canary figure with its standard error (a variant that moved the chase would show here; `decide`
then refuses the adjustment at p < 0.01).

Run: python3 bench/archive/canary_chase.py [--rounds 20] [--keep DIR]        # about 16 min at 20 rounds
     python3 bench/archive/canary_chase.py --runs DIR [DIR ...]              # kept runs: CPU only, seconds
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: _common and the scripts imported below
import _common as C

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perflab.analyze import host_slope, host_speed
from perflab.variants import variant_key

REST = """\
[variants.effect]
a = { env = { PERFLAB_AA = "a" } }
b = { env = { PERFLAB_AA = "b" } }
jemalloc = { preload = "jemalloc" }

[observe]
host_speed = true
"""


def settled(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in cells if c["status"] == "ok" and c.get("settled") not in (False, 0)
            and (c.get("summary") or {}).get("qps") and (c.get("host_speed") or {}).get("chase_ns")]  # fmt: skip


def fitted(cells: list[dict[str, Any]], chase: bool) -> tuple[float, float] | None:
    """(slope, chase weight) as perflab calibrate fits them on `cells`; None: no slope."""
    weight = host_slope.usable_weight(host_slope.chase_weight(cells, "qps")) if chase else 0.0
    found = host_slope.within_rounds(cells, "qps", weight)
    return None if found is None else (found["slope"], weight)


def adjusted(a: dict[str, Any], b: dict[str, Any], fit: tuple[float, float]) -> float:
    slope, weight = fit
    d = math.log(b["summary"]["qps"] / a["summary"]["qps"])
    return d - slope * (host_speed.log_speed(b, weight) - host_speed.log_speed(a, weight))


def pairs(cells: list[dict[str, Any]]) -> dict[tuple[str, str], list[tuple[int, dict, dict]]]:
    by: dict[int, dict[str, dict[str, Any]]] = {}
    for c in cells:
        by.setdefault(c["repeat"], {})[variant_key(c["variant"])] = c
    names = sorted({variant_key(c["variant"]) for c in cells})
    return {(x, y): [(r, v[x], v[y]) for r, v in sorted(by.items()) if x in v and y in v]
            for x, y in itertools.combinations(names, 2)}  # fmt: skip


def held_out(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Each round held out in turn: its pairs adjusted by the fit on the other rounds."""
    out: dict[str, list[float]] = {"none": [], "spin": [], "spin+chase": []}
    weights = []
    for r in sorted({c["repeat"] for c in cells}):
        rest = [c for c in cells if c["repeat"] != r]
        spin, both = fitted(rest, False), fitted(rest, True)
        if spin is None or both is None:
            continue
        weights.append(both[1])
        for found in pairs([c for c in cells if c["repeat"] == r]).values():
            for _, a, b in found:
                out["none"].append(adjusted(a, b, (0.0, 0.0)))
                out["spin"].append(adjusted(a, b, spin))
                out["spin+chase"].append(adjusted(a, b, both))
    sd = {k: statistics.stdev(v) for k, v in out.items() if len(v) > 2}
    return {"log_ratios": len(out["none"]), "sd": {k: C.rnd(v) for k, v in sd.items()},
            "variance_ratio_chase_over_spin": C.rnd((sd["spin+chase"] / sd["spin"]) ** 2, 3),
            "chase_weight_range": [C.rnd(min(weights), 3), C.rnd(max(weights), 3)]}  # fmt: skip


def across(train: list[dict[str, Any]], test: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's fit applied to another run's per-round log-ratios."""
    spin, both = fitted(train, False), fitted(train, True)
    if spin is None or both is None:
        raise C.BenchError("too few cells for a fit")
    d = {k: [adjusted(a, b, f) for found in pairs(test).values() for _, a, b in found]
         for k, f in (("none", (0.0, 0.0)), ("spin", spin), ("spin+chase", both))}  # fmt: skip
    sd = {k: statistics.stdev(v) for k, v in d.items()}
    return {"fit": {"spin": [C.rnd(x, 3) for x in spin], "spin+chase": [C.rnd(x, 3) for x in both]},
            "sd": {k: C.rnd(v) for k, v in sd.items()},
            "variance_ratio_chase_over_spin": C.rnd((sd["spin+chase"] / sd["spin"]) ** 2, 3)}  # fmt: skip


def blindness(cells: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for (x, y), found in pairs(cells).items():
        row = {}
        for name in ("work_ns", "chase_ns"):
            diffs = [math.log(a["host_speed"][name] / b["host_speed"][name]) for _, a, b in found]
            se = statistics.stdev(diffs) / math.sqrt(len(diffs))
            row[name] = {"mean_log_diff": C.rnd(statistics.fmean(diffs)), "se": C.rnd(se)}
        out[f"{y} vs {x}"] = row
    return out


def measure(rounds: int, keep: Path) -> Path:
    cfg = {"duration": 10, "warmup": 5, "tables": 2, "table_size": 50_000, "rounds": rounds}
    machine = C.Machine()
    with C.workdir(machine) as tmp:
        toml = tmp / "chase.toml"
        toml.write_text(C.read_only_experiment("canary-chase", cfg, REST), encoding="utf-8")
        C.cli("run", str(toml), "-o", str(keep), "--seed", "13")
    C.say(C.Machine.describe(machine.finish()))
    return keep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="keep the run's results here (required to measure)")
    parser.add_argument("--runs", type=Path, nargs="+", help="analyse kept runs instead of measuring")
    args = parser.parse_args()
    if not args.runs and not args.keep:
        parser.error("give --keep DIR (where the run's results go) or --runs DIR ...")

    def run() -> None:
        dirs = args.runs or [measure(args.rounds, args.keep)]
        docs = [json.loads(C.cli("export", str(d))) for d in dirs]
        found: dict[str, Any] = {"runs": []}
        for d, doc in zip(dirs, docs):
            cells = settled(doc["cells"])
            row = {"run": str(d), "cells": len(cells), "other_cpu_cores": C.other_cpu_cores(doc["cells"]),
                   "held_out": held_out(cells), "blindness": blindness(cells)}  # fmt: skip
            found["runs"].append(row)
            h = row["held_out"]
            C.say(f"{d}: {len(cells)} settled cells, other processes {row['other_cpu_cores']}")
            C.say(f"  each round held out ({h['log_ratios']} per-round log-ratios): sd none {C.pct(h['sd']['none'])}, "
                  f"spin {C.pct(h['sd']['spin'])}, spin+chase {C.pct(h['sd']['spin+chase'])}; variance "
                  f"chase/spin {h['variance_ratio_chase_over_spin']}; weights {h['chase_weight_range']}")
            for pair, b in row["blindness"].items():
                C.say(f"  canary beside {pair}: spin {b['work_ns']['mean_log_diff']:+.4f} (se {b['work_ns']['se']}), "
                      f"chase {b['chase_ns']['mean_log_diff']:+.4f} (se {b['chase_ns']['se']})")
        for (i, a), (j, b) in itertools.permutations(enumerate(docs), 2):
            row = across(settled(a["cells"]), settled(b["cells"]))
            found.setdefault("across", []).append({"fit_on": str(dirs[i]), "applied_to": str(dirs[j]), **row})
            C.say(f"fit on {dirs[i]}, applied to {dirs[j]}: sd {row['sd']}, variance chase/spin "
                  f"{row['variance_ratio_chase_over_spin']} (fits {row['fit']})")
        C.final_json({"bench": "canary_chase", **found})

    C.main_guard(run)


if __name__ == "__main__":
    main()
