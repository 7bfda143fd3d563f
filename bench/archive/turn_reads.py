"""Do perflab's own reads between 100 ms turns disturb the servers? (issue 12: why perflab's
interleaved cells varied more than the probe's)

Why: at 100 ms turns perflab's interleaved A/A pairs varied 3.4-5.5% a round where the probe
bench/server_noise.py, on fresh servers with the same turns, varied 1.8%; a perflab cell's
per-second log-ratio against its partner varied 10-17%. Between two turns perflab read the
paused server's counters from /proc (ProcCounters.read: /proc/PID/stat and every thread's
/proc/PID/task/TID/status, for the context switches), the other servers' CPU, the machine's
steal, and once a second the server's status counters through a kept client. This probe adds
each of those reads to the probe's turns and nothing else.

What: two fresh identical servers a round (the installed mariadbd, oltp_read_only at 2 threads
with uniform keys, 2 tables x 50k rows, a copy of one prepared datadir each on tmpfs), their
clients in 100 ms turns (the other stopped with SIGSTOP), 5 s of warm-up turns each, then 10
seconds of turns each, the server's Questions read after every second of running time. Every
round runs each mode (--modes) on its own two fresh servers, in a random order (seeded):
  none     nothing between turns (the probe)
  stat     /proc/PID/stat of both servers before and after every turn (their CPU and faults)
  steal    /proc/stat before and after every turn (the machine's steal time)
  all      both, and a poll of the turn's client: what perflab reads between turns since 2026-11-27
  tasks    ProcCounters.read of the turn's server before and after it: /proc/PID/stat and every
           thread's status file (what perflab did until 2026-11-27)
  sampler  nothing between turns; the per-second count through perflab's kept status client
           (StatusSampler, lean) instead of a new `mariadb` client
Printed per mode: the sd of the per-second log-ratio B/A (the two servers' own noise: the host
cancels within a second of turns) with a 95% interval, the sd of a round's 10 s log-ratio, its
variance against `none` (F interval), the mean QPS, and other_cpu_cores (figures from a busy
machine are not this machine's noise).

Run: python3 bench/archive/turn_reads.py [--rounds 6]   # six modes, ~20 minutes, idle machine
     python3 bench/archive/turn_reads.py --quick        # smoke test: 1 round of 2 s windows (~1 minute)
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: _common and the scripts imported below
import _common as C
from interleave import OPTIONS, TEST, Side, questions, scratch
from scipy import stats

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perflab.servers import dataset, mysqld_dataset

from perflab.workloads import sysbench
from perflab.places.procfs import ProcCounters, process_cpu_s
from perflab.observers.resources import machine_steal_s
from perflab.observers.status import StatusSampler

MODES = ("none", "stat", "steal", "all", "tasks", "sampler")
SLICE_S = 0.1


def reads(mode: str, side: Any, sides: list[Any]) -> None:
    """What perflab (or a variant of it) reads between turns, in `mode`."""
    if mode in ("stat", "all"):
        for s in sides:
            process_cpu_s(s.server.pid)
    if mode in ("steal", "all"):
        machine_steal_s()
    if mode == "all":
        side.client.poll()
    if mode == "tasks":
        ProcCounters.read(side.server.pid)


def turns(sides: list[Any], seconds: int, mode: str) -> None:
    """Each side's client runs `seconds` in 100 ms turns, with `mode`'s reads around each turn."""
    for _ in range(round(seconds / SLICE_S)):
        for side in sides:
            reads(mode, side, sides)
            side.resume()
            t0 = time.monotonic()
            time.sleep(SLICE_S)
            side.pause()
            side.active_s += time.monotonic() - t0
            reads(mode, side, sides)


def one_round(snap: dataset.Snapshot, workdir: Path, tag: str, cfg: dict[str, Any], mode: str) -> dict[str, Any]:
    """Two fresh servers in turns: the per-second log-ratios B/A, the window's, the mean QPS."""
    with scratch(workdir, tag) as (stack, base):
        sides = [Side(snap, base, n, stack, cfg) for n in "ab"]
        samplers = []
        if mode == "sampler":
            for s in sides:
                sampler = StatusSampler(s.server.socket, lean=True).connect()
                stack.callback(sampler.close)
                sampler.start_clock()
                samplers.append(sampler)

        def count(i: int) -> float:
            if samplers:
                samplers[i].sample()
                return samplers[i].samples[-1][1]["Questions"]
            return questions(sides[i].server)

        for s in sides:
            s.start_client(paused=True)
        turns(sides, cfg["warmup"], mode)
        per: list[tuple[float, float]] = []
        before = [count(i) for i in range(2)]
        for _ in range(cfg["window"]):
            for s in sides:
                s.active_s = 0.0
            turns(sides, 1, mode)
            after = [count(i) for i in range(2)]
            a, b = ((q1 - q0) / s.active_s for q0, q1, s in zip(before, after, sides, strict=True))
            per.append((a, b))
            before = after
        logs = [math.log(b / a) for a, b in per]
        return {"per_second": logs, "window": C.mean(logs), "qps": C.mean([a + b for a, b in per]) / 2,
                "pids": [p for s in sides for p in s.pids()]}  # fmt: skip


def sd_interval(values: list[float]) -> tuple[float | None, list[float | None]]:
    """The sd and its chi-square 95% interval."""
    n, sd = len(values), C.stdev(values)
    if sd is None or n < 2:
        return sd, [None, None]
    lo = sd * math.sqrt((n - 1) / stats.chi2.ppf(0.975, n - 1))
    hi = sd * math.sqrt((n - 1) / stats.chi2.ppf(0.025, n - 1))
    return sd, [C.rnd(lo), C.rnd(hi)]


def summarise(mode: str, rows: list[dict[str, Any]], base: dict[str, Any] | None) -> dict[str, Any]:
    seconds = [x for r in rows for x in r["per_second"]]
    windows = [r["window"] for r in rows]
    sd, ci = sd_interval(seconds)
    others = [r["other"] for r in rows]
    out: dict[str, Any] = {
        "mode": mode, "rounds": len(rows), "per_second_sd": C.rnd(sd), "per_second_sd_ci95": ci,
        "seconds": len(seconds), "window_sd": C.rnd(C.stdev(windows)), "qps": round(C.mean([r["qps"] for r in rows])),
        "other_cpu_cores": C.rnd(max(others), 3) if None not in others else None,  # the worst round's
    }  # fmt: skip
    if base is not None and sd and base["per_second_sd"]:
        ratio = sd**2 / base["per_second_sd"] ** 2
        df, df0 = len(seconds) - 1, base["seconds"] - 1
        lo, hi = (C.rnd(ratio / stats.f.ppf(q, df, df0)) for q in (0.975, 0.025))
        out["variance_over_none"] = {"ratio": C.rnd(ratio), "ci95": [lo, hi]}
    return out


def run(args: argparse.Namespace) -> None:
    cfg: dict[str, Any] = {"warmup": 5, "window": 10, "rounds": args.rounds or 6, "tables": 2, "rows": 50_000,
                           "ns": 0, "shim": None, "modes": args.modes.split(","), "seed": args.seed}  # fmt: skip
    if args.quick:
        cfg.update(warmup=1, window=2, rounds=args.rounds or 1, tables=1, rows=2000)
    rng = random.Random(args.seed)
    machine = C.Machine()
    rows: dict[str, list[dict[str, Any]]] = {m: [] for m in cfg["modes"]}
    with C.workdir(machine) as workdir:
        C.say(f"seed {args.seed} (--seed reruns this order); preparing {cfg['tables']} x {cfg['rows']} rows ...")
        snap = mysqld_dataset.prepare(
            workdir,
            sysbench.Prepare(TEST, cfg["tables"], cfg["rows"], OPTIONS),
            server_options={},
            log=workdir / "prepare.txt",
        )
        for r in range(cfg["rounds"]):
            order = list(cfg["modes"])
            rng.shuffle(order)
            for mode in order:
                mark = C.cpu_mark()
                row = one_round(snap, workdir, f"r{r}-{mode}", cfg, mode)
                row["other"] = C.foreign_cores(mark, C.cpu_mark(row.pop("pids")))
                rows[mode].append(row)
                C.say(f"round {r + 1}/{cfg['rounds']} {mode:8s} QPS {row['qps']:8.0f}  per-second sd "
                      f"{C.pct(C.stdev(row['per_second']))}  window {C.pct(row['window'])}  other_cpu_cores "
                      + ("?" if row["other"] is None else f"{row['other']:.3f}"))  # fmt: skip
    info = machine.finish()
    base = summarise("none", rows["none"], None) if "none" in rows else None
    out = {m: summarise(m, v, base if m != "none" else None) for m, v in rows.items()}
    headers = ["mode", "rounds", "per-second sd [95%]", "variance / none [95%]", "window sd", "QPS", "other max"]
    table = []
    for m, s in out.items():
        lo, hi = s["per_second_sd_ci95"]
        v = s.get("variance_over_none")
        table.append([m, s["rounds"], f"{C.pct(s['per_second_sd'])} [{C.pct(lo)}-{C.pct(hi)}]",
                      f"{v['ratio']:.2f} [{v['ci95'][0]:.2f}-{v['ci95'][1]:.2f}]" if v else "",
                      C.pct(s["window_sd"]), s["qps"], s["other_cpu_cores"]])  # fmt: skip
    C.say(C.table(headers, table))
    C.say(C.Machine.describe(info))
    kept = {m: [{k: v for k, v in r.items() if k != "per_second"} for r in rs] for m, rs in rows.items()}
    C.final_json({"bench": "turn_reads", "config": cfg, "modes": out, "machine": info, "rounds": kept})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, help="rounds of every mode (default 6; --quick 1)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated (default {','.join(MODES)})")
    parser.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4)), help="order of the modes")
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 round, 2 s windows, a tiny dataset")
    args = parser.parse_args()
    unknown = set(args.modes.split(",")) - set(MODES)
    if unknown:
        parser.error(f"unknown mode {', '.join(sorted(unknown))}: choose from {', '.join(MODES)}")
    C.main_guard(lambda: run(args))


if __name__ == "__main__":
    main()
