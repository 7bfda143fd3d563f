"""Do this VM's vCPUs change speed together? perflab's host-speed canary, one thread pinned to
each CPU, on an otherwise idle guest.

Why: `[observe] host_speed` first ran one unpinned canary thread, which times whichever CPU the
scheduler gives it; the server and sysbench run on every CPU. If the CPUs' speeds move apart,
one thread's figure is a noisy measure of what the workload ran on, and a covariate built on it
is weakened (its slope attenuated, its correlation with QPS lower).

What: perflab/observers/host_speed.c with every allowed CPU named (what a run starts),
SECONDS long; per CPU, the median CPU time of its fixed work over consecutive windows of 1, 5,
10 and 15 s; printed: each CPU's sd of log speed over those windows and the correlation between
the CPUs' (for more than two CPUs, every pair's mean). Its own CPU use is in other_cpu_cores'
sense the only load: run it on an idle machine.

Run: python3 bench/archive/vcpu_speeds.py [--seconds 180]
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: _common and the scripts imported below
import _common as C

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perflab.observers import host_speed

WINDOWS = (1, 5, 10, 15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=180, help="how long the canary runs (default 180)")
    args = parser.parse_args()

    def run() -> None:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise C.BenchError("one CPU: nothing to correlate")
        machine = C.Machine()
        with tempfile.TemporaryDirectory(prefix="plbench-vcpu-") as tmp:
            binary = host_speed.build(Path(tmp))
            with open(Path(tmp) / "canary.txt", "w+", encoding="ascii") as out:
                child = subprocess.Popen([str(binary), str(host_speed.PERIOD_MS), *map(str, cpus)], stdout=out)
                try:
                    time.sleep(args.seconds)
                finally:
                    child.kill()
                    child.wait()
                out.seek(0)
                samples = host_speed.parse(out.read())
        info = machine.finish()
        start = min(s[0] for s in samples)
        found = {}
        rows = []
        for w in WINDOWS:
            logs: dict[int, dict[int, float]] = {cpu: {} for cpu in cpus}
            for cpu in cpus:
                by_window: dict[int, list[float]] = {}
                for at, work, c, _ in samples:
                    if c == cpu:
                        by_window.setdefault(int((at - start) // w), []).append(work)
                logs[cpu] = {k: -math.log(statistics.median(v)) for k, v in by_window.items() if len(v) >= 2 * w}
            common = sorted(set.intersection(*(set(v) for v in logs.values())))
            if len(common) < 4:
                continue
            sds = [statistics.stdev([logs[cpu][k] for k in common]) for cpu in cpus]
            rs = [statistics.correlation([logs[a][k] for k in common], [logs[b][k] for k in common])
                  for a, b in itertools.combinations(cpus, 2)]  # fmt: skip
            found[str(w)] = {"windows": len(common), "sd_log_speed": [C.rnd(s) for s in sds],
                             "r": C.rnd(statistics.fmean(rs), 3)}  # fmt: skip
            rows.append([f"{w} s", len(common), " / ".join(C.pct(s, 1) for s in sds), found[str(w)]["r"]])
        C.say(C.table(["window", "windows", "sd of log speed per CPU", "r between CPUs"], rows))
        C.say(C.Machine.describe(info))
        C.final_json({"bench": "vcpu_speeds", "cpus": cpus, "seconds": args.seconds, "windows": found,
                      "machine": info})  # fmt: skip

    C.main_guard(run)


if __name__ == "__main__":
    main()
