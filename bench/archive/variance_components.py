"""Where this machine's noise comes from: an A/A experiment and its variance components.

What: `perflab calibrate` on one configuration (oltp_read_only, 2 threads, 4 tables x 100k
rows, 10 s max warm-up, a 20 s window; 8 rounds of two identical variants A and B in
randomized blocks, a fresh server per cell). Printed: each variance component of log QPS
(second-to-second in the window, between restarts, drift across rounds), its standard
deviation and its share of a paired and an unpaired ratio's variance, the advice, the measured
per-cell overhead, and what a 10-minute two-variant experiment can detect at 95% confidence
and 80% power (best window, rounds). With the CPU other processes used during the run
(other_cpu_cores): a figure from a busy machine is not this machine's noise.
How: the perflab CLI as a user runs it (`perflab calibrate --format json`), in a subprocess,
with its calibration saved under a temporary PERFLAB_CACHE (the user's is left alone) and its
results directory kept with --results. Components: analyze/variance.py; the plan:
analyze/power.py (docs/methodology.md#calibration).

Run: python3 bench/archive/variance_components.py           # the figures to quote (~12 minutes)
     python3 bench/archive/variance_components.py --quick   # smoke test: 3 rounds of 3 s windows (~1 minute)
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: _common and the scripts imported below
import _common as C

ROOT = Path(__file__).resolve().parents[2]

EXPERIMENT = """
[experiment]
name = "variance-components"
duration = "{duration}s"
max_warmup = "{warmup}s"

[dataset]
tables = {tables}
table_size = {table_size}

[workload]
test = "oltp_read_only"
threads = [2]
"""


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"duration": 3, "warmup": 3, "tables": 1, "table_size": 2000, "rounds": 3, "budget": "10m"}
    return {"duration": 20, "warmup": 10, "tables": 4, "table_size": 100_000, "rounds": 8, "budget": "10m"}


def run(args: argparse.Namespace) -> None:
    cfg = settings(args.quick)
    machine = C.Machine()
    C.say(
        f"bench/archive/variance_components.py ({'quick' if args.quick else 'full'}): oltp_read_only, 2 threads, "
        f"{cfg['tables']} x {cfg['table_size']:,} rows, max warm-up {cfg['warmup']} s, window {cfg['duration']} s, "
        f"{cfg['rounds']} A/A rounds"
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="plbench-calibrate-") as tmp:
        toml = Path(tmp) / "workload.toml"
        toml.write_text(EXPERIMENT.format(**cfg), encoding="utf-8")
        results = Path(args.results) if args.results else Path(tmp) / "results"
        argv = [sys.executable, "-m", "perflab", "calibrate", str(toml), "--rounds", str(cfg["rounds"])]
        argv += ["--budget", cfg["budget"], "-o", str(results), "--format", "json"]
        env = {**os.environ, "PERFLAB_CACHE": str(Path(tmp) / "cache")}
        done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
        if done.returncode != 0:
            raise C.BenchError(f"perflab calibrate exited {done.returncode}:\n{done.stderr[-3000:]}")
        doc = json.loads(done.stdout)
    info = machine.finish()
    report(cfg, doc, info, time.monotonic() - started)


def report(cfg: dict[str, Any], doc: dict[str, Any], info: dict[str, Any], wall: float) -> None:
    dec, plan, own = doc["variance"], doc["plan"], doc["at_file_duration"]
    rows = [
        [c["name"], C.pct(c["sd"]), C.pct(c["fraction"], 1), C.pct(c["fraction_unpaired"], 1)]
        for c in dec["components"]
    ]
    C.say(C.table(["component", "sd of log QPS", "share, paired", "share, unpaired"], rows))
    C.say(f"advice: {dec['advice']}")
    C.say(
        f"per-second variance x autocorrelation time {dec['per_second_variance']:.3g} s "
        f"(lag-1 autocorrelation {dec['lag1_autocorrelation']:.2f}); per-cell overhead {doc['noise']['overhead']:.1f} s"
    )
    C.say(
        f"10 minutes of two variants detect {C.pct(plan['effect'])} with {plan['duration']} s windows x "
        f"{plan['rounds']} rounds (best); {C.pct(own['effect'])} with the file's {own['duration']:.0f} s x "
        f"{own['rounds']} rounds"
    )
    C.say(C.Machine.describe(info))
    C.final_json(
        {
            "bench": "variance_components",
            "settings": cfg,
            "variance": dec,
            "noise": doc["noise"],
            "plan": plan,
            "at_file_duration": own,
            "results": doc["results"],
            "other_cpu_cores": info["foreign_cpu_cores"],
            "machine": info,
            "wall_s": round(wall, 1),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 3 rounds of 3 s windows on a tiny dataset")
    parser.add_argument("--results", metavar="DIR", help="keep the A/A results directory here (perflab report DIR)")
    args = parser.parse_args()
    C.main_guard(lambda: run(args))


if __name__ == "__main__":
    main()
