"""Where does an interleaved turn's noise come from? (issue 12: the interleaved design's noise)

Why: perflab's interleaved runs (design = "interleaved") varied more a round than the probe
bench/interleave.py in session 15, and a first bisection pointed at the counters perflab reads
after every turn. This script measures that directly, and the host's own share of a turn.

What: two fresh identical servers (the installed mariadbd, oltp_read_only at 2 threads with
uniform keys, 2 tables x 50k rows, a copy of one prepared datadir each, on tmpfs); their clients
take 1 s turns (the other stopped with SIGSTOP), after 5 warm-up turns each. The turns come in
blocks of TURNS turns per side, each block in a mode drawn at random (seeded):
  read    the server's counters (the lean SHOW GLOBAL STATUS perflab reads) after every turn
  noread  the counters at the block's two ends only (as the probe)
Per turn, always: the machine's steal time (/proc/stat: CPU the hypervisor gave other guests
while ours wanted it) and the server's CPU, both from /proc (no contact with the server).
Printed:
  - per mode, the sd of a block's log-ratio B/A, and the CV of the server's CPU per turn;
  - over the read blocks' turns (each turn's own QPS): the per-second sd of log(A/B) between
    the two sides' turns of one cycle (their own noise: what they share cancels), the mean,
    median, 90th percentile and max of the steal, and the correlation of a turn's log QPS
    with its steal and with its server's CPU;
  - the own per-second sd and the read blocks' log-ratio sd once each turn is adjusted by its
    steal with the slope fitted over the turns;
  - other_cpu_cores over the run (figures from a busy machine are not this machine's noise).

Run: python3 bench/archive/turn_noise.py [--blocks 30] [--seed N]   # ~11 minutes, idle machine
     python3 bench/archive/turn_noise.py --quick                      # smoke test: 4 blocks of 3 turns (~1 minute)
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: _common and the scripts imported below
import _common as C

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perflab.workloads import client
from perflab.servers import dataset, mysqld_dataset
from perflab.places.procfs import process_cpu_s
from perflab.observers.resources import machine_steal_s
from perflab.observers.status import StatusSampler
from perflab.places.proc import Child, clean_env
from perflab.workloads import sysbench
from perflab.servers.mysqld import Mysqld

TEST, THREADS, OPTIONS = "oltp_read_only", 2, {"rand_type": "uniform"}
MODES = ("read", "noread")


class Side:
    """A fresh server on its copy of the snapshot, its status client, its client (stopped)."""

    def __init__(self, snap: dataset.Snapshot, workdir: Path, name: str, stack: ExitStack, cfg: dict[str, Any]) -> None:
        rundir = workdir / name
        rundir.mkdir()
        dataset.restore(snap, rundir / "data")
        self.name = name
        self.server = stack.enter_context(
            Mysqld(rundir, rundir / "data", {"innodb_buffer_pool_size": snap.buffer_pool})
        )
        self.sampler = StatusSampler(self.server.socket, lean=True).connect()
        stack.callback(self.sampler.close)
        argv = sysbench.argv(TEST, "run", socket=self.server.socket, tables=cfg["tables"], table_size=cfg["rows"],
                             threads=THREADS, seconds=36000, options=OPTIONS)  # fmt: skip
        out = (rundir / "sysbench.txt").open("w", encoding="utf-8")
        stack.callback(out.close)
        self.client = Child(argv, env=clean_env(), stdout=out)
        stack.callback(self.client.kill)

    def questions(self) -> float:
        self.sampler.sample()
        return self.sampler.samples[-1][1]["Questions"]

    def turn(self, read: bool) -> dict[str, Any]:
        """One second of its client's running; what the machine and its server did meanwhile."""
        cpu, steal = process_cpu_s(self.server.pid), machine_steal_s()
        t0 = time.monotonic()
        self.client.signal_group(signal.SIGCONT)
        time.sleep(max(0.0, t0 + 1.0 - time.monotonic()))
        self.client.signal_group(signal.SIGSTOP)
        ran = time.monotonic() - t0
        stolen, used = machine_steal_s() - steal, process_cpu_s(self.server.pid) - cpu
        return {"side": self.name, "ran": ran, "q": self.questions() if read else None, "steal": stolen / ran,
                "cpu": used / ran}  # fmt: skip


def block(sides: list[Side], turns: int, mode: str, first: int) -> dict[str, Any]:
    """`turns` turns of each side, `first` starting; QPS of each from the block's end reads."""
    order = sides[first:] + sides[:first]
    start = {s.name: s.questions() for s in sides}
    done = [s.turn(mode == "read") for _ in range(turns) for s in order]
    end = {s.name: s.questions() for s in sides}
    ran = {s.name: sum(t["ran"] for t in done if t["side"] == s.name) for s in sides}
    qps = {n: (end[n] - start[n]) / ran[n] for n in end}
    return {"mode": mode, "qps": qps, "log_ratio": math.log(qps["b"] / qps["a"]), "turns": done, "start": start}


def turn_rates(blk: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The read block's cycles as (A's turn, B's turn), each with its own `log_qps`."""
    last = dict(blk["start"])
    cycles: list[dict[str, dict[str, Any]]] = []
    for t in blk["turns"]:
        t = {**t, "log_qps": math.log((t["q"] - last[t["side"]]) / t["ran"])}
        last[t["side"]] = t["q"]
        if not cycles or t["side"] in cycles[-1]:
            cycles.append({})
        cycles[-1][t["side"]] = t
    return [(c["a"], c["b"]) for c in cycles if len(c) == 2]


def analyse(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"modes": {}}
    for mode in MODES:
        mine = [b for b in blocks if b["mode"] == mode]
        cpu = [t["cpu"] for b in mine for t in b["turns"]]
        out["modes"][mode] = {
            "blocks": len(mine),
            "log_ratio_sd": C.rnd(C.stdev([b["log_ratio"] for b in mine])),
            "server_cpu_per_turn_cv": C.rnd(C.cv(cpu)) if len(cpu) > 1 else None,
        }
    reads = [b for b in blocks if b["mode"] == "read"]
    pairs = [p for b in reads for p in turn_rates(b)]
    if len(pairs) < 3:
        return out
    turns = [t for p in pairs for t in p]
    steal = sorted(t["steal"] for t in turns)
    logs = [t["log_qps"] for t in turns]
    slope = statistics.linear_regression([t["steal"] for t in turns], logs).slope if len(set(steal)) > 1 else 0.0

    def diffs(cycles: list[tuple[dict[str, Any], dict[str, Any]]], b: float) -> list[float]:
        """log(A/B) of each cycle's turns, each turn's log QPS adjusted by b x its steal."""
        return [(a["log_qps"] + b * a["steal"]) - (x["log_qps"] + b * x["steal"]) for a, x in cycles]

    def own_sd(b: float) -> float | None:
        return C.rnd(math.sqrt(statistics.variance(diffs(pairs, b)) / 2))

    def block_sd(b: float) -> float | None:
        # B over A, as log_ratio
        return C.rnd(C.stdev([-statistics.fmean(diffs(turn_rates(blk), b)) for blk in reads]))

    def corr(xs: list[float]) -> float | None:
        return C.rnd(statistics.correlation(xs, logs)) if len(set(xs)) > 1 else None

    out["turns"] = {
        "pairs": len(pairs),
        "steal_cores": {"mean": C.rnd(statistics.fmean(steal), 3), "median": C.rnd(steal[len(steal) // 2], 3),
                        "p90": C.rnd(steal[int(0.9 * (len(steal) - 1))], 3), "max": C.rnd(steal[-1], 3)},
        "corr_log_qps_steal": corr([t["steal"] for t in turns]),
        "corr_log_qps_server_cpu": corr([t["cpu"] for t in turns]),
        "slope_log_qps_per_steal_core": C.rnd(slope),
        "own_per_second_sd": own_sd(0.0), "own_per_second_sd_steal_adjusted": own_sd(-slope),
        "read_block_log_ratio_sd": block_sd(0.0), "read_block_log_ratio_sd_steal_adjusted": block_sd(-slope),
    }  # fmt: skip
    return out


def run(args: argparse.Namespace) -> None:
    cfg = {"tables": 2, "rows": 50_000, "warmup": 5, "turns": 10, "blocks": args.blocks, "seed": args.seed}
    if args.quick:
        cfg.update(tables=1, rows=2000, warmup=1, turns=3, blocks=4)
    rng = random.Random(args.seed)
    machine = C.Machine()
    blocks: list[dict[str, Any]] = []
    with C.workdir(machine) as workdir, ExitStack() as stack:
        C.say(f"seed {args.seed} (--seed reruns this order); preparing {cfg['tables']} x {cfg['rows']} rows ...")
        snap = mysqld_dataset.prepare(
            workdir,
            sysbench.Prepare(TEST, cfg["tables"], cfg["rows"], OPTIONS),
            server_options={},
            log=workdir / "prepare.txt",
        )
        sides = [Side(snap, workdir, name, stack, cfg) for name in "ab"]
        for side in sides:
            client.wait_threads_started(workdir / side.name / "sysbench.txt", side.client, 60)
            side.client.signal_group(signal.SIGSTOP)
        for _ in range(cfg["warmup"]):
            for side in sides:
                side.turn(read=False)
        pids = [p for s in sides for p in (s.server.pid, s.client.pid, s.sampler.pid) if p]
        mark = C.cpu_mark()
        for i in range(cfg["blocks"]):
            blk = block(sides, cfg["turns"], rng.choice(MODES), rng.randrange(2))
            blocks.append(blk)
            C.say(f"block {i + 1}/{cfg['blocks']} {blk['mode']:6s} A {blk['qps']['a']:7.0f} B {blk['qps']['b']:7.0f} "
                  f"q/s  B/A {math.exp(blk['log_ratio']):.4f}")  # fmt: skip
        other = C.foreign_cores(mark, C.cpu_mark(pids))
    found = analyse(blocks)
    found["other_cpu_cores"] = other
    C.say(C.table(["mode", "blocks", "sd of a block's log B/A", "server CPU a turn, CV"],
                  [[m, r["blocks"], C.pct(r["log_ratio_sd"]), C.pct(r["server_cpu_per_turn_cv"])]
                   for m, r in found["modes"].items()]))  # fmt: skip
    t = found.get("turns")
    if t:
        s = t["steal_cores"]
        C.say(
            f"steal a turn (cores): mean {s['mean']} median {s['median']} p90 {s['p90']} max {s['max']}; "
            f"corr(log QPS, steal) {t['corr_log_qps_steal']}, corr(log QPS, server CPU) "
            f"{t['corr_log_qps_server_cpu']}; slope {t['slope_log_qps_per_steal_core']} log QPS a stolen core"
        )
        C.say(f"own per-second sd {C.pct(t['own_per_second_sd'])} -> {C.pct(t['own_per_second_sd_steal_adjusted'])} "
              f"adjusted for steal; read blocks' log-ratio sd {C.pct(t['read_block_log_ratio_sd'])} -> "
              f"{C.pct(t['read_block_log_ratio_sd_steal_adjusted'])}")  # fmt: skip
    C.say("other_cpu_cores " + ("?" if other is None else f"{other:.3f}"))
    info = machine.finish()
    C.say(C.Machine.describe(info))
    C.final_json({"bench": "turn_noise", "config": cfg, **found, "machine": info})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=30, help="blocks of turns (default 30; --quick 4)")
    parser.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4)), help="modes and who starts")
    parser.add_argument("--quick", action="store_true", help="smoke test: 4 blocks of 3 turns, a tiny dataset")
    args = parser.parse_args()
    if args.blocks < 2:
        parser.error("--blocks must be at least 2")
    C.main_guard(lambda: run(args))


if __name__ == "__main__":
    main()
