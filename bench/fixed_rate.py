"""MariaDB at a fixed rate (issue 50): p99 from the intended start against service time, at 50/80/95% of max.

p99 latency from each transaction's intended start against its service time, at 50%, 80% and 95%
of the maximum rate measured closed-loop in the same run.

What: one mariadbd (perflab's Mysqld, on /dev/shm), sysbench oltp_point_select on THREADS client
threads over 4 x 100,000 rows, every run through perflab's turns.lua wrapper
(workloads/turn_latency.py), which times each event's execution alone on CLOCK_MONOTONIC into a
shared histogram: that is the service time. The wrapper costs client CPU, and on this 2-vCPU
machine the client and the server share the cores, so the maximum is measured through it too:
REPEATS closed-loop runs (no --rate), each WARMUP + WINDOW seconds with --report-checkpoints at
the warm-up's end; the maximum is the mean of their window tps. (Measured without the wrapper,
95% of it overloaded the wrapped runs.) Then, in a shuffled order per round, REPEATS runs at each
of 50%, 80% and 95% of it with --rate. sysbench's own latency at a rate counts from the event's
intended start (its queue time added: docs/workloads.md#load-at-a-fixed-rate-open-loop). A run
that cannot keep its rate is a result, recorded as not kept with its reason: sysbench's event
queue overflowed (it prints FATAL and exits 1 without a summary) or workloads/rate.judge says the
window fell short or left a backlog; only a real failure (no server, no connection) stops the
bench. Printed per load: target and mean achieved rate, runs that kept it (n/m), p50/p99 from the
intended start (sysbench's window summary) and of the service time (the wrapper's histogram over
the same window), their ratio (the latencies over the runs that kept the rate), and the largest
other_cpu_cores of its runs (the CPU other processes used: a busy machine's figure is not this
machine's); then the reason of each run not kept.

Expectation (Little's law and queueing): at 50% the two p99s are close (the intended start adds
little more than sysbench's worker poll, 0.5 x threads / rate seconds); at 95% the intended-start
p99 is several times the service p99, which a closed loop would have reported as the latency.
Measured (docs/results.md#load-at-a-fixed-rate): it held at 10% and 25%, not at 50%: at a rate
the client and the server cost more CPU per transaction than in a closed loop (printed: "CPU per
transaction"), so on this 2-vCPU machine half the closed-loop maximum already keeps 1.9 cores busy.
Run: python3 bench/fixed_rate.py              # about 6 minutes on an idle machine
     python3 bench/fixed_rate.py --quick      # smoke test: 2 repeats of 4 s windows, a small dataset
     python3 bench/fixed_rate.py --loads 0.1,0.25,0.5   # other shares of the maximum
Exit status: 0 when it measured, 1 on a real error, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's perflab, before _common's
import _common as C  # noqa: E402
from perflab.places.proc import clean_env, guarded  # noqa: E402
from perflab.places.procfs import process_cpu_s  # noqa: E402
from perflab.servers.mariadb.datadir import install_datadir  # noqa: E402
from perflab.servers.mysqld import Mysqld  # noqa: E402
from perflab.workloads import sysbench, sysbench_output  # noqa: E402
from perflab.workloads.turn_latency import WRAPPER, TurnClock  # noqa: E402

TEST = "oltp_point_select"
LOADS = (0.5, 0.8, 0.95)


def loads(text: str) -> tuple[float, ...]:
    """--loads: shares of the maximum, each in (0, 1.5]."""
    found = tuple(float(x) for x in text.split(","))
    if not all(0 < x <= 1.5 for x in found):
        raise argparse.ArgumentTypeError(f"{text!r}: shares of the maximum in (0, 1.5], e.g. 0.1,0.25,0.5")
    return found


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"threads": 4, "tables": 2, "table_size": 10_000, "warmup": 2, "window": 4, "repeats": 2}
    return {"threads": 8, "tables": 4, "table_size": 100_000, "warmup": 5, "window": 20, "repeats": 3}


def run_sysbench(argv: list[str]) -> str:
    done = subprocess.run(
        guarded(argv), env=clean_env(None), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=600, check=False, start_new_session=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise C.BenchError(f"sysbench exited {done.returncode}:\n{done.stdout[-2000:]}")
    return done.stdout


def argv(server: Mysqld, cfg: dict[str, Any], test: str, options: dict[str, Any]) -> list[str]:
    return sysbench.argv(
        test, "run", socket=server.socket, tables=cfg["tables"], table_size=cfg["table_size"],
        threads=cfg["threads"], seconds=cfg["warmup"] + cfg["window"], checkpoint=cfg["warmup"], options=options,
    )  # fmt: skip


@dataclass(frozen=True)
class Wrapped:
    """One sysbench run through turns.lua: its output and exit status, the window's service time
    (the wrapper's histogram from sysbench's checkpoint to its end, ms) and what else the machine ran."""

    out: str
    returncode: int
    service: dict[str, float | None]
    other_cpu_cores: float | None
    client_us_per_txn: float | None  # sysbench's CPU over its run's events (every report's)
    server_us_per_txn: float | None


def wrapped(server: Mysqld, cfg: dict[str, Any], options: dict[str, Any], workdir: Path) -> Wrapped:
    """sysbench through perflab's wrapper, closed-loop or at a rate: the same client cost either way.
    The window's histogram is read at sysbench's checkpoint report (its lines reach the pipe as printed)."""
    clock = TurnClock.create(workdir / "turns", cfg["threads"])
    mark, client0, server0 = C.cpu_mark([server.pid]), children_cpu_s(), process_cpu_s(server.pid)
    child = subprocess.Popen(
        guarded(argv(server, cfg, str(WRAPPER), options)), env=clean_env(clock.environment(TEST)),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        lines, before = [], None
        assert child.stdout is not None
        for line in child.stdout:
            lines.append(line)
            if before is None and "Checkpoint report" in line:
                before = clock.read()
        child.wait(timeout=60)
        after, events = clock.read(), clock.reported()[3]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        clock.close()
    service = (after - before).summary() if before else dict.fromkeys(("min", "avg", "max", "p50", "p95", "p99"))
    cores = C.foreign_cores(mark, C.cpu_mark([server.pid]))
    client, own = children_cpu_s() - client0, process_cpu_s(server.pid) - server0
    per = (lambda cpu: C.rnd(cpu * 1e6 / events, 1)) if events else (lambda cpu: None)  # noqa: E731
    return Wrapped("".join(lines), child.returncode, service, C.rnd(cores, 3), per(client), per(own))


def children_cpu_s() -> float:
    """User + system CPU of this process's reaped children (the sysbench runs, one at a time)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def closed_loop(server: Mysqld, cfg: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """One closed-loop run through the wrapper: its window tps is a sample of the maximum rate."""
    run = wrapped(server, cfg, {}, workdir)
    summary = sysbench_output.parse_summary(run.out) if run.returncode == 0 else None
    if summary is None:
        raise C.BenchError(f"closed loop: sysbench exited {run.returncode} without a summary:\n{run.out[-2000:]}")
    return {"tps": summary.tps, "other_cpu_cores": run.other_cpu_cores, "client_us_per_txn": run.client_us_per_txn,
            "server_us_per_txn": run.server_us_per_txn}  # fmt: skip


def at_rate(server: Mysqld, cfg: dict[str, Any], target: int, workdir: Path) -> dict[str, Any]:
    """One run at `target`/s through the wrapper: sysbench's intended-start latency, the wrapper's
    service time. A run that could not keep the rate (its event queue overflowed, or rate.judge
    says not kept) is a result, not kept, with its reason; any other failure is an error."""
    run = wrapped(server, cfg, {"rate": target}, workdir)
    record = sysbench_output.parse_rate(run.out, cfg["warmup"])
    kept, why = (record["kept"], record["reason"]) if record else (False, "no rate record in sysbench's output")
    if run.returncode != 0:
        why = sysbench_output.overflow(run.out)
        if why is None:
            raise C.BenchError(f"sysbench at {target}/s exited {run.returncode}:\n{run.out[-2000:]}")
        kept = False
    summary = sysbench_output.parse_summary(run.out) if run.returncode == 0 else None
    lat = summary.latency_ms if summary else {}
    achieved = record["achieved"] if record and record["seconds"] else None
    return {"target": target, "achieved": achieved, "kept": kept, "why": why,
            "intended_p50": lat.get("p50"), "intended_p99": lat.get("p99"),
            "service_p50": run.service["p50"], "service_p99": run.service["p99"],
            "other_cpu_cores": run.other_cpu_cores, "client_us_per_txn": run.client_us_per_txn,
            "server_us_per_txn": run.server_us_per_txn}  # fmt: skip


def measure(cfg: dict[str, Any], workdir: Path) -> dict[str, Any]:
    datadir = workdir / "data"
    install_datadir(datadir)
    with Mysqld(workdir / "run", datadir, {}) as server:
        server.sql("CREATE DATABASE IF NOT EXISTS sbtest")
        given = {"socket": server.socket, "tables": cfg["tables"], "table_size": cfg["table_size"]}
        run_sysbench(sysbench.argv(TEST, "prepare", threads=min(cfg["tables"], 2), **given))
        closed = [closed_loop(server, cfg, workdir) for _ in range(cfg["repeats"])]
        maximum = C.mean([c["tps"] for c in closed])
        samples = ", ".join(f"{c['tps']:,.0f}" for c in closed)
        C.say(f"closed-loop maximum through the wrapper: {maximum:,.0f} tps ({samples})")
        targets = [max(1, round(maximum * share)) for share in cfg["loads"]]
        runs: list[dict[str, Any]] = []
        for _ in range(cfg["repeats"]):
            for target in random.sample(targets, len(targets)):
                runs.append(at_rate(server, cfg, target, workdir))
                C.say(f"  {target:,}/s: " + ("kept" if runs[-1]["kept"] else f"not kept: {runs[-1]['why']}"))
                if not server.alive():
                    raise C.BenchError(f"mariadbd died at {target}/s:\n{server.error_lines()}")
        server.stop(clean=True)
    return {"max_tps": round(maximum, 1), "closed_loop": closed, "loads": cfg["loads"], "targets": targets, "runs": runs}


def load_row(share: float, target: int, mine: list[dict[str, Any]]) -> list[Any]:
    """A load's line: latencies are the mean over the runs that kept the rate (none: '-')."""
    kept = [r for r in mine if r["kept"]]

    def mean(key: str) -> float | None:
        found = [r[key] for r in kept if r[key] is not None]
        return C.mean(found) if found else None

    p99, s99 = mean("intended_p99"), mean("service_p99")
    achieved = [r["achieved"] for r in mine if r["achieved"] is not None]
    other = [r["other_cpu_cores"] for r in mine if r["other_cpu_cores"] is not None]
    return [f"{share:.0%}", f"{target:,}", f"{C.mean(achieved):,.0f}" if achieved else "-",
            f"{len(kept)}/{len(mine)}", C.rnd(mean("intended_p50"), 3), C.rnd(p99, 3), C.rnd(mean("service_p50"), 3),
            C.rnd(s99, 3), C.rnd(p99 / s99, 2) if p99 and s99 else None, f"{max(other):.3f}" if other else None]  # fmt: skip


def cpu_line(found: dict[str, Any]) -> str:
    """CPU per transaction (whole runs, every run at a load, kept or not): what a rate costs the
    client and the server beside a closed loop, on cores they share."""

    def figure(runs: list[dict[str, Any]], key: str) -> str:
        found = [r[key] for r in runs if r[key] is not None]
        return f"{C.mean(found):,.0f}" if found else "-"

    parts = [f"closed loop {figure(found['closed_loop'], 'client_us_per_txn')}/"
             f"{figure(found['closed_loop'], 'server_us_per_txn')}"]  # fmt: skip
    for share, target in zip(found["loads"], found["targets"]):
        mine = [r for r in found["runs"] if r["target"] == target]
        parts.append(f"{share:.0%} {figure(mine, 'client_us_per_txn')}/{figure(mine, 'server_us_per_txn')}")
    return "CPU per transaction, client/server us: " + ", ".join(parts)


def report(cfg: dict[str, Any], found: dict[str, Any], quick: bool) -> None:
    rows = [
        load_row(share, target, [r for r in found["runs"] if r["target"] == target])
        for share, target in zip(found["loads"], found["targets"])
    ]
    C.say(f"closed-loop maximum through turns.lua: {found['max_tps']:,} tps ({cfg['threads']} threads, {TEST})")
    header = ["load", "target/s", "achieved/s", "kept", "p50 intended ms", "p99 intended ms", "p50 service ms",
              "p99 service ms", "p99 intended/service", "other_cpu_cores max"]  # fmt: skip
    C.say(C.table(header, rows))
    C.say(cpu_line(found))
    for r in found["runs"]:
        if not r["kept"]:
            C.say(f"not kept at {r['target']:,}/s: {r['why']}")
    every = [c["other_cpu_cores"] for c in found["closed_loop"] + found["runs"] if c["other_cpu_cores"] is not None]
    C.say(f"other_cpu_cores over the runs: mean {C.mean(every):.3f}, max {max(every):.3f}")
    if max(every) > C.BUSY_CORES:
        C.say("WARNING: the machine was not idle; these figures include other people's load")
    if quick:
        C.say("(quick mode: short windows, a small dataset; a smoke test, not the figures to quote)")
    C.final_json({"bench": "fixed_rate", "quick": quick, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "settings": cfg, **found})  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 2 repeats of 4 s windows, a small dataset")
    parser.add_argument("--loads", type=loads, default=LOADS, help="shares of the maximum, e.g. 0.1,0.25,0.5 (default 0.5,0.8,0.95)")
    args = parser.parse_args()
    cfg = {**settings(args.quick), "loads": args.loads}

    def run() -> None:
        with C.workdir() as workdir:
            found = measure(cfg, workdir)
        report(cfg, found, args.quick)

    C.main_guard(run)


if __name__ == "__main__":
    main()
