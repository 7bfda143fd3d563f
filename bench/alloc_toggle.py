"""What [observe] alloc costs, resolved: each part switched on and off within one server run.

bench/alloc_overhead.py compares whole cells (a fresh server each); on this VM their QPS differs
by ±8% from restart to restart, so 12 rounds leave 95% intervals of ±8%, far wider than the 2%
goal. Here, as in bench/profile_overhead.py --mode toggle, one server (the counter preloaded)
runs one long sysbench run while a part is switched on and off every 3 s; each on-block's QPS is
compared with its two neighbouring off-blocks, seconds apart:
  count     the counter counting every call vs forwarding uncounted (the `paused` word);
  stacks    one sampled stack per 512 KiB on average vs none (counting on throughout);
  syscalls  the kernel's syscall tracepoints (perf, as [observe] alloc records them) vs none;
  count+syscalls  both together: counting mode, `alloc = { stacks = false }`.
What it cannot see: the counter's constant cost when loaded but paused (one indirect call and a
load per allocation); bench/alloc_overhead.py's preload/none ratio bounds that (0.997 with a wide
interval). Workload as in bench/profile_overhead.py (oltp_read_only, 2 threads); the goals
(issue 11): counting mode (count + syscalls) <= 2%, with stacks <= 3%.

Run: python3 bench/alloc_toggle.py                 # 4 x 180 s (about 13 minutes)
     python3 bench/alloc_toggle.py --seconds 30    # a smoke test
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import _common as C
import profile_overhead as P

from perflab.servers import dataset, mysqld_dataset
from perflab.observers import alloc
from perflab.observers.syscalls import SyscallRecorder
from perflab.workloads import sysbench
from perflab.servers.mysqld import Mysqld

GOALS = {"count": 0.02, "stacks": 0.03, "syscalls": 0.02, "count+syscalls": 0.02}


class Counting:
    """The counter counting (on) or forwarding uncounted (paused)."""

    def __init__(self, file: Path) -> None:
        self.file = file

    def __enter__(self) -> Counting:
        self.resume()
        return self

    def __exit__(self, *exc: object) -> None:
        self.resume()

    def pause(self) -> None:
        alloc.pause(self.file, True)

    def resume(self) -> None:
        alloc.pause(self.file, False)


class Stacks(Counting):
    """Sampled stacks on (one per 512 KiB on average) or off; counting stays on."""

    def __exit__(self, *exc: object) -> None:
        self.pause()

    def pause(self) -> None:
        alloc.sample(self.file, 0)

    def resume(self) -> None:
        alloc.sample(self.file, alloc.DEFAULT_PERIOD)


class Together:
    """Counting mode as [observe] alloc = { stacks = false } runs it: the counter and the syscall
    tracepoints, switched on and off together."""

    def __init__(self, file: Path, pid: int, work: Path) -> None:
        self.parts = [Counting(file), SyscallRecorder(pid, work)]

    def __enter__(self) -> Together:
        for part in self.parts:
            part.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        for part in reversed(self.parts):
            part.__exit__(*exc)

    def pause(self) -> None:
        for part in self.parts:
            part.pause()

    def resume(self) -> None:
        for part in self.parts:
            part.resume()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=180, help="sysbench seconds per part (default 180)")
    args = parser.parse_args()
    machine = C.Machine()
    got: dict[str, list[float]] = {}
    with C.workdir(machine) as work:
        snap = mysqld_dataset.prepare(
            work,
            sysbench.Prepare("oltp_read_only", P.TABLES, P.TABLE_SIZE, P.OPTIONS),
            server_options={},
            log=work / "prepare.txt",
        )
        dataset.restore(snap, work / "srv" / "data")
        counters = work / "srv" / "alloc-counters.bin"
        (work / "srv").mkdir(exist_ok=True)
        alloc.create(counters)
        shim = alloc.build(work / "alloc-build")
        env = {"PERFLAB_ALLOC_FILE": str(counters)}
        options = {"innodb_buffer_pool_size": snap.buffer_pool}
        with Mysqld(work / "srv", work / "srv" / "data", options, env=env, tracer=shim) as server:
            warm = sysbench.argv(
                "oltp_read_only",
                "run",
                socket=server.socket,
                tables=P.TABLES,
                table_size=P.TABLE_SIZE,
                threads=P.THREADS,
                seconds=10,
                options=P.OPTIONS,
            )
            subprocess.run(warm, capture_output=True, check=True, timeout=120)
            P.TOGGLED.update(
                {
                    "count": lambda pid, w: Counting(counters),
                    "stacks": lambda pid, w: Stacks(counters),
                    "syscalls": lambda pid, w: SyscallRecorder(pid, _mkdir(w)),
                    "count+syscalls": lambda pid, w: Together(counters, pid, _mkdir(w)),
                }
            )
            for name in GOALS:
                got[name] = P.toggled(server, name, args.seconds, work)["ratios"]
                C.say(
                    f"{name}: {len(got[name])} on-blocks, QPS ratio to neighbouring off-blocks {C.mean(got[name]):.4f}"
                )
            counted = alloc.read(counters)
            C.say(f"the counter counted {counted.total_calls('malloc'):,} malloc calls over the run (it was loaded)")
    info = machine.finish()
    report(got, info)
    return 0


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def report(got: dict[str, list[float]], info: Any) -> None:
    rows, summary = [], {}
    for name, ratios in got.items():
        ci, goal = C.ci95(ratios), GOALS[name]
        verdict = "MET" if ci and ci[0] >= 1 - goal else "MISSED" if ci and ci[1] < 1 - goal else "UNRESOLVED"
        interval = "-" if ci is None else f"{ci[0]:.4f}-{ci[1]:.4f}"
        rows.append(
            [name, len(ratios), f"{C.mean(ratios):.4f}", interval, C.pct(1 - C.mean(ratios), 2), f"{goal:.0%}", verdict]
        )
        summary[name] = {
            "blocks": len(ratios),
            "ratio": C.rnd(C.mean(ratios)),
            "ci95": ci,
            "goal": goal,
            "verdict": verdict,
        }
    C.say(C.table(["part", "on-blocks", "QPS ratio", "95% CI", "cost", "goal", "verdict"], rows))
    C.say(C.Machine.describe(info))
    C.final_json({"bench": "alloc_toggle", "block_s": P.BLOCK_S, "parts": summary, "machine": info})


if __name__ == "__main__":
    sys.exit(main())
