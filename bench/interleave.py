"""Would interleaving two servers second by second resolve a smaller effect in 10 minutes than
running them one after the other? (issue 12: the 3% goal; a probe for a design perflab has not
adopted)

Why: on this VM most of a cell's noise in a noisy hour is the host's own speed, which changes
from one 15 s cell to the next (the canary's spin tracks a cell's QPS at r = 0.8-0.9). perflab's
rounds run one fresh server after another, so that change lands between the two sides of a
pair; the canary takes part of it out with a fitted slope. Interleaving takes it out by design:
both fresh servers run at once, and their clients take turns of SLICE seconds (the idle one
stopped with SIGSTOP), so every second of host speed falls on both sides alike. Each round still
starts both servers fresh, so what differs between restarts (layout, the buffer pool's order)
stays in the variance, as it must.

What: identical servers (an A/A pair: the installed mariadbd, oltp_read_only at 2 threads with
uniform keys, 2 tables x 50k rows, a fresh copy of one prepared datadir per server on tmpfs).
Every round runs both designs, in random order, each on two fresh servers:
  - sequential: A then B (order drawn), each WARMUP s of load then WINDOW s measured, as a
    perflab round of two cells runs;
  - interleaved: both started, their clients alternating SLICE s turns: WARMUP s of turns each,
    then WINDOW s of turns each, measured (the server that starts is drawn).
Throughput is the server's own Questions count over the seconds its client was running (the
same counter and clock for both designs; sysbench's reports would count the stopped time).
Printed per design: the sd of a round's log-ratio B/A, its mean, the wall time of a round, and
what ten minutes detect at 95% confidence and 80% power ((1.96 + 0.84) x sd / sqrt(rounds in
10 min)); the interleaved design's variance per unit of time over the sequential one's with a
95% F interval; other_cpu_cores of every round (figures from a busy machine are not this
machine's noise).

--ns N preloads the calibrated shim (tests/data/calibrated) on every server and makes B burn N ns
a malloc call: a known slowdown. --aa adds a third server C, identical to A, to the interleaved
turns: C/A is an A/A in the same rounds as B/A (its round is then three turns long, so its
"10 min detect" column is not a two-variant figure; compare the sd).

Run: python3 bench/interleave.py [--rounds 20]   # the figures (~25 minutes), idle machine
     python3 bench/interleave.py --quick         # smoke test: 3 rounds of 2 s windows (~2 minutes)
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import _common as C
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perflab.servers import dataset, mysqld_dataset
from perflab.places.proc import Child, clean_env
from perflab.workloads import sysbench
from perflab.servers.mysqld import Mysqld
from tests.data.calibrated.build import ENV, build

TEST, THREADS, OPTIONS = "oltp_read_only", 2, {"rand_type": "uniform"}
Z = 1.959964 + 0.841621  # 95% two-sided, 80% power
BUDGET_S = 600.0
DESIGNS = ("sequential", "interleaved")


def questions(server: Mysqld) -> int:
    """The server's Questions: every statement its clients sent (sysbench's prepared ones too;
    observers/status.py counts the same), this read included."""
    return int(server.sql("SHOW GLOBAL STATUS LIKE 'Questions'").split()[1])


class Side:
    """One fresh server on a copy of the snapshot, and its client (started stopped-able)."""

    def __init__(self, snap: dataset.Snapshot, workdir: Path, name: str, stack: ExitStack, cfg: dict[str, Any]) -> None:
        rundir = workdir / name
        rundir.mkdir()
        dataset.restore(snap, rundir / "data")
        options = {"innodb_buffer_pool_size": snap.buffer_pool}
        ns = cfg["ns"] if name == "b" else 0  # with --ns, both sides preload the shim; B burns
        preload, env = (cfg["shim"], {ENV: str(ns)}) if cfg["shim"] else (None, None)
        server = Mysqld(rundir, rundir / "data", options, preload=preload, env=env)
        self.server = stack.enter_context(server)
        if preload and preload.name not in Path(f"/proc/{server.pid}/maps").read_text():
            raise C.BenchError(f"the shim {preload} is not mapped in mariadbd {server.pid}")
        # the client runs until killed; its own clock and reports are not used
        self.argv = sysbench.argv(TEST, "run", socket=self.server.socket, tables=cfg["tables"],
                                  table_size=cfg["rows"], threads=THREADS, seconds=3600, options=OPTIONS)  # fmt: skip
        self.out = (rundir / "sysbench.txt").open("w", encoding="utf-8")
        stack.callback(self.out.close)
        self.client: Child | None = None
        self.stack = stack
        self.active_s = 0.0

    def start_client(self, paused: bool) -> None:
        self.client = Child(self.argv, env=clean_env(), stdout=self.out)
        self.stack.callback(self.client.kill)
        if paused:
            self.pause()

    def pause(self) -> None:
        assert self.client is not None
        self.client.signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.client is not None
        self.client.signal_group(signal.SIGCONT)

    def pids(self) -> list[int]:
        return [p for p in (self.server.pid, self.client.pid if self.client else None) if p]


def turns(sides: list[Any], seconds: float, slice_s: float, gap_s: float = 0.0) -> None:
    """Each side's client runs `seconds` in turns of `slice_s`, the others stopped; each side's
    running time is added to its active_s. `gap_s`: every client stays stopped that long after
    each turn (bench/server_noise.py --gaps: what bookkeeping between turns would cost)."""
    left = [seconds] * len(sides)
    while max(left) > 1e-6:
        for i, side in enumerate(sides):
            run = min(slice_s, left[i])
            if run <= 1e-6:
                continue
            side.resume()
            t0 = time.monotonic()
            time.sleep(run)
            side.pause()
            side.active_s += time.monotonic() - t0
            left[i] -= run
            if gap_s > 0:
                time.sleep(gap_s)


def measured(sides: list[Any], seconds: float, slice_s: float, gap_s: float = 0.0) -> dict[Any, float]:
    """Statements a second (QPS) of each side over `seconds` of its running time."""
    before = [questions(s.server) for s in sides]
    for s in sides:
        s.active_s = 0.0
    turns(sides, seconds, slice_s, gap_s)
    return {s: (questions(s.server) - b) / s.active_s for s, b in zip(sides, before, strict=True)}


@contextmanager
def scratch(workdir: Path, tag: str) -> Iterator[tuple[ExitStack, Path]]:
    """A directory for one design's servers, and the stack that stops them before it goes."""
    base = workdir / tag
    base.mkdir()
    with ExitStack() as stack:
        yield stack, base
    shutil.rmtree(base, ignore_errors=True)  # the servers are stopped: their copies go


Outcome = tuple[list[float], list[int]]  # QPS of A and B; the pids to count as ours


def sequential(snap: dataset.Snapshot, workdir: Path, tag: str, cfg: dict[str, Any], first: int) -> Outcome:
    qps = [0.0, 0.0]
    pids: list[int] = []
    for i in (first, 1 - first):
        with scratch(workdir, f"{tag}-{i}") as (stack, base):
            side = Side(snap, base, "ab"[i], stack, cfg)
            side.start_client(paused=False)
            pids += side.pids()
            time.sleep(cfg["warmup"])
            qps[i] = measured([side], cfg["window"], cfg["window"])[side]
    return qps, pids


def interleaved(snap: dataset.Snapshot, workdir: Path, tag: str, cfg: dict[str, Any], first: int) -> Outcome:
    """QPS of A and B (and, with --aa, of C: a copy of A) taking turns; `first` starts."""
    names = "abc" if cfg["aa"] else "ab"
    with scratch(workdir, tag) as (stack, base):
        sides = [Side(snap, base, n, stack, cfg) for n in names]
        for s in sides:
            s.start_client(paused=True)
        order = sides[first:] + sides[:first]  # a rotation: the turns' cycle keeps its order
        turns(order, cfg["warmup"], cfg["slice"])
        rates = measured(order, cfg["window"], cfg["slice"])
        return [rates[s] for s in sides], [p for s in sides for p in s.pids()]


Row = tuple[float, float, float | None]  # a round's ratio, its wall seconds, other_cpu_cores


def summarise(name: str, rows: list[Row]) -> dict[str, Any]:
    """One design's rounds: the sd of the log-ratio, what 10 minutes of such rounds detect, and
    the rounds as one experiment (the ratio with its paired 95% t interval)."""
    logs = [math.log(r) for r, _, _ in rows]
    sd, ci = C.stdev(logs), C.ci95(logs)
    round_s = C.mean([w for _, w, _ in rows])
    n10 = BUDGET_S / round_s
    others = [o for _, _, o in rows if o is not None]
    return {
        "design": name, "rounds": len(logs), "mean_log_ratio": C.rnd(C.mean(logs)), "sd": C.rnd(sd),
        "round_s": round(round_s, 1), "rounds_in_10_min": round(n10, 1),
        "detectable_10_min": C.rnd(Z * sd / math.sqrt(n10)) if sd is not None else None,
        "ratio": {"estimate": C.rnd(math.exp(C.mean(logs))), "ci95": [C.rnd(math.exp(x)) for x in ci]} if ci else None,
        "other_cpu_cores": {"mean": C.rnd(C.mean(others), 3) if others else None,
                            "max": C.rnd(max(others), 3) if others else None},
    }  # fmt: skip


def run(args: argparse.Namespace) -> None:
    cfg = {"warmup": 5, "window": 10, "slice": args.slice, "rounds": args.rounds, "tables": 2, "rows": 50_000,
           "ns": args.ns, "shim": None, "seed": args.seed, "aa": args.aa}  # fmt: skip
    if args.quick:
        cfg.update(warmup=1, window=2, rounds=args.rounds or 3, tables=1, rows=2000)
    cfg["rounds"] = cfg["rounds"] or 20
    rng = random.Random(args.seed)
    machine = C.Machine()
    chosen = args.designs.split(",")
    results: dict[str, list[Row]] = {d: [] for d in chosen}
    with C.workdir(machine) as workdir:
        if args.ns is not None:
            cfg["shim"] = build(workdir / "shim")
        C.say(f"seed {args.seed} (--seed reruns this order); preparing {cfg['tables']} x {cfg['rows']} rows ...")
        snap = mysqld_dataset.prepare(
            workdir,
            sysbench.Prepare(TEST, cfg["tables"], cfg["rows"], OPTIONS),
            server_options={},
            log=workdir / "prepare.txt",
        )
        for r in range(cfg["rounds"]):
            designs = list(chosen)
            rng.shuffle(designs)
            for design in designs:
                first = rng.randrange(3 if cfg["aa"] and design == "interleaved" else 2)
                mark = C.cpu_mark()
                t0 = time.monotonic()
                fn = sequential if design == "sequential" else interleaved
                qps, pids = fn(snap, workdir, f"r{r}-{design}", cfg, first)
                wall = time.monotonic() - t0
                other = C.foreign_cores(mark, C.cpu_mark(pids))
                results[design].append((qps[1] / qps[0], wall, other))
                shown = f"B/A {qps[1] / qps[0]:.4f}"
                if len(qps) > 2:  # --aa: C against A, in the same turns (identical servers)
                    results.setdefault(f"{design} C/A", []).append((qps[2] / qps[0], wall, other))
                    shown += f" C/A {qps[2] / qps[0]:.4f}"
                shown += "  other_cpu_cores " + ("?" if other is None else f"{other:.3f}")
                C.say(f"round {r + 1}/{cfg['rounds']} {design:11s} A {qps[0]:7.1f} B {qps[1]:7.1f} q/s  "
                      f"{shown}  {wall:5.1f} s")  # fmt: skip
    info = machine.finish()
    rows = {d: summarise(d, v) for d, v in results.items()}
    headers = ["design", "rounds", "sd of log ratio", "mean", "s a round", "rounds / 10 min", "10 min detect",
               "other cores mean/max"]  # fmt: skip
    C.say(C.table(headers, [
        [r["design"], r["rounds"], C.pct(r["sd"]), C.pct(r["mean_log_ratio"]), r["round_s"], r["rounds_in_10_min"],
         C.pct(r["detectable_10_min"]), f"{r['other_cpu_cores']['mean']}/{r['other_cpu_cores']['max']}"]
        for r in rows.values()
    ]))  # fmt: skip
    cfg["shim"] = str(cfg["shim"]) if cfg["shim"] else None
    out: dict[str, Any] = {"bench": "interleave", "config": cfg, "designs": rows, "machine": info}
    for d, row in rows.items():  # the rounds as one experiment
        if row["ratio"]:
            (lo, hi), name = row["ratio"]["ci95"], d if d.endswith("C/A") else f"{d} B/A"
            C.say(f"{name}: {row['ratio']['estimate']:.4f} [{lo:.4f}-{hi:.4f}] over {row['rounds']} rounds")
    s, i = rows.get("sequential"), rows.get("interleaved")
    if s and i and s["sd"] and i["sd"]:
        # variance of a 10-minute mean: sd^2 x seconds a round; F interval on the sd^2 ratio
        ratio = (i["sd"] ** 2 * i["round_s"]) / (s["sd"] ** 2 * s["round_s"])
        df_i, df_s = i["rounds"] - 1, s["rounds"] - 1
        lo = ratio / stats.f.ppf(0.975, df_i, df_s)
        hi = ratio / stats.f.ppf(0.025, df_i, df_s)
        out["variance_per_time_interleaved_over_sequential"] = {"ratio": C.rnd(ratio), "ci95": [C.rnd(lo), C.rnd(hi)]}
        C.say(f"interleaved / sequential, variance of a 10-minute mean: {ratio:.2f} [{lo:.2f}-{hi:.2f}]")
    C.say(C.Machine.describe(info))
    C.final_json(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, help="rounds of both designs (default 20; --quick 3)")
    parser.add_argument("--slice", type=float, default=1.0, metavar="S", help="seconds of one turn (default 1)")
    parser.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4)), help="order of designs and sides")
    parser.add_argument("--ns", type=int, metavar="N",
                        help="both sides preload the calibrated shim; B burns N ns a malloc call (a known slowdown)")
    parser.add_argument("--designs", default="sequential,interleaved", help="comma-separated (default both)")
    parser.add_argument("--aa", action="store_true",
                        help="interleaved: a third server C, identical to A, takes turns too (C/A: A/A in one run)")
    parser.add_argument("--quick", action="store_true", help="smoke test: 3 rounds, 2 s windows, a tiny dataset")
    args = parser.parse_args()
    unknown = set(args.designs.split(",")) - set(DESIGNS)
    if unknown:
        parser.error(f"unknown design {', '.join(sorted(unknown))}: choose from {', '.join(DESIGNS)}")
    if not args.slice > 0:
        parser.error("--slice must be above 0 seconds")
    if args.ns is not None and args.ns < 0:
        parser.error("--ns must be 0 or more nanoseconds")
    if args.rounds is not None and args.rounds < 2:
        parser.error("--rounds must be at least 2 (a sd needs two rounds)")
    C.main_guard(lambda: run(args))


if __name__ == "__main__":
    main()
