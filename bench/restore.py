"""How much faster a cell starts from the snapshot than from a freshly prepared dataset.

What: two wall times, both through perflab's own functions, oltp_read_only, 4 tables x 100k:
  - prepare: perflab.servers.mysqld_dataset.prepare, i.e. mariadb-install-db of an empty datadir,
    start mariadbd, CREATE DATABASE, `sysbench oltp_read_only prepare` (4 x 100k rows),
    clean shutdown (what `perflab run` does once per experiment);
  - restore: perflab.servers.dataset.restore (copy of the stopped snapshot datadir) plus the
    start of mariadbd on the copy until it answers the handshake on its socket (what every
    cell does before its warm-up), with the options the scheduler gives a cell.
The ratio prepare / restore is reported as mean prepare time / mean restore time, with the
per-repetition ratios' min-max; the restore time is also split into copy and start.

How: N repetitions (10; 2 with --quick), interleaved ABBA so a slow drift of the machine
hits both alike: P R, R P, P R, ... Each prepare builds a new snapshot; a restore uses the
newest snapshot. After each timed restore (untimed) the rows of sbtest1 are counted, to
prove the restored server really serves the dataset; then it is stopped the way the
scheduler stops a cell (SIGKILL; the copy is thrown away). Everything lives in one
directory on /dev/shm (prefix plbench-), removed at the end whatever happens.

Goal: restore >= 5x faster than prepare (prepare / restore >= 5).

Run: python3 bench/restore.py           # the figures we quote (~1 minute when idle)
     python3 bench/restore.py --quick   # smoke test: 2 repetitions (~15 s)
Exit status: 0 when it measured (GOAL MET or GOAL MISSED is printed), 1 on a real error.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path
from typing import Any

import _common as C

from perflab.servers import dataset, mysqld_dataset

from perflab.workloads import sysbench
from perflab.servers.mysqld import Mysqld

GOAL_RATIO = 5.0
TEST = "oltp_read_only"


def settings(quick: bool) -> dict[str, Any]:
    return {"reps": 2 if quick else 10, "tables": 4, "table_size": 100_000}


def do_prepare(cfg: dict[str, Any], where: Path) -> tuple[dataset.Snapshot, float]:
    (where / "logs").mkdir(parents=True)
    t0 = time.monotonic()
    snap = mysqld_dataset.prepare(
        where,
        sysbench.Prepare(TEST, cfg["tables"], cfg["table_size"], {}),
        server_options={},
        log=where / "logs" / "prepare.txt",
    )
    return snap, time.monotonic() - t0


def do_restore(cfg: dict[str, Any], snap: dataset.Snapshot, rundir: Path) -> dict[str, float]:
    t0 = time.monotonic()
    copy_s = dataset.restore(snap, rundir / "data")
    server = Mysqld(rundir, rundir / "data", {"innodb_buffer_pool_size": snap.buffer_pool})
    t1 = time.monotonic()
    try:
        server.start()
        t2 = time.monotonic()
        rows = server.sql("SELECT COUNT(*) FROM sbtest.sbtest1").strip()
        if rows != str(cfg["table_size"]):
            raise C.BenchError(f"restored server has {rows!r} rows in sbtest1, expected {cfg['table_size']}")
    finally:
        server.stop()
        shutil.rmtree(rundir, ignore_errors=True)
    return {"restore_s": t2 - t0, "copy_s": copy_s, "start_s": t2 - t1}


def run(args: argparse.Namespace) -> None:
    cfg = settings(args.quick)
    machine = C.Machine()
    started = time.monotonic()
    C.say(
        f"bench/restore.py ({'quick' if args.quick else 'full'}): {TEST}, {cfg['tables']} x "
        f"{cfg['table_size']:,} rows, {cfg['reps']} repetitions, interleaved ABBA"
    )
    prepares: list[float] = []
    restores: list[dict[str, float]] = []
    sizes: dict[str, int] = {}
    with C.workdir(machine) as work:
        snap: dataset.Snapshot | None = None
        for i in range(cfg["reps"]):
            order = ("prepare", "restore") if i % 2 == 0 else ("restore", "prepare")
            for step in order:
                if step == "prepare":
                    old = snap
                    snap, seconds = do_prepare(cfg, work / f"prep-{i}")
                    prepares.append(seconds)
                    if old is not None:
                        shutil.rmtree(old.datadir.parent, ignore_errors=True)
                    sizes = {
                        "snapshot_bytes": dataset.tree_bytes(snap.datadir),
                        "sbtest_bytes": snap.data_bytes,
                        "redo_log_bytes": _size(snap.datadir / "ib_logfile0"),
                    }
                else:
                    assert snap is not None
                    restores.append(do_restore(cfg, snap, work / f"restore-{i}"))
            C.say(
                f"  rep {i + 1} ({order[0]} first): prepare {prepares[-1]:6.2f} s, "
                f"restore {restores[-1]['restore_s']:5.2f} s "
                f"(copy {restores[-1]['copy_s']:.2f} + start {restores[-1]['start_s']:.2f}), "
                f"ratio {prepares[-1] / restores[-1]['restore_s']:.1f}"
            )
    info = machine.finish()
    report(cfg, prepares, restores, sizes, info, args.quick, time.monotonic() - started)


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def report(
    cfg: dict[str, Any],
    prepares: list[float],
    restores: list[dict[str, float]],
    sizes: dict[str, int],
    info: dict[str, Any],
    quick: bool,
    wall: float,
) -> None:
    rest = [r["restore_s"] for r in restores]
    copy = [r["copy_s"] for r in restores]
    start = [r["start_s"] for r in restores]
    ratio = C.mean(prepares) / C.mean(rest)
    pair_ratios = [p / r for p, r in zip(prepares, rest)]
    C.say()

    def row(name: str, xs: list[float]) -> list[Any]:
        ci = C.ci95(xs)
        return [
            name,
            len(xs),
            f"{C.mean(xs):.3f}",
            f"{min(xs):.3f}-{max(xs):.3f}",
            C.pct(C.cv(xs), 1),
            f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else "-",
        ]

    C.say(
        C.table(
            ["step (seconds)", "n", "mean", "min-max", "CV", "95% CI"],
            [
                row("prepare (install+start+sysbench prepare+clean stop)", prepares),
                row("restore (copy + start to ready)", rest),
                row("  of which copy", copy),
                row("  of which start to ready", start),
            ],
        )
    )
    mib = 2**20
    C.say(
        f"snapshot: {sizes['snapshot_bytes'] / mib:.0f} MiB copied per restore, of which sbtest "
        f"{sizes['sbtest_bytes'] / mib:.0f} MiB and redo log ib_logfile0 {sizes['redo_log_bytes'] / mib:.0f} MiB"
    )
    C.say()
    C.say(
        f"prepare / restore: {ratio:.2f}x (mean / mean); per repetition {min(pair_ratios):.2f}-{max(pair_ratios):.2f}x"
    )
    C.say(C.Machine.describe(info))
    if quick:
        C.say("(quick mode: 2 repetitions; a smoke test, not the figure to quote)")
    met = ratio >= GOAL_RATIO
    C.say(f"{'GOAL MET' if met else 'GOAL MISSED'}: restore {ratio:.2f}x faster than prepare, goal >= {GOAL_RATIO:g}x")
    C.final_json(
        {
            "bench": "restore",
            "quick": quick,
            "settings": cfg,
            "order": "ABBA",
            "prepare_s": [round(x, 3) for x in prepares],
            "restore_s": [round(x, 3) for x in rest],
            "copy_s": [round(x, 3) for x in copy],
            "start_s": [round(x, 3) for x in start],
            "prepare_mean_s": round(C.mean(prepares), 3),
            "restore_mean_s": round(C.mean(rest), 3),
            "copy_mean_s": round(C.mean(copy), 3),
            "start_mean_s": round(C.mean(start), 3),
            "ratio": round(ratio, 3),
            "ratio_per_rep": [round(x, 3) for x in pair_ratios],
            **sizes,
            "goal_ratio": GOAL_RATIO,
            "goal_met": met,
            "machine": info,
            "wall_s": round(wall, 1),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 2 repetitions")
    args = parser.parse_args()
    C.main_guard(lambda: run(args))


if __name__ == "__main__":
    main()
