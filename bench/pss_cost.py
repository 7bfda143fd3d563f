"""What reading a PostgreSQL tree's PSS costs perflab: its own CPU over the window, PSS read every
second (as before 2026-11-30) against PSS read within its CPU budget (places/proctree.PSS_BUDGET).

What: `perflab run` of one PostgreSQL 15 + pgbench select-only file (scale 1, a 2 s warm-up, a
--duration window) at each --clients count, twice per pair: once with PSS_BUDGET raised so that
every one-second tick reads PSS (the old sampling), once as shipped; the pairs' order alternates
(every, budget, budget, every, ...) so drift falls on both. Each run is a child Python that sets
the budget and calls perflab's CLI, so both sides run the same code but for that constant.
Prints per client count: perflab's own CPU over the window (resources.harness_cpu_s /
summary.total_time_s) as % of one core, each side's mean, the ratio budget/every (mean and range of
the pairs), PSS read in each (pss_end_bytes, pss_peak_bytes), and other_cpu_cores.

Goal (issue 47): perflab's own CPU during a window at most 1% of a core, with the budget.

Run: python3 bench/pss_cost.py                      # 2 pairs at 2 and 16 clients, 20 s windows (~6 min)
     python3 bench/pss_cost.py --pairs 1 --clients 2 --duration 5   # smoke (~1 min)
Exit status: 0 when it measured (GOAL MET or GOAL MISSED printed), 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import _common as C

ROOT = Path(__file__).resolve().parent.parent
SPEC = """\
[experiment]
name = "pss-cost"
duration = "{duration}s"
warmup = "2s"
repeats = 1
server = "postgresql"

[dataset]
scale = 1

[workload]
tool = "pgbench"
test = "select-only"
threads = [{clients}]
"""
# the child: the budget set (every: reads at every tick), then perflab's CLI
CHILD = """
import sys
from perflab.places import proctree
if sys.argv.pop(1) == "every":
    proctree.PSS_BUDGET = 1e9
from perflab.cli import main
main()
"""


def one(work: Path, mode: str, clients: int, duration: int, i: int) -> dict:
    spec = work / f"pss-{clients}.toml"
    spec.write_text(SPEC.format(duration=duration, clients=clients), encoding="utf-8")
    out = work / f"{mode}-{clients}-{i}"
    done = subprocess.run([sys.executable, "-c", CHILD, mode, "run", str(spec), "-o", str(out)],
                          cwd=ROOT, capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise C.BenchError(f"perflab run ({mode}, {clients} clients) exited {done.returncode}: {done.stderr[-800:]}")
    (cell,) = json.loads(C.cli("export", str(out), "--format", "json"))["cells"]
    if cell.get("status") != "ok":
        raise C.BenchError(f"the cell failed: {cell.get('error')}")
    return cell


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--clients", type=int, nargs="+", default=[2, 16])
    ap.add_argument("--duration", type=int, default=20, help="window seconds")
    args = ap.parse_args()
    results: dict[str, dict] = {}
    worst = 0.0
    with C.workdir() as work:
        for clients in args.clients:
            cells: dict[str, list[dict]] = {"every": [], "budget": []}
            for i in range(args.pairs):
                order = ("every", "budget") if i % 2 == 0 else ("budget", "every")
                for mode in order:
                    cells[mode].append(one(work, mode, clients, args.duration, i))
                    C.say(f"{clients} clients, pair {i + 1}, {mode}: done")
            own = {m: [100 * c["resources"]["harness_cpu_s"] / c["summary"]["total_time_s"] for c in cs]
                   for m, cs in cells.items()}  # fmt: skip
            ratios = [b / e for b, e in zip(own["budget"], own["every"], strict=True)]
            worst = max(worst, max(own["budget"]))
            results[str(clients)] = {
                "own_cpu_pct_every": [C.rnd(x, 3) for x in own["every"]],
                "own_cpu_pct_budget": [C.rnd(x, 3) for x in own["budget"]],
                "ratio_budget_every": C.rnd(C.mean(ratios), 3),
                "ratio_range": [C.rnd(min(ratios), 3), C.rnd(max(ratios), 3)],
                "pss_end_bytes": {m: [c["resources"].get("pss_end_bytes") for c in cs] for m, cs in cells.items()},
                "pss_peak_bytes": {m: [c["resources"].get("pss_peak_bytes") for c in cs] for m, cs in cells.items()},
                "other_cpu_cores": C.other_cpu_cores(cells["every"] + cells["budget"]),
            }
    rows = [
        [k, C.pct(C.mean(v["own_cpu_pct_every"]) / 100), C.pct(C.mean(v["own_cpu_pct_budget"]) / 100),
         f"{v['ratio_budget_every']} [{v['ratio_range'][0]}-{v['ratio_range'][1]}]", v["other_cpu_cores"]["max"]]
        for k, v in results.items()
    ]  # fmt: skip
    C.say(C.table(["clients", "own CPU, PSS every s", "own CPU, budget", "ratio budget/every", "other_cpu_cores max"], rows))
    goal = worst <= 1.0
    C.say(f"{'GOAL MET' if goal else 'GOAL MISSED'}: perflab's own CPU with the budget at most {worst:.2f}% of a core (goal 1%)")
    C.final_json({"bench": "pss_cost", "goal_met": goal, "results": results})


if __name__ == "__main__":
    C.main_guard(run)
