"""Is this VM's restart and drift noise the host's? A canary's speed against each cell's QPS.

Why: bench/fidelity.py measured 9% restart noise and 7% drift on oltp_read_only, with the
machine idle by every measure the guest has (other processes below 0.01 cores, steal 0.3%),
and the slow cells were the jittery ones. A register-only spin loop on this VM, timed in its
own thread CPU time, ran from 0.072 to 0.34 s for the same work within 150 s (10-second means
0.085-0.200): the vCPU itself runs slower at times (the host's other load or clock), which no
guest counter shows.

What: bench/archive/canary.c spins ~1 ms of fixed work every 200 ms (0.5% of a core) and logs the CPU
time it took, while one `perflab run` as a user runs it measures two identical variants A and B
(oltp_read_only, 2 threads, 2 x 50k rows, a fixed 5 s warm-up, 10 s windows, a fresh server per
cell, ROUNDS randomized rounds). Per cell, the canary's speed over the cell's last `duration`
seconds (the median of 1 / CPU time per unit). Printed:
  - the canary's spread over the run (CV of its per-cell speed, min-max);
  - the correlation of log QPS with log canary speed across cells (variant means removed), and
    the slope (1.0: QPS proportional to the vCPU's speed);
  - the sd of log QPS within a variant before and after that regression, and the A/B paired
    interval half-width before and after (an estimate of what a host-speed covariate could buy;
    the slope is fitted on the same cells, so this is optimistic by one degree of freedom).
Its CPU cost is shown too. A figure, not a feature: perflab does not adjust QPS by it.

Run: python3 bench/archive/host_speed.py --results DIR     # ~6 minutes, idle machine
     python3 bench/archive/host_speed.py --quick           # smoke test (~2 minutes)
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: _common and the scripts imported below
import _common as C

ROOT = Path(__file__).resolve().parents[2]
CANARY = Path(__file__).resolve().parent / "canary.c"
PERIOD_MS = 200

VARIANTS = """\
[variants.copy]
a = {}
b = { env = { PERFLAB_AA = "1" } }
"""


def samples(path: Path) -> list[tuple[float, float]]:
    out = []
    for line in path.read_text(encoding="ascii").splitlines():
        wall, cpu = line.split()
        if float(cpu) > 0:
            out.append((float(wall), float(cpu)))
    return out


def cell_speed(cell: dict[str, Any], canary: list[tuple[float, float]], duration: int) -> float | None:
    end = datetime.fromisoformat(cell["ended_at"]).timestamp()
    mine = [1 / cpu for wall, cpu in canary if end - duration - 1 <= wall <= end]
    return statistics.median(mine) if len(mine) >= 5 else None


def paired_half_width(logs: dict[int, dict[str, float]]) -> float | None:
    diffs = [r["b"] - r["a"] for r in logs.values() if "a" in r and "b" in r]
    if len(diffs) < 3:
        return None
    return C.t95(len(diffs)) * statistics.stdev(diffs) / math.sqrt(len(diffs))


def analyse(doc: dict[str, Any], canary: list[tuple[float, float]], duration: int) -> dict[str, Any]:
    rows = []
    for c in doc["cells"]:
        if c["status"] != "ok" or c.get("settled") in (False, 0):
            continue
        speed = cell_speed(c, canary, duration)
        if speed is not None:
            rows.append((c["variant"]["copy"], c["repeat"], math.log(c["summary"]["qps"]), math.log(speed)))
    if len(rows) < 6:
        raise C.BenchError(f"only {len(rows)} settled cells with canary samples")
    mean_q = {v: C.mean([q for w, _, q, _ in rows if w == v]) for v in ("a", "b")}
    mean_s = {v: C.mean([s for w, _, _, s in rows if w == v]) for v in ("a", "b")}
    dq = [q - mean_q[v] for v, _, q, _ in rows]
    ds = [s - mean_s[v] for v, _, _, s in rows]
    slope = sum(x * y for x, y in zip(ds, dq)) / sum(x * x for x in ds)
    r = statistics.correlation(ds, dq)
    before: dict[int, dict[str, float]] = {}
    after: dict[int, dict[str, float]] = {}
    for v, k, q, s in rows:
        before.setdefault(k, {})[v] = q
        after.setdefault(k, {})[v] = q - slope * (s - mean_s[v])
    residual = [y - slope * x for x, y in zip(ds, dq)]
    speeds = [math.exp(s) for *_, s in rows]
    hw_before, hw_after = paired_half_width(before), paired_half_width(after)
    return {
        "cells": len(rows), "canary_cv": C.rnd(C.cv(speeds), 4),
        "canary_min_max": [C.rnd(min(speeds) / max(speeds), 3), 1.0],
        "correlation": C.rnd(r, 3), "slope": C.rnd(slope, 3),
        "sd_log_qps_before": C.rnd(statistics.stdev(dq), 4), "sd_log_qps_after": C.rnd(statistics.stdev(residual), 4),
        "paired_half_width_before": C.rnd(hw_before, 4), "paired_half_width_after": C.rnd(hw_after, 4),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, help="rounds (default 10; --quick 4)")
    parser.add_argument("--results", metavar="DIR", help="keep the results directory here")
    parser.add_argument("--quick", action="store_true", help="smoke test: 4 rounds of 3 s windows")
    args = parser.parse_args()
    cfg = {"duration": 10, "warmup": 5, "tables": 2, "table_size": 50_000, "rounds": args.rounds or 10}
    if args.quick:
        cfg = {"duration": 3, "warmup": 2, "tables": 1, "table_size": 2000, "rounds": args.rounds or 4}

    def run() -> None:
        started = time.monotonic()
        machine = C.Machine()
        with C.workdir(machine) as tmp:
            binary = tmp / "canary"
            subprocess.run(["cc", "-O2", "-o", str(binary), str(CANARY)], check=True)
            log = tmp / "canary.log"
            toml = tmp / "host-speed.toml"
            toml.write_text(C.read_only_experiment("host-speed", cfg, VARIANTS), encoding="utf-8")
            results = Path(args.results) if args.results else Path(tempfile.mkdtemp(prefix="plbench-hostspeed-"))
            with log.open("w", encoding="ascii") as out:
                canary = subprocess.Popen([str(binary), "86400", str(PERIOD_MS)], stdout=out)
                try:
                    C.cli("run", str(toml), "-o", str(results), "--seed", "5")
                finally:
                    canary.terminate()
                    canary.wait()
            probe = samples(log)
            (results / "canary.log").write_text(log.read_text(encoding="ascii"), encoding="ascii")  # kept with the run
        doc = json.loads(C.cli("export", str(results)))
        out = analyse(doc, probe, cfg["duration"])
        out["canary_cpu_cores"] = C.rnd(sum(cpu for _, cpu in probe) / (probe[-1][0] - probe[0][0]), 4)
        out["other_cpu_cores"] = C.other_cpu_cores(doc["cells"])
        info = machine.finish()
        C.say(C.table(["figure", "value"], [[k, v] for k, v in out.items()]))
        C.say("other_cpu_cores counts the canary as another process (about its canary_cpu_cores)")
        C.say(f"results: {results}; {(time.monotonic() - started) / 60:.1f} min")
        C.say(C.Machine.describe(info))
        C.final_json({"bench": "host_speed", "settings": cfg, **out, "machine": info})

    C.main_guard(run)


if __name__ == "__main__":
    main()
