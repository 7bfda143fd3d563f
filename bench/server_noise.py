"""Where is a round's noise when the host's speed is shared: the servers, or the turns? (issue 12)

Why: with the host's speed taken out (the interleaved design in 1 s turns, or the sequential one
with the calibrated canary) a round's log-ratio between two identical servers still varied by
5.7-7.5% on this VM, which kept a 3% effect at 55-61% power in 10 minutes. A fresh cell differs
from the last in the server process (its address space, its buffer pool's memory and page
order), the client's connections (new server threads, their placement on the two vCPUs), and
the seconds it runs in. This probe takes them apart.

What: identical servers (the installed mariadbd, oltp_read_only at 2 threads with uniform keys,
2 tables x 50k rows, each on a fresh copy of one prepared datadir on tmpfs); two sides A and B
take turns (the idle client stopped with SIGSTOP), so the host's speed falls on both alike,
WARMUP s of turns each, then WINDOW s of turns each, measured by the server's own Questions over
its client's running time. Every round runs each mode (--modes) at each turn length (--slices)
in a random order (seeded):
  fresh    two fresh servers and fresh clients                  (what a perflab round does)
  noaslr   the same under `setarch -R` (no address-space randomization: perflab's aslr = false)
  clients  two servers started once for the whole run, fresh clients every round
  kept     the same two kept servers and two clients kept for the whole run (stopped between)
The variance of a round's log-ratio B/A in each mode then splits: kept = the turns' own noise
(and the kept processes' drift); clients - kept = new connections; fresh - clients = a new
server process; fresh - noaslr = what address-space randomization adds. A turn as long as the
window runs the two sides one after the other (the sequential design). Printed per mode and
turn: the sd of the log-ratio with a 95% interval, its variance against the first (F interval),
the mean steal and other_cpu_cores (figures from a busy machine are not this machine's noise).

Measured 2026-11-26/27 (docs/methodology.md#turns-of-100-ms): at 1 s turns kept
processes varied as much as fresh ones (5.0% against 4.8%); on kept servers 100 ms turns left
0.72%, 1 s turns 5.3%, one after the other 9.4%: the turns, not the servers.

Run: python3 bench/server_noise.py --rounds 16      # the four modes at 1 s turns (~35 minutes), idle machine
     python3 bench/server_noise.py --modes kept --slices 0.1,0.25,1,10 --warmup 2 --rounds 14   # ~23 minutes
     python3 bench/server_noise.py --quick         # smoke test: 2 rounds of 2 s windows (~2 minutes)
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import _common as C
from interleave import OPTIONS, TEST, THREADS, measured, scratch, turns
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perflab.servers import dataset, mysqld_dataset
from perflab.observers.resources import machine_steal_s
from perflab.places.proc import Child, clean_env
from perflab.workloads import sysbench
from perflab.servers.mysqld import Mysqld

MODES = ("fresh", "noaslr", "clients", "kept")


class Server:
    """A server on a fresh copy of the snapshot, stopped with `stack`."""

    def __init__(self, snap: dataset.Snapshot, base: Path, name: str, stack: ExitStack, *, aslr: bool) -> None:
        rundir = base / name
        rundir.mkdir()
        dataset.restore(snap, rundir / "data")
        server = Mysqld(rundir, rundir / "data", {"innodb_buffer_pool_size": snap.buffer_pool})
        server.aslr = aslr
        self.server = stack.enter_context(server)
        if self.server.aslr_seen() is not aslr:
            raise C.BenchError(f"mariadbd {self.server.pid} does not run with aslr = {aslr}")
        self.rundir = rundir


class Side:
    """A client of one server, started stopped; what turns() drives."""

    def __init__(self, srv: Server, cfg: dict[str, Any], stack: ExitStack, tag: str) -> None:
        self.server = srv.server
        argv = sysbench.argv(TEST, "run", socket=srv.server.socket, tables=cfg["tables"],
                             table_size=cfg["rows"], threads=THREADS, seconds=36000, options=OPTIONS)  # fmt: skip
        out = (srv.rundir / f"sysbench-{tag}.txt").open("w", encoding="utf-8")
        stack.callback(out.close)
        self.client = Child(argv, env=clean_env(), stdout=out)
        stack.callback(self.client.kill)
        self.pause()
        self.active_s = 0.0

    def pause(self) -> None:
        self.client.signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        self.client.signal_group(signal.SIGCONT)

    def pids(self) -> list[int]:
        return [p for p in (self.server.pid, self.client.pid) if p]


def one_round(sides: list[Side], cfg: dict[str, Any], first: int, slice_s: float, gap_s: float) -> tuple[float, float]:
    """B/A over the measured turns of `slice_s`, and the steal (cores) over the round; `first`
    starts."""
    order = sides[first:] + sides[:first]
    steal0, t0 = machine_steal_s(), time.monotonic()
    turns(order, cfg["warmup"], min(slice_s, cfg["warmup"]), gap_s)
    rates = measured(order, cfg["window"], slice_s, gap_s)
    steal = (machine_steal_s() - steal0) / (time.monotonic() - t0)
    return rates[sides[1]] / rates[sides[0]], steal


def summarise(mode: str, rows: list[tuple[float, float, float | None]], base: dict[str, Any] | None) -> dict[str, Any]:
    logs = [math.log(r) for r, _, _ in rows]
    n, sd = len(logs), C.stdev(logs)
    out: dict[str, Any] = {"mode": mode, "rounds": n, "mean_log_ratio": C.rnd(C.mean(logs)), "sd": C.rnd(sd)}
    if sd is not None and n > 1:  # chi-square interval on the sd
        out["sd_ci95"] = [C.rnd(sd * math.sqrt((n - 1) / stats.chi2.ppf(q, n - 1))) for q in (0.975, 0.025)]
    if base and sd is not None and base["sd"]:
        ratio, d1, d2 = (sd / base["sd"]) ** 2, n - 1, base["rounds"] - 1
        out["variance_over_fresh"] = {"ratio": C.rnd(ratio),
                                      "ci95": [C.rnd(ratio / stats.f.ppf(0.975, d1, d2)),
                                               C.rnd(ratio / stats.f.ppf(0.025, d1, d2))]}  # fmt: skip
    others = [o for _, _, o in rows if o is not None]
    out["steal_cores"] = C.rnd(C.mean([s for _, s, _ in rows]), 3)
    out["other_cpu_cores"] = {"mean": C.rnd(C.mean(others), 3) if others else None,
                              "max": C.rnd(max(others), 3) if others else None}  # fmt: skip
    return out


def run(args: argparse.Namespace) -> None:
    slices = [float(x) for x in args.slices.split(",")]
    modes = args.modes.split(",")
    gaps = [float(x) for x in args.gaps.split(",")]
    # a mode at a turn length and a gap between turns: its label ("kept@0.1s+1.5ms") and settings
    arms = {f"{m}@{s:g}s" + (f"+{g:g}ms" if g else ""): (m, s, g) for m in modes for s in slices for g in gaps}
    cfg = {"warmup": args.warmup, "window": args.window, "slices": slices, "gaps_ms": gaps, "modes": modes,
           "rounds": args.rounds or 20, "tables": 2, "rows": 50_000, "seed": args.seed}  # fmt: skip
    if args.quick:
        cfg.update(warmup=1, window=2, rounds=args.rounds or 2, tables=1, rows=2000)
    rng = random.Random(args.seed)
    machine = C.Machine()
    rows: dict[str, list[tuple[float, float, float | None]]] = {a: [] for a in arms}
    with C.workdir(machine) as workdir, ExitStack() as kept_stack:
        C.say(f"seed {args.seed} (--seed reruns this order); preparing {cfg['tables']} x {cfg['rows']} rows ...")
        snap = mysqld_dataset.prepare(
            workdir,
            sysbench.Prepare(TEST, cfg["tables"], cfg["rows"], OPTIONS),
            server_options={},
            log=workdir / "prepare.txt",
        )
        (workdir / "kept").mkdir()
        kept: list[Server] = []
        kept_sides: list[Side] = []
        if {"clients", "kept"} & set(modes):
            kept = [Server(snap, workdir / "kept", n, kept_stack, aslr=True) for n in "ab"]
            kept_sides = [Side(s, cfg, kept_stack, "kept") for s in kept]
        for r in range(cfg["rounds"]):
            order = list(arms)
            rng.shuffle(order)
            for arm in order:
                mode, slice_s, gap_ms = arms[arm]
                first = rng.randrange(2)
                t0 = time.monotonic()
                with ExitStack() as stack:
                    if mode in ("fresh", "noaslr"):
                        stack.enter_context(scratch(workdir, f"r{r}-{arm}"))
                        base = workdir / f"r{r}-{arm}"
                        servers = [Server(snap, base, n, stack, aslr=mode == "fresh") for n in "ab"]
                        sides = [Side(s, cfg, stack, mode) for s in servers]
                    elif mode == "clients":
                        sides = [Side(s, cfg, stack, f"r{r}") for s in kept]
                    else:
                        sides = kept_sides
                    mark = C.cpu_mark()
                    ratio, steal = one_round(sides, cfg, first, slice_s, gap_ms / 1000)
                    pids = [p for s in sides for p in s.pids()] + [p for s in kept_sides for p in s.pids()]
                    other = C.foreign_cores(mark, C.cpu_mark(pids))
                rows[arm].append((ratio, steal, other))
                C.say(f"round {r + 1}/{cfg['rounds']} {arm:14s} B/A {ratio:.4f}  steal {steal:.3f}  other_cpu_cores "
                      + ("?" if other is None else f"{other:.3f}") + f"  {time.monotonic() - t0:5.1f} s")  # fmt: skip
    info = machine.finish()
    first_arm = next(iter(arms))
    base = summarise(first_arm, rows[first_arm], None)
    out = {a: base if a == first_arm else summarise(a, rows[a], base) for a in arms}
    headers = ["mode@turn", "rounds", "sd of log B/A [95%]", "mean", f"variance / {first_arm} [95%]", "steal",
               "other mean/max"]  # fmt: skip
    table = []
    for a, x in out.items():
        ci = x.get("sd_ci95")
        v = x.get("variance_over_fresh")
        table.append([a, x["rounds"], C.pct(x["sd"]) + (f" [{C.pct(ci[0])}-{C.pct(ci[1])}]" if ci else ""),
                      C.pct(x["mean_log_ratio"]),
                      f"{v['ratio']:.2f} [{v['ci95'][0]:.2f}-{v['ci95'][1]:.2f}]" if v else "",
                      x["steal_cores"], f"{x['other_cpu_cores']['mean']}/{x['other_cpu_cores']['max']}"])  # fmt: skip
    C.say(C.table(headers, table))
    for t in slices:  # with all four modes at one turn length: what each step adds, a server
        var = {m: (out[f"{m}@{t:g}s"]["sd"] or 0.0) ** 2 for m in MODES if f"{m}@{t:g}s" in out}
        if len(var) < len(MODES):
            continue
        parts = {"turns (kept)": var["kept"], "new connections (clients - kept)": var["clients"] - var["kept"],
                 "new server process (fresh - clients)": var["fresh"] - var["clients"],
                 "address-space randomization (fresh - noaslr)": var["fresh"] - var["noaslr"]}  # fmt: skip
        for name, v in parts.items():  # half a pair's variance; a negative difference is noise
            C.say(f"{t:g} s turns, {name}: sd a server {math.copysign(math.sqrt(abs(v) / 2), v):+.2%}")
    C.say(C.Machine.describe(info))
    rounds = {a: [[C.rnd(r), C.rnd(s, 3), C.rnd(o, 3)] for r, s, o in v] for a, v in rows.items()}
    C.final_json({"bench": "server_noise", "config": cfg, "modes": out, "machine": info, "rounds": rounds})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, help="rounds of every mode and turn (default 20; --quick 2)")
    parser.add_argument(
        "--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)} (default all)"
    )
    parser.add_argument(
        "--slices",
        default="1",
        metavar="S,...",
        help="seconds of one turn, comma-separated: each mode runs at each (default 1)",
    )
    parser.add_argument(
        "--gaps",
        default="0",
        metavar="MS,...",
        help="milliseconds every client stays stopped after each turn, comma-separated (default 0)",
    )
    parser.add_argument("--warmup", type=float, default=5.0, metavar="S", help="seconds of warm-up turns (default 5)")
    parser.add_argument("--window", type=float, default=10.0, metavar="S", help="seconds measured a side (default 10)")
    parser.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4)), help="order of modes and sides")
    parser.add_argument("--quick", action="store_true", help="smoke test: 2 rounds, 2 s windows, a tiny dataset")
    args = parser.parse_args()
    try:
        if not all(float(x) > 0 for x in args.slices.split(",")):
            parser.error("--slices must be above 0 seconds")
    except ValueError:
        parser.error(f"--slices: not a list of seconds: {args.slices}")
    try:
        if not all(float(x) >= 0 for x in args.gaps.split(",")):
            parser.error("--gaps must be 0 or more milliseconds")
    except ValueError:
        parser.error(f"--gaps: not a list of milliseconds: {args.gaps}")
    if set(args.modes.split(",")) - set(MODES):
        parser.error(f"--modes: choose from {', '.join(MODES)}")
    if not (args.warmup > 0 and args.window > 0):
        parser.error("--warmup and --window must be above 0 seconds")
    if args.rounds is not None and args.rounds < 2:
        parser.error("--rounds must be at least 2 (a sd needs two rounds)")
    C.main_guard(lambda: run(args))


if __name__ == "__main__":
    main()
