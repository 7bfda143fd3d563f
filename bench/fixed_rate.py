"""MariaDB at a fixed rate (issue 50): p99 from the intended start against service time, at 50/80/95% of max.

p99 latency from each transaction's intended start against its service time, at 50%, 80% and 95%
of the maximum rate measured closed-loop in the same run.

What: one mariadbd (perflab's Mysqld, on /dev/shm), sysbench oltp_point_select on THREADS client
threads over 4 x 100,000 rows. First the maximum: REPEATS closed-loop runs (no --rate), each
WARMUP + WINDOW seconds with --report-checkpoints at the warm-up's end; the maximum is the mean of
their window tps. Then, in a shuffled order per round, REPEATS runs at each of 50%, 80% and 95% of
it with --rate, through perflab's turns.lua wrapper (workloads/turn_latency.py), which times each
event's execution alone on CLOCK_MONOTONIC into a shared histogram: that is the service time.
sysbench's own latency at a rate counts from the event's intended start (its queue time added:
docs/workloads.md#load-at-a-fixed-rate-open-loop). Printed per load: target and achieved rate,
whether each run kept it (workloads/rate.judge), p50/p99 from the intended start (sysbench's
window summary) and of the service time (the wrapper's window histogram), their ratio, and
other_cpu_cores of the machine over the runs (a figure from a busy machine is not this machine's).

Expectation (Little's law and queueing): at 50% the two p99s are close (the intended start adds
little more than sysbench's worker poll, 0.5 x threads / rate seconds); at 95% the intended-start
p99 is several times the service p99, which a closed loop would have reported as the latency.
Run: python3 bench/fixed_rate.py              # about 6 minutes on an idle machine
     python3 bench/fixed_rate.py --quick      # smoke test: 2 repeats of 4 s windows, a small dataset
Exit status: 0 when it measured, 1 on a real error, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's perflab, before _common's
import _common as C  # noqa: E402
from perflab.places.proc import clean_env, guarded  # noqa: E402
from perflab.servers.mariadb.datadir import install_datadir  # noqa: E402
from perflab.servers.mysqld import Mysqld  # noqa: E402
from perflab.workloads import rate, sysbench, sysbench_output  # noqa: E402
from perflab.workloads.turn_latency import WRAPPER, TurnClock  # noqa: E402

TEST = "oltp_point_select"
LOADS = (0.5, 0.8, 0.95)


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"threads": 4, "tables": 2, "table_size": 10_000, "warmup": 2, "window": 4, "repeats": 2}
    return {"threads": 8, "tables": 4, "table_size": 100_000, "warmup": 5, "window": 20, "repeats": 3}


def run_sysbench(argv: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        guarded(argv), env=clean_env(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
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


def closed_loop(server: Mysqld, cfg: dict[str, Any]) -> float:
    """The window tps of one closed-loop run: the maximum rate's sample."""
    summary = sysbench_output.parse_summary(run_sysbench(argv(server, cfg, TEST, {})))
    if summary is None:
        raise C.BenchError("closed loop: sysbench printed no summary")
    return summary.tps


def at_rate(server: Mysqld, cfg: dict[str, Any], target: int, workdir: Path) -> dict[str, Any]:
    """One run at `target`/s through turns.lua: sysbench's intended-start latency, the wrapper's service time."""
    clock = TurnClock.create(workdir / f"turns-{target}", cfg["threads"])
    try:
        env = clock.environment(TEST)
        child = subprocess.Popen(
            guarded(argv(server, cfg, str(WRAPPER), {"rate": target})), env=clean_env(env),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip
        time.sleep(cfg["warmup"] + 0.5)  # sysbench's checkpoint: the window starts (its threads start in ms)
        before = clock.read()
        out, _ = child.communicate(timeout=cfg["window"] + 600)
        service = (clock.read() - before).summary()
    finally:
        clock.close()
    if child.returncode != 0:
        raise C.BenchError(f"sysbench at {target}/s exited {child.returncode}:\n{out[-2000:]}")
    summary = sysbench_output.parse_summary(out)
    seconds = [(iv.t, iv.tps, None) for iv in sysbench_output.parse_intervals(out) if iv.t > cfg["warmup"]]
    kept, why = rate.judge(target, seconds)
    lat = summary.latency_ms if summary else {}
    return {"target": target, "achieved": summary.tps if summary else 0.0, "kept": kept, "why": why,
            "intended_p50": lat.get("p50"), "intended_p99": lat.get("p99"),
            "service_p50": service["p50"], "service_p99": service["p99"]}  # fmt: skip


def measure(cfg: dict[str, Any], workdir: Path) -> dict[str, Any]:
    datadir = workdir / "data"
    install_datadir(datadir)
    mark = C.cpu_mark()
    with Mysqld(workdir / "run", datadir, {}) as server:
        server.sql("CREATE DATABASE IF NOT EXISTS sbtest")
        given = {"socket": server.socket, "tables": cfg["tables"], "table_size": cfg["table_size"]}
        run_sysbench(sysbench.argv(TEST, "prepare", threads=min(cfg["tables"], 2), **given))
        maximum = C.mean([closed_loop(server, cfg) for _ in range(cfg["repeats"])])
        targets = [max(1, round(maximum * share)) for share in LOADS]
        runs: list[dict[str, Any]] = []
        for _ in range(cfg["repeats"]):
            for target in random.sample(targets, len(targets)):
                runs.append(at_rate(server, cfg, target, workdir))
        server.stop(clean=True)
    return {"max_tps": round(maximum, 1), "targets": targets, "runs": runs,
            "other_cpu_cores": C.foreign_cores(mark, C.cpu_mark())}  # fmt: skip


def report(cfg: dict[str, Any], found: dict[str, Any], quick: bool) -> None:
    rows = []
    for share, target in zip(LOADS, found["targets"]):
        mine = [r for r in found["runs"] if r["target"] == target]
        kept = [r for r in mine if r["kept"]]
        mean = lambda key: C.mean([r[key] for r in kept if r[key] is not None]) if kept else None  # noqa: E731
        ratio = (mean("intended_p99") or 0) / mean("service_p99") if kept and mean("service_p99") else None
        rows.append([f"{share:.0%}", f"{target:,}", f"{C.mean([r['achieved'] for r in mine]):,.0f}",
                     f"{len(kept)}/{len(mine)}", C.rnd(mean("intended_p50"), 3), C.rnd(mean("intended_p99"), 3),
                     C.rnd(mean("service_p50"), 3), C.rnd(mean("service_p99"), 3), C.rnd(ratio, 2)])  # fmt: skip
    C.say(f"closed-loop maximum: {found['max_tps']:,} tps ({cfg['threads']} threads, {TEST})")
    header = ["load", "target/s", "achieved/s", "kept", "p50 intended ms", "p99 intended ms", "p50 service ms",
              "p99 service ms", "p99 intended/service"]  # fmt: skip
    C.say(C.table(header, [list(map(str, r)) for r in rows]))
    C.say(f"other_cpu_cores over the run: {found['other_cpu_cores']}")
    if quick:
        C.say("(quick mode: short windows, a small dataset; a smoke test, not the figures to quote)")
    C.final_json({"bench": "fixed_rate", "quick": quick, "settings": cfg, **found})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 2 repeats of 4 s windows, a small dataset")
    args = parser.parse_args()
    cfg = settings(args.quick)

    def run() -> None:
        with C.workdir() as workdir:
            found = measure(cfg, workdir)
        report(cfg, found, args.quick)

    C.main_guard(run)


if __name__ == "__main__":
    main()
