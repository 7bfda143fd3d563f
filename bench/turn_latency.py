#!/usr/bin/env python3
"""What latency within turns costs the client: sysbench running an empty event, plainly and
through the interleaved design's wrapper (perflab/workloads/turns.lua), interleaved, in the
same run; prints the added time an event (the figure docs/experiment.md quotes) and the ratio.

    python3 bench/turn_latency.py [--events 3000000] [--rounds 5]

No database: the event does nothing, so what is measured is the wrapper alone (two
clock_gettime calls, a histogram update in shared memory), against sysbench's own loop. A
point select takes 30-70 µs on this VM: the added figure over that is the share of the client's
time the wrapper takes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perflab.observers.resources import machine_busy_s
from perflab.places.proc import clean_env
from perflab.workloads.turn_latency import WRAPPER, TurnClock


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=3_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="perflab-bench-") as tmp:
        script = Path(tmp) / "empty.lua"
        script.write_text("function event() end\n")
        clock = TurnClock.create(Path(tmp) / "turns", threads=1)
        common = [f"--events={args.events}", "--time=0", "--threads=1", "run"]
        plain_env, wrapped_env = clean_env(), clean_env(clock.environment(str(script)))
        plain, wrapped = [], []
        busy0, t0 = machine_busy_s(), time.monotonic()
        ours0 = os.times()
        for _ in range(args.rounds):  # interleaved: the host's speed falls on both alike
            plain.append(timed(["sysbench", str(script), *common], plain_env))
            wrapped.append(timed(["sysbench", str(WRAPPER), *common], wrapped_env))
        wall = time.monotonic() - t0
        ours1 = os.times()
        children = (ours1.children_user + ours1.children_system) - (ours0.children_user + ours0.children_system)
        own = (ours1.user + ours1.system) - (ours0.user + ours0.system)
        other = max(0.0, machine_busy_s() - busy0 - children - own) / wall
        events = clock.read().events
        clock.close()
    assert events == args.events * args.rounds, f"the wrapper counted {events} events"
    added_ns = [(w - p) / args.events * 1e9 for p, w in zip(plain, wrapped, strict=True)]
    print(f"events an empty-event run: {args.events}, rounds: {args.rounds}, other_cpu_cores: {other:.3f}")
    print(
        f"plain sysbench:  median {statistics.median(plain):.3f} s  ({statistics.median(plain) / args.events * 1e9:.0f} ns an event)"
    )
    print(f"through turns.lua: median {statistics.median(wrapped):.3f} s")
    print(
        f"added an event: median {statistics.median(added_ns):.0f} ns (rounds: {', '.join(f'{x:.0f}' for x in added_ns)})"
    )
    print(f"ratio wrapped/plain: {statistics.median(w / p for p, w in zip(plain, wrapped, strict=True)):.2f}")


if __name__ == "__main__":
    main()
