"""Builds as variants (issue 10): build times, and what PGO is worth, beside a layout control.

What it measures, on this machine:
  1. the cold build time of each source build of the experiment, as perflab measured it when it
     built them (build.json's build_s; `perflab build` first makes any that are missing, niced,
     and that time is the cold time), and the PGO training's length;
  2. the cached time: `perflab build FILE` again, every build in the cache (checks only);
  3. the experiment itself (default examples/pgo.toml: package, source, pgo, aligned,
     interleaved, 5 repeats), and from `perflab compare --format json` the ratios that answer
     the questions: source/package ("built by us" vs Debian's build), pgo/source (what PGO is
     worth), aligned/source (the layout control: same source and flags, functions aligned to
     64 bytes; a layout effect, not a compiler effect) and pgo/aligned. Each with its 95% CI and
     verdict. The goal (issue 10): PGO `faster` with its interval clear of 1, and larger than
     the layout control's effect.
Every cell's other_cpu_cores is printed (max and mean): a figure from a busy machine measures
the neighbours.

Run: python3 bench/builds.py                         # examples/pgo.toml: builds (once), ~12 min of cells
     python3 bench/builds.py --experiment examples/frame-pointers.toml --baseline build=source
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C

from perflab import spec
from perflab.builds import read_manifest
from perflab.cache import cache_root


def perflab(*args: str, capture: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perflab", *args], capture_output=capture, text=True, check=False)


def build_times() -> list[list[object]]:
    """Every source build in the cache: its stage, the tail of its flags, its recorded build time."""
    rows: list[list[object]] = []
    for home in sorted((cache_root() / "builds").glob("*")):
        build = read_manifest(home)
        if build is None or build.kind != "source" or build.recipe is None:
            continue
        took = build.extra.get("build_s")
        rows.append(
            [build.extra.get("stage"), build.recipe["flags"]["CXXFLAGS"][-70:], took, build.extra.get("resumed")]
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default="examples/pgo.toml")
    parser.add_argument("--baseline", default="build=source")
    parser.add_argument("--keep", type=Path, help="keep the run's results directory here (default: a temporary one)")
    args = parser.parse_args()
    spec.load(args.experiment)  # a bad file fails here, before anything is built
    started = time.monotonic()
    made = perflab("build", args.experiment, capture=False)
    first = time.monotonic() - started
    if made.returncode != 0:
        raise C.BenchError(f"perflab build failed (exit {made.returncode})")
    started = time.monotonic()
    again = perflab("build", args.experiment)
    cached = time.monotonic() - started
    if again.returncode != 0 or "error" in again.stdout:
        raise C.BenchError(f"perflab build, cached, failed: {again.stdout}{again.stderr}")
    C.say(f"perflab build: first call {first / 60:.1f} min, again with every build cached {cached:.1f} s")
    C.say(C.table(["stage", "flags (tail)", "build_s", "resumed (build_s: the last part only)"], build_times()))
    with tempfile.TemporaryDirectory(prefix="plbench-builds-") as tmp:
        out = args.keep or Path(tmp) / "results"
        started = time.monotonic()
        ran = perflab("run", args.experiment, "-o", str(out), capture=False)
        cells_s = time.monotonic() - started
        if ran.returncode not in (0, 1):
            raise C.BenchError(f"perflab run failed (exit {ran.returncode})")
        doc = json.loads(perflab("export", str(out), "--format", "json").stdout)
        compared = json.loads(perflab("compare", str(out), "--baseline", args.baseline, "--format", "json").stdout)
    others = [c["resources"].get("other_cpu_cores") or 0.0 for c in doc["cells"] if c["status"] == "ok"]
    C.say(f"cells: {cells_s / 60:.1f} min; other_cpu_cores max {max(others):.2f}, mean {sum(others) / len(others):.3f}")
    rows = []
    for row in compared:  # `perflab compare --format json`: a list of Comparison rows
        if row["kind"] != "variant" or row["metric"] != "qps":
            continue
        ci = "n/a" if row["ci_low"] is None else f"{row['ci_low']:.3f}-{row['ci_high']:.3f}"
        ratio = None if row["ratio"] is None else round(row["ratio"], 4)
        rows.append([",".join(row["variant"].values()), row["threads"], ratio, ci, row["verdict"]])
    C.say(C.table(["variant vs " + args.baseline, "threads", "QPS ratio", "95% CI", "verdict"], rows))
    C.final_json(
        {"build_first_s": first, "build_cached_s": cached, "cells_s": cells_s, "comparisons": rows, "others": others}
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
