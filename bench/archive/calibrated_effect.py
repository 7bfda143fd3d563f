"""A calibrated effect on real runs: how much a known slowdown really costs, whether perflab
calls it, and the smallest one it calls correctly in >= 80% of 10-minute experiments.

What: two-variant experiments on the real server, the baseline against the same server with
tests/data/calibrated/slow_malloc.so preloaded, which burns N ns of CPU per malloc call
(`PERFLAB_SLOW_MALLOC_NS`). Per setting of N and per trial, one `perflab run` with adaptive
rounds that stop on a verdict (`repeats = "auto"`, `stop = "verdict"`, 10 s windows, max_repeats
and time_budget so the experiment fits in `--minutes`), with `[observe] alloc` for malloc calls
per transaction (both sides pay the counter alike). Measured per run:
  - the nominal effect: the extra server CPU per transaction the shim should cost,
    calls/txn x N, over the baseline's server CPU per transaction (a server bound by its CPU
    slows by that fraction; `nominal` = 1 - cpu / (cpu + extra));
  - the shim's actual effect: the measured QPS ratio (paired, over rounds) and its 95% interval,
    and the measured extra server CPU per transaction against calls/txn x N;
  - the verdict, and the rounds and wall time it took.
Per setting: the share of trials called `slower` (correct), `faster` (wrong), and the
sensitivity figure: the smallest setting (and its measured effect) called `slower` in >= 80% of
trials. other_cpu_cores of every cell is reported: run it only on an idle machine.

How: through the CLI as a user runs it (`perflab run --seed`, `perflab export`), one results
directory per run under /dev/shm. Never run by the test suite (tests/integration/
test_calibrated_effect.py checks the shim on one small run).

Run: python3 bench/archive/calibrated_effect.py                               # 100-2000 ns, 10 trials each (hours)
     python3 bench/archive/calibrated_effect.py --ns 200,400 --trials 20      # a finer look
     python3 bench/archive/calibrated_effect.py --quick                       # smoke test (~2 minutes)
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: _common and the scripts imported below
import _common as C

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.data.calibrated.build import ENV, build

CELL_S = 10 + 10 + 3  # warm-up + window + restart: run/scheduler.py's estimate
SENSITIVE = 0.8  # the share of trials a setting must be called in

EXPERIMENT = """\
[experiment]
name = "calibrated-{ns}"
duration = "{duration}s"
warmup = "{warmup}s"
repeats = "auto"
stop = "verdict"
max_repeats = {max_repeats}
time_budget = "{budget}s"

[dataset]
tables = 2
table_size = 50000

[workload]
test = "oltp_read_only"
threads = [2]
options = {{ rand_type = "uniform" }}

[variants.effect]
none = {{}}
slow = {{ preload = "{lib}", env = {{ {env} = "{ns}" }} }}

[observe]
alloc = {{ stacks = false, syscalls = false }}
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "perflab", *args], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise C.BenchError(f"perflab {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return done


def mean_of(cells: list[dict[str, Any]], value: Any) -> float | None:
    found = [value(c) for c in cells if c["status"] == "ok"]
    found = [v for v in found if v is not None]
    return C.mean(found) if found else None


def one_run(tmp: Path, lib: Path, ns: int, trial: int, args: argparse.Namespace) -> dict[str, Any]:
    """One experiment at N ns: its verdict, measured and nominal effect, rounds and wall time."""
    budget = args.minutes * 60
    spec = tmp / f"ns{ns}-t{trial}.toml"
    spec.write_text(EXPERIMENT.format(ns=ns, lib=lib, env=ENV, duration=args.duration, warmup=args.warmup,
                                      max_repeats=max(3, int(budget // (2 * args.cell_s))), budget=budget),
                    encoding="utf-8")  # fmt: skip
    out = tmp / f"ns{ns}-t{trial}"
    started = time.monotonic()
    cli("run", str(spec), "-o", str(out), "--seed", str(1000 * ns + trial))
    wall = time.monotonic() - started
    export = json.loads(cli("export", str(out)).stdout)
    row = next(c for c in export["comparisons"] if c["metric"] == "qps" and c["kind"] == "variant")
    cells = export["cells"]
    sides = [[c for c in cells if c["variant"]["effect"] == side] for side in ("none", "slow")]
    cpu = [mean_of(s, lambda c: (c.get("resources") or {}).get("server_cpu_us_per_txn")) for s in sides]
    calls = mean_of(sides[1], lambda c: sum((c.get("alloc") or {}).get("calls_per_txn", {}).get(op, 0)
                                            for op in ("malloc", "calloc", "realloc", "new")))  # fmt: skip
    extra = calls * ns / 1000 if calls is not None else None
    nominal = 1 - cpu[0] / (cpu[0] + extra) if cpu[0] and extra else None
    other = [(c.get("resources") or {}).get("other_cpu_cores") for c in cells]
    other = [o for o in other if o is not None]
    return {"ns": ns, "trial": trial, "verdict": row["verdict"], "ratio": row["ratio"], "ci_low": row["ci_low"],
            "ci_high": row["ci_high"], "method": row["method"], "rounds": export.get("adaptive", {}).get("rounds"),
            "wall_s": wall, "calls_per_txn": calls, "nominal_extra_cpu_us": extra,
            "measured_extra_cpu_us": cpu[1] - cpu[0] if None not in cpu else None, "nominal_effect": nominal,
            "other_cpu_cores_max": max(other) if other else None}  # fmt: skip


def summary(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for ns in sorted({r["ns"] for r in runs}):
        mine = [r for r in runs if r["ns"] == ns]
        ratios = [r["ratio"] for r in mine if r["ratio"] is not None]
        nominal = [r["nominal_effect"] for r in mine if r["nominal_effect"] is not None]
        out.append({"ns": ns, "trials": len(mine), "slower": sum(r["verdict"] == "slower" for r in mine) / len(mine),
                    "faster": sum(r["verdict"] == "faster" for r in mine) / len(mine),
                    "measured_effect": 1 - C.mean(ratios) if ratios else None,
                    "nominal_effect": C.mean(nominal) if nominal else None,
                    "wall_s": C.mean([r["wall_s"] for r in mine])})  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ns", default="100,200,400,800,2000", help="settings, ns per malloc call (comma-separated)")
    parser.add_argument("--trials", type=int, default=10, help="experiments per setting")
    parser.add_argument("--minutes", type=float, default=10.0, help="time budget of one experiment")
    parser.add_argument("--quick", action="store_true", help="one tiny experiment at 2000 ns: a smoke test")
    args = parser.parse_args()
    args.duration, args.warmup, args.cell_s = 10, 10, CELL_S
    settings = [int(x) for x in args.ns.split(",")]
    if args.quick:
        settings, args.trials, args.minutes, args.duration, args.warmup = [2000], 1, 0.5, 3, 2
        args.cell_s = 3 + 2 + 3
    machine = C.Machine()
    runs: list[dict[str, Any]] = []
    with C.workdir(machine) as tmp:
        lib = build(tmp / "shim")
        for ns in settings:
            for trial in range(args.trials):
                runs.append(one_run(tmp, lib, ns, trial, args))
                r = runs[-1]
                C.say(f"{ns} ns, trial {trial + 1}: {r['verdict']} ratio {r['ratio']} [{r['ci_low']}, {r['ci_high']}]"
                      f" nominal effect {C.pct(r['nominal_effect'], 1)}, {r['rounds']} rounds, {r['wall_s']:.0f} s, "
                      f"other cores <= {r['other_cpu_cores_max']}")  # fmt: skip
    info = machine.finish()
    rows = summary(runs)
    C.say()
    C.say(C.table(["ns/malloc", "trials", "nominal effect", "measured effect", "slower", "faster", "mean wall s"],
                  [[s["ns"], s["trials"], C.pct(s["nominal_effect"], 1), C.pct(s["measured_effect"], 1),
                    C.pct(s["slower"], 0), C.pct(s["faster"], 0), f"{s['wall_s']:.0f}"] for s in rows]))  # fmt: skip
    called = [s for s in rows if s["slower"] >= SENSITIVE]
    smallest = called[0] if called else None
    C.say(f"\nsensitivity ({args.minutes:g}-minute experiments, called slower in >= {SENSITIVE:.0%}): "
          + (f"{smallest['ns']} ns/malloc, a measured effect of {C.pct(smallest['measured_effect'], 1)}"
             if smallest else "none of these settings"))  # fmt: skip
    C.say(C.Machine.describe(info))
    C.final_json({"runs": runs, "settings": rows, "sensitivity": smallest, "machine": info})


if __name__ == "__main__":
    C.main_guard(main)
