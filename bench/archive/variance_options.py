"""Do `aslr = false` and `prewarm = true` make a measurement steadier, and do they move its mean?
(issue 12 item 7: keep a server-side option only if it reduces variance without biasing the mean)

What: one experiment, the perflab CLI as a user runs it: oltp_read_only, 2 threads, 4 tables x
100k rows, 5 s max warm-up, 15 s windows, a fresh server per cell, 8 randomized rounds of three
variants: `default` (randomized address space, InnoDB's own background reload of the pages the
dataset listed at its shutdown), `noaslr` (the server under `setarch -R`), `prewarm` (every index
read before the workload, InnoDB's reload off). Printed per variant: mean QPS, the sd of log QPS
between restarts (block-adjusted: each round's common drift removed, Grubbs' estimator for k
instruments measuring the same rounds), the raw sd across rounds, and its ratio (with a 95%
F interval) and QPS ratio (perflab compare: CI and verdict) against `default`; and
other_cpu_cores of every cell (a figure from a busy machine is not this machine's noise).

Run: python3 bench/archive/variance_options.py            # the figures to quote (~12 minutes), idle machine
     python3 bench/archive/variance_options.py --quick    # smoke test: 3 rounds of 3 s windows (~2 minutes)
     --results DIR keeps the results directory (perflab report DIR)
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: _common and the scripts imported below
import _common as C
from scipy import stats

VARIANTS = ("default", "noaslr", "prewarm")

EXPERIMENT = """
[experiment]
name = "variance-options"
duration = "{duration}s"
max_warmup = "{warmup}s"
repeats = {rounds}

[dataset]
tables = {tables}
table_size = {table_size}

[workload]
test = "oltp_read_only"
threads = [2]

[variants.layout]
default = {{}}
noaslr  = {{ aslr = false }}
prewarm = {{ prewarm = true }}
"""


def settings(quick: bool, rounds: int | None) -> dict[str, Any]:
    base = {"duration": 15, "warmup": 5, "tables": 4, "table_size": 100_000, "rounds": 8}
    if quick:
        base = {"duration": 3, "warmup": 2, "tables": 1, "table_size": 2000, "rounds": 3}
    return {**base, "rounds": rounds or base["rounds"]}


def restart_sd(logs: dict[str, dict[int, float]]) -> dict[str, float | None]:
    """Each variant's own sd between restarts with the rounds' common part removed: residuals
    of the additive fit y[r,v] = m[v] + b[r], then Grubbs' estimator (k >= 3 variants)."""
    rounds = sorted(set.intersection(*(set(v) for v in logs.values())))
    k, n = len(logs), len(rounds)
    if k < 3 or n < 3:
        return {v: None for v in logs}
    col = {v: C.mean([logs[v][r] for r in rounds]) for v in logs}
    row = {r: C.mean([logs[v][r] for v in logs]) for r in rounds}
    grand = C.mean(list(col.values()))
    s = {v: sum((logs[v][r] - col[v] - row[r] + grand) ** 2 for r in rounds) / (n - 1) for v in logs}
    total = sum(s.values()) / (1 - 1 / k)
    return {v: math.sqrt(max(0.0, (s[v] - total / k**2) / (1 - 2 / k))) for v in logs}


def raw_sd_ratio(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """sd(b)/sd(a) with its 95% interval from the F distribution."""
    ratio = C.stdev(b) ** 2 / C.stdev(a) ** 2
    lo, hi = stats.f.ppf([0.025, 0.975], len(b) - 1, len(a) - 1)
    return math.sqrt(ratio), math.sqrt(ratio / hi), math.sqrt(ratio / lo)


def analyse(doc: dict[str, Any], compare: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [c for c in doc["cells"] if c["status"] == "ok"]
    logs = {
        v: {c["repeat"]: math.log(c["summary"]["qps"]) for c in ok if c["variant"]["layout"] == v} for v in VARIANTS
    }
    adjusted = restart_sd(logs)
    rows = {}
    for v in VARIANTS:
        values = list(logs[v].values())
        row: dict[str, Any] = {"cells": len(values), "qps": math.exp(C.mean(values)), "raw_sd": C.stdev(values)}
        row["restart_sd"] = adjusted[v]
        if v != "default":
            row["sd_ratio"] = raw_sd_ratio(list(logs["default"].values()), values)
            row["qps_ratio"] = next(
                ({k: c.get(k) for k in ("ratio", "ci_low", "ci_high", "verdict", "method")}
                 for c in compare if c.get("kind") == "variant" and c["variant"].get("layout") == v),
                None,
            )  # fmt: skip
        rows[v] = row
    others = [c["resources"].get("other_cpu_cores") or 0.0 for c in ok]
    return {"variants": rows, "other_cpu_cores": {"max": max(others), "mean": C.rnd(C.mean(others), 3)},
            "failed_cells": len(doc["cells"]) - len(ok)}  # fmt: skip


def report(cfg: dict[str, Any], out: dict[str, Any], wall: float) -> None:
    table = []
    for v, r in out["variants"].items():
        sd_ratio, q = r.get("sd_ratio"), r.get("qps_ratio")
        table.append([
            v, r["cells"], f"{r['qps']:,.0f}", C.pct(r["restart_sd"]), C.pct(r["raw_sd"]),
            "-" if sd_ratio is None else f"{sd_ratio[0]:.2f} [{sd_ratio[1]:.2f}-{sd_ratio[2]:.2f}]",
            "-" if not q else f"{q['ratio']:.3f} [{q['ci_low']:.3f}-{q['ci_high']:.3f}] {q['verdict']} ({q['method']})",
        ])  # fmt: skip
    C.say(C.table(["variant", "cells", "QPS", "restart sd", "raw sd", "raw sd / default's [95%]",
                   "QPS / default's [95%]"], table))  # fmt: skip
    oc = out["other_cpu_cores"]
    C.say(f"other_cpu_cores: max {oc['max']:.3f}, mean {oc['mean']:.3f}; failed cells {out['failed_cells']}; "
          f"{wall / 60:.1f} min")  # fmt: skip
    C.final_json({"bench": "variance_options", "settings": cfg, **out, "wall_s": round(wall, 1)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 3 rounds of 3 s windows, a tiny dataset")
    parser.add_argument("--rounds", type=int, help="rounds (default 8)")
    parser.add_argument("--results", metavar="DIR", help="keep the results directory here")
    parser.add_argument("--allow-concurrent", action="store_true", help="run beside another perflab run (smoke tests)")
    args = parser.parse_args()
    cfg = settings(args.quick, args.rounds)

    def run() -> None:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="plbench-varopt-") as tmp:
            toml = Path(tmp) / "options.toml"
            toml.write_text(EXPERIMENT.format(**cfg), encoding="utf-8")
            results = Path(args.results) if args.results else Path(tmp) / "results"
            C.cli(
                "run", str(toml), "-o", str(results), "--seed", "12", *(["--allow-concurrent"] * args.allow_concurrent)
            )
            doc = json.loads(C.cli("export", str(results)))
            compare = json.loads(C.cli("compare", str(results), "--format", "json"))
        report(cfg, analyse(doc, compare), time.monotonic() - started)

    C.main_guard(run)


if __name__ == "__main__":
    main()
