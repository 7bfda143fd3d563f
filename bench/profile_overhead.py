"""What profiling costs the measurement: steady-state QPS with each observer vs none.

What: QPS of a measured window with an observer divided by the mean QPS of the two windows
without observer just before and after it (oltp_read_only, 2 threads, 2 tables x 20k rows, 3 s
warm-up + 5 s window, --report-checkpoints as a cell runs it). Configurations, in a
rotating order each round, each between two windows without observer:
  none            no observer (its row: each window vs the previous one, the noise floor)
  perf@99         perflab's PerfRecorder: perf record -a (per-CPU events), -F 99, fp
  perf@999        the same at 999 Hz
  perf@99-dwarf   the same at 99 Hz with call_graph = "dwarf" (16 KiB of stack per sample)
  pmp@1s, pmp@0.2s   perflab's resident libdw stack sampler
  naive-perf-p@99 `perf record -F 99 -g -p PID` (the issue's hand measurement), for reference
  eu-stack@0.2s   `eu-stack -p PID` every 0.2 s (tool = "eu-stack"), for reference
Per window also: the server's CPU (user/sys, /proc), the observer's own CPU (its processes'
rusage), the CPU other processes used (the machine is shared: see the warning), and
CPU per transaction = (server + observer CPU) / transactions as a ratio to none: on a
shared machine QPS moves with other people's load, CPU per transaction much less, so this
second figure resolves an observer's cost when the QPS ratio's interval cannot.

How: one dataset, ONE mariadbd for every window (restarts would add variance that is not
observer cost); the perflab configurations enter exactly what a cell enters,
`Profilers(observe, pid, workdir)` around the wait for sysbench, and fold afterwards (the
fold is after the window, so not in the QPS).

Goals: perf@99 < 3% QPS cost, pmp@1s < 2%, pmp@0.2s < 5%.

Run: python3 bench/profile_overhead.py            # 5 rounds of 5 s windows, ~12 minutes
     python3 bench/profile_overhead.py --rounds 2 --duration 5   # quicker, noisier
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import signal
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import _common as C

from perflab.servers import dataset, mysqld_dataset
from perflab.observers.perf import PerfRecorder
from perflab.observers.profilers import Profilers
from perflab.places.procfs import ProcCounters
from perflab.places.proc import Child, clean_env
from perflab.workloads import sysbench, sysbench_output
from perflab.servers.mysqld import Mysqld
from perflab.spec import ObserveSection, PerfObserve, PmpObserve

GOALS = {"perf@99": 0.03, "pmp@1s": 0.02, "pmp@0.2s": 0.05}
TABLES, TABLE_SIZE, THREADS = 2, 20000, 2
OPTIONS = {"rand_type": "uniform"}


def perflab_observer(observe: ObserveSection) -> Callable[[int, Path], Any]:
    return lambda pid, work: Profilers(observe, pid, work)


@contextlib.contextmanager
def naive_perf(pid: int, work: Path) -> Iterator[None]:
    child = Child(["perf", "record", "-q", "-F", "99", "-g", "-p", str(pid), "-o", str(work / "naive.data")])
    try:
        yield
    finally:
        child.signal_group(signal.SIGINT)
        with contextlib.suppress(TimeoutError):
            child.wait(60)
        child.kill()


CONFIGS: dict[str, Callable[[int, Path], Any] | None] = {
    "none": None,
    "perf@99": perflab_observer(ObserveSection(perf=PerfObserve(frequency=99))),
    "perf@999": perflab_observer(ObserveSection(perf=PerfObserve(frequency=999))),
    "perf@99-dwarf": perflab_observer(ObserveSection(perf=PerfObserve(frequency=99, call_graph="dwarf"))),
    "pmp@1s": perflab_observer(ObserveSection(pmp=PmpObserve(interval=1.0))),
    "pmp@0.2s": perflab_observer(ObserveSection(pmp=PmpObserve(interval=0.2))),
    "naive-perf-p@99": naive_perf,
    "eu-stack@0.2s": perflab_observer(ObserveSection(pmp=PmpObserve(interval=0.2, tool="eu-stack"))),
}


def window(server: Mysqld, name: str, cfg: dict[str, Any], work: Path) -> dict[str, float]:
    argv = sysbench.argv(
        "oltp_read_only",
        "run",
        socket=server.socket,
        tables=TABLES,
        table_size=TABLE_SIZE,
        threads=THREADS,
        seconds=cfg["warmup"] + cfg["duration"],
        checkpoint=cfg["warmup"],
        options=OPTIONS,
    )
    out = work / f"{name}.txt"
    factory = CONFIGS[name]
    with out.open("w", encoding="utf-8") as sink:
        child = Child(argv, env=clean_env(), stdout=sink)
    with child:
        time.sleep(cfg["warmup"])
        kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc0, mark0 = ProcCounters.read(server.pid), C.cpu_mark([server.pid, child.pid])
        observer = factory(server.pid, work / name) if factory else contextlib.nullcontext()
        with observer:
            child.wait(cfg["duration"] + cfg["warmup"] + 120)
        proc1, mark1 = ProcCounters.read(server.pid), C.cpu_mark([server.pid])
        kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = sysbench_output.parse_summary(out.read_text(encoding="utf-8"))
    if summary is None:
        raise C.BenchError(f"{name}: no sysbench summary in {out}")
    sb = child.rusage
    observer_cpu = (kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime) - (sb.ru_utime + sb.ru_stime)
    fold_s = 0.0
    if isinstance(observer, Profilers):
        t0 = time.monotonic()
        observer.perf and observer.perf.fold()
        observer.pmp and observer.pmp.fold()
        fold_s = time.monotonic() - t0
    cpu_s = (proc1.user_s - proc0.user_s) + (proc1.sys_s - proc0.sys_s) + max(0.0, observer_cpu)
    return {
        "qps": summary.qps,
        "cpu_us_per_txn": cpu_s * 1e6 / summary.transactions,
        "server_user_s": proc1.user_s - proc0.user_s,
        "server_sys_s": proc1.sys_s - proc0.sys_s,
        "observer_cpu_s": max(0.0, observer_cpu),
        "foreign_cores": C.foreign_cores(mark0, mark1) or 0.0,
        "fold_s": fold_s,
    }


def run(args: argparse.Namespace) -> None:
    """Each observer window is flanked by windows without observer (N X1 N X2 N ... N) and
    compared with the mean of its two neighbours, seconds apart: on a shared machine the
    load of others drifts over minutes, so only close neighbours make a fair baseline."""
    cfg = {"warmup": args.warmup, "duration": args.duration}
    machine = C.Machine()
    observed = [n for n in CONFIGS if n != "none"]
    results: dict[str, list[dict[str, float]]] = {n: [] for n in CONFIGS}
    ratios: dict[str, list[float]] = {n: [] for n in CONFIGS}
    cpu_ratios: dict[str, list[float]] = {n: [] for n in CONFIGS}
    with C.workdir(machine) as work:
        snap = mysqld_dataset.prepare(
            work,
            sysbench.Prepare("oltp_read_only", TABLES, TABLE_SIZE, OPTIONS),
            server_options={},
            log=work / "prepare.txt",
        )
        dataset.restore(snap, work / "srv" / "data")
        with Mysqld(work / "srv", work / "srv" / "data", {"innodb_buffer_pool_size": snap.buffer_pool}) as server:
            subprocess.run(
                sysbench.argv(
                    "oltp_read_only",
                    "run",
                    socket=server.socket,
                    tables=TABLES,
                    table_size=TABLE_SIZE,
                    threads=THREADS,
                    seconds=10,
                    options=OPTIONS,
                ),
                capture_output=True,
                check=True,
                timeout=120,
            )  # server warm-up, not counted
            for rnd in range(args.rounds):
                order = observed[rnd % len(observed) :] + observed[: rnd % len(observed)]
                before = window(server, "none", cfg, work)
                line = []
                for n in order:
                    got = window(server, n, cfg, work)
                    after = window(server, "none", cfg, work)
                    base_qps = (before["qps"] + after["qps"]) / 2
                    base_cpu = (before["cpu_us_per_txn"] + after["cpu_us_per_txn"]) / 2
                    results[n].append(got)
                    ratios[n].append(got["qps"] / base_qps)
                    cpu_ratios[n].append(got["cpu_us_per_txn"] / base_cpu)
                    # the baseline's own noise: one window without observer against the next
                    results["none"].append(after)
                    ratios["none"].append(after["qps"] / before["qps"])
                    cpu_ratios["none"].append(after["cpu_us_per_txn"] / before["cpu_us_per_txn"])
                    line.append(f"{n} {got['qps'] / base_qps:.3f}")
                    before = after
                C.say(f"round {rnd + 1}/{args.rounds} (QPS ratio to neighbours): " + ", ".join(line))
    info = machine.finish()
    report(cfg, args, results, ratios, cpu_ratios, info)


class NaivePerfP(PerfRecorder):
    """`perf record -p PID -g` (per-thread events), with the control FIFO so it can be toggled."""

    def argv(self, ctl: Path, ack: Path) -> list[str]:
        return [
            "perf",
            "record",
            "-p",
            str(self.pid),
            "-e",
            "cpu-clock",
            "-F",
            str(self.frequency),
            "-g",
            "-o",
            str(self.data),
            "-B",
            "-N",
            "-q",
            "-D",
            "-1",
            "--control",
            f"fifo:{ctl},{ack}",
        ]


TOGGLED: dict[str, Callable[[int, Path], Any]] = {
    **{n: f for n, f in CONFIGS.items() if f is not None and n != "naive-perf-p@99"},
    "naive-perf-p@99": lambda pid, work: NaivePerfP(pid, work, frequency=99),
}
BLOCK_S = 3  # observer on for 3 s, off for 3 s, ...; the 2 whole sysbench seconds inside a block count


def _pausers(observer: Any) -> list[Any]:
    if isinstance(observer, Profilers):
        return [o for o in (observer.perf, observer.pmp) if o is not None]
    return [observer]


def toggled(server: Mysqld, name: str, seconds: int, work: Path) -> dict[str, Any]:
    """One sysbench run of `seconds` with the observer switched on and off every BLOCK_S
    seconds; per block the mean of its whole per-second QPS figures."""
    argv = sysbench.argv(
        "oltp_read_only",
        "run",
        socket=server.socket,
        tables=TABLES,
        table_size=TABLE_SIZE,
        threads=THREADS,
        seconds=seconds,
        options=OPTIONS,
    )
    out = work / f"toggle-{name}.txt"
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with out.open("w", encoding="utf-8") as sink:
        child = Child(argv, env=clean_env(), stdout=sink)
    t0 = time.monotonic()
    with child:
        observer = TOGGLED[name](server.pid, work / f"toggle-{name}")
        with observer:
            on = True
            k = 1
            while child.poll() is None:
                boundary = t0 + 0.5 + k * BLOCK_S  # half-second boundaries: sysbench's seconds fall inside
                while (left := boundary - time.monotonic()) > 0 and child.poll() is None:
                    time.sleep(min(left, 0.1))
                for p in _pausers(observer):
                    p.pause() if on else p.resume()
                on, k = not on, k + 1
            child.wait(120)
    kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    blocks: dict[int, list[float]] = {}
    for iv in sysbench_output.parse_intervals(out.read_text(encoding="utf-8")):
        block = int((iv.t - 0.5) // BLOCK_S)  # (t-1, t] lies in [0.5 + b*3, 3.5 + b*3] for t = 3b+2, 3b+3
        if iv.t >= BLOCK_S + 2 and (iv.t - 2) % BLOCK_S in (0, 1):
            blocks.setdefault(block, []).append(iv.qps)
    means = {b: statistics.fmean(v) for b, v in sorted(blocks.items()) if len(v) == BLOCK_S - 1}
    ratios = [
        means[b] / ((means[b - 1] + means[b + 1]) / 2)
        for b in means
        if b % 2 == 0 and b - 1 in means and b + 1 in means
    ]  # block 0, 2, 4...: observer on
    sb = child.rusage
    observer_cpu = (kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime) - (sb.ru_utime + sb.ru_stime)
    return {"ratios": ratios, "observer_cpu_s": max(0.0, observer_cpu), "seconds": seconds}


def run_toggled(args: argparse.Namespace) -> None:
    machine = C.Machine()
    got: dict[str, dict[str, Any]] = {}
    with C.workdir(machine) as work:
        snap = mysqld_dataset.prepare(
            work,
            sysbench.Prepare("oltp_read_only", TABLES, TABLE_SIZE, OPTIONS),
            server_options={},
            log=work / "prepare.txt",
        )
        dataset.restore(snap, work / "srv" / "data")
        with Mysqld(work / "srv", work / "srv" / "data", {"innodb_buffer_pool_size": snap.buffer_pool}) as server:
            subprocess.run(
                sysbench.argv(
                    "oltp_read_only",
                    "run",
                    socket=server.socket,
                    tables=TABLES,
                    table_size=TABLE_SIZE,
                    threads=THREADS,
                    seconds=10,
                    options=OPTIONS,
                ),
                capture_output=True,
                check=True,
                timeout=120,
            )
            for name in args.only or TOGGLED:
                got[name] = toggled(server, name, args.toggle_seconds, work)
                r = got[name]["ratios"]
                C.say(f"{name}: {len(r)} on-blocks, QPS ratio to neighbouring off-blocks {C.mean(r):.3f}")
    info = machine.finish()
    rows, summary = [], {}
    for name, g in got.items():
        r = g["ratios"]
        ci = C.ci95(r)
        cost = 1 - C.mean(r)
        goal = GOALS.get(name)
        resolved = ci is not None and (ci[0] > 1 - goal if goal else False)
        verdict = (
            "-"
            if goal is None
            else ("MET" if ci and ci[0] >= 1 - goal else ("MISSED" if ci and ci[1] < 1 - goal else "UNRESOLVED"))
        )
        cpu_pct = 100 * g["observer_cpu_s"] / (g["seconds"] / 2)  # active about half the time
        rows.append(
            [
                name,
                len(r),
                f"{C.mean(r):.3f}",
                "-" if ci is None else f"{ci[0]:.3f}-{ci[1]:.3f}",
                f"{min(r):.3f}-{max(r):.3f}",
                C.pct(cost, 1),
                f"{cpu_pct:.1f}%",
                f"{goal:.0%}" if goal else "-",
                verdict,
            ]
        )
        summary[name] = {
            "blocks": len(r),
            "ratio_mean": C.rnd(C.mean(r)),
            "ratio_ci95": ci and [C.rnd(ci[0]), C.rnd(ci[1])],
            "ratio_min": C.rnd(min(r)),
            "ratio_max": C.rnd(max(r)),
            "observer_cpu_pct_of_core": round(cpu_pct, 2),
            "goal": goal,
            "verdict": verdict,
            "resolved": resolved,
        }
    C.say(
        f"\ntoggled: each observer on/off every {BLOCK_S} s within one {args.toggle_seconds} s sysbench run "
        f"(oltp_read_only, {THREADS} threads); ratio = QPS of an on-block / mean of the two neighbouring off-blocks; "
        "verdict MET when the 95% CI's lower end is within the goal, MISSED when its upper end is beyond it"
    )
    C.say(
        C.table(
            [
                "config",
                "on-blocks",
                "ratio",
                "95% CI",
                "min-max",
                "QPS cost",
                "observer CPU (of a core, when on)",
                "goal",
                "verdict",
            ],
            rows,
        )
    )
    C.say(C.Machine.describe(info))
    C.final_json(
        {"bench": "profile_overhead", "mode": "toggle", "block_s": BLOCK_S, "configs": summary, "machine": info}
    )


def report(cfg, args, results, ratios, cpu_ratios, info) -> None:
    rows, summary = [], {}
    for n in CONFIGS:
        r = ratios[n]
        ci = C.ci95(r)
        cost = 1 - C.mean(r)
        res = results[n]
        avg = lambda k: C.mean([x[k] for x in res])  # noqa: E731
        goal = GOALS.get(n)
        verdict = "-" if goal is None else ("MET" if cost < goal else "MISSED")
        rows.append(
            [
                n,
                f"{C.mean([x['qps'] for x in res]):,.0f}",
                f"{C.mean(r):.3f}",
                "-" if ci is None else f"{ci[0]:.3f}-{ci[1]:.3f}",
                f"{min(r):.3f}-{max(r):.3f}",
                C.pct(cost, 1),
                f"{C.mean(cpu_ratios[n]):.3f} ({min(cpu_ratios[n]):.3f}-{max(cpu_ratios[n]):.3f})",
                f"{avg('server_sys_s'):.2f}",
                f"{avg('observer_cpu_s'):.2f}",
                f"{avg('foreign_cores'):.2f}",
                f"{avg('fold_s'):.2f}",
                f"{goal:.0%}" if goal else "-",
                verdict,
            ]
        )
        summary[n] = {
            "ratio_mean": C.rnd(C.mean(r)),
            "cpu_per_txn_ratio_mean": C.rnd(C.mean(cpu_ratios[n])),
            "cpu_per_txn_ratio_min": C.rnd(min(cpu_ratios[n])),
            "cpu_per_txn_ratio_max": C.rnd(max(cpu_ratios[n])),
            "ratio_ci95": ci and [C.rnd(ci[0]), C.rnd(ci[1])],
            "ratio_min": C.rnd(min(r)),
            "ratio_max": C.rnd(max(r)),
            "server_sys_s": C.rnd(avg("server_sys_s")),
            "observer_cpu_s": C.rnd(avg("observer_cpu_s")),
            "foreign_cores": C.rnd(avg("foreign_cores")),
            "goal": goal,
            "verdict": verdict,
        }
    C.say(
        f"\n{args.rounds} rounds of {cfg['warmup']} s warm-up + {cfg['duration']} s window per configuration, "
        f"oltp_read_only, {THREADS} threads; ratio = QPS / mean QPS of the windows without observer just "
        "before and after (row none: a window without observer / the previous one)"
    )
    C.say(
        C.table(
            [
                "config",
                "QPS",
                "ratio",
                "95% CI",
                "min-max",
                "QPS cost",
                "CPU/txn ratio (min-max)",
                "server sys s",
                "observer cpu s",
                "others' cores",
                "fold s",
                "goal",
                "verdict",
            ],
            rows,
        )
    )
    C.say(C.Machine.describe(info))
    C.final_json({"bench": "profile_overhead", "rounds": args.rounds, **cfg, "configs": summary, "machine": info})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument(
        "--mode",
        choices=["toggle", "windows"],
        default="toggle",
        help="toggle: observer on/off every 3 s in one long run (default); windows: whole cell windows",
    )
    ap.add_argument("--toggle-seconds", type=int, default=90, help="toggle mode: sysbench seconds per observer")
    ap.add_argument("--only", nargs="+", choices=list(TOGGLED), help="toggle mode: these observers only")
    args = ap.parse_args()
    C.main_guard(lambda: run_toggled(args) if args.mode == "toggle" else run(args))


if __name__ == "__main__":
    main()
