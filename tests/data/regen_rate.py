#!/usr/bin/env python3
"""Re-record the fixed-rate outputs in tests/data/rate/ (workloads/rate.py) from the real tools.

    python3 tests/data/regen_rate.py            # start a mariadbd and a postgres, record
    python3 tests/data/regen_rate.py --sysbench # only sysbench's recordings

sysbench 1.0.20 against a throw-away mariadbd (1 table x 1000 rows), run as the scheduler runs it
(perflab's sysbench.argv: --report-checkpoints at the warm-up's end), stdout and stderr in one stream:

- sysbench_rate_kept.txt: oltp_point_select at --rate=300 on 2 threads, 2 s warm-up + 4 s: kept;
- sysbench_rate_backlog.txt: tests/data/workloads/slow.lua (10 ms a transaction) at --rate=300 on 2
  threads, which serve 200 a second: the queue grows, latency (from the intended start) with it;
- sysbench_rate_overflow.txt: oltp_point_select at --rate=1000000: its event queue (131,072) fills
  up at once, sysbench prints "FATAL: The event queue is full" and exits 1 without a summary.

pgbench 15 against a throw-away postgres (scale 1), perflab's pgbench_argv.argv with --rate: its
per-transaction log (schedule lag column) and its output:

- pgbench_rate/pgbench.txt and pgbench_rate/pgbench_log.*: select-only at --rate=300 on 2 clients, 4 s;
- pgbench_rate_limit/...: the same at --rate=1000 --latency-limit=0.1: a transaction whose start is
  already 0.1 ms late is skipped, so many are, and the achieved rate falls short of the target.

Each recording's facts are asserted by tests/unit/test_rate_parse.py; read the diff before committing.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "rate"
sys.path.insert(0, str(HERE.parent.parent))  # the perflab checkout this file belongs to

from perflab.places.proc import clean_env, guarded  # noqa: E402
from perflab.servers.mariadb.datadir import install_datadir  # noqa: E402
from perflab.servers.mysqld import Mysqld  # noqa: E402
from perflab.workloads import pgbench_argv, sysbench  # noqa: E402

SLOW = HERE / "workloads" / "slow.lua"
# name -> (test, --rate, more options)
SYSBENCH_RUNS = {
    "sysbench_rate_kept": ("oltp_point_select", 300, {}),
    "sysbench_rate_backlog": (str(SLOW), 300, {"sleep_ms": 10}),  # 2 threads serve 200/s at most
    "sysbench_rate_overflow": ("oltp_point_select", 1_000_000, {}),
}
PGBENCH_RUNS = {"pgbench_rate": {"rate": 300}, "pgbench_rate_limit": {"rate": 1000, "latency_limit": 0.1}}


def run(argv: list[str], timeout: int = 120) -> tuple[int, str]:
    """Like the scheduler: stdout and stderr interleaved in one stream."""
    done = subprocess.run(
        guarded(argv),
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
        start_new_session=True,
    )
    return done.returncode, done.stdout


def record_sysbench(workdir: Path) -> None:
    datadir = workdir / "data"
    install_datadir(datadir)
    with Mysqld(workdir / "run", datadir, {}) as server:
        server.sql("CREATE DATABASE IF NOT EXISTS sbtest")
        given = {"socket": server.socket, "tables": 1, "table_size": 1000}
        code, text = run(sysbench.argv("oltp_point_select", "prepare", threads=1, **given))
        if code != 0:
            raise SystemExit(f"sysbench prepare failed ({code}):\n{text}")
        for name, (test, rate, options) in SYSBENCH_RUNS.items():
            options = {"rate": rate, **options}
            argv = sysbench.argv(test, "run", threads=2, seconds=6, checkpoint=2, options=options, **given)
            code, text = run(argv)
            text = text.replace(str(workdir), "/dev/shm/perflab-regen").replace(str(HERE.parent.parent), "ROOT")
            (OUT / f"{name}.txt").write_text(text, encoding="utf-8")
            print(f"{name}: exit {code}")
        server.stop(clean=True)


def record_pgbench(workdir: Path) -> None:
    from perflab.servers.postgresql.server import PORT, SUPERUSER, PostgreSQL, give, initdb

    datadir = workdir / "pgdata"
    give(workdir)
    initdb(datadir, workdir / "initdb.txt")
    with PostgreSQL(workdir / "pgrun", datadir, {}) as server:  # started, stopped on any exit
        server.sql(f"CREATE DATABASE {pgbench_argv.DATABASE}")
        code, text = run(pgbench_argv.init_argv(1, socket_dir=server.rundir, port=PORT, user=SUPERUSER))
        if code != 0:
            raise SystemExit(f"pgbench -i failed ({code}):\n{text}")
        for name, options in PGBENCH_RUNS.items():
            there = OUT / name
            shutil.rmtree(there, ignore_errors=True)
            there.mkdir()
            argv = pgbench_argv.argv(
                "select-only",
                socket_dir=server.rundir,
                port=PORT,
                user=SUPERUSER,
                clients=2,
                jobs=2,
                seconds=4,
                log_prefix=there / "pgbench_log",
                options=options,
            )
            code, text = run(argv)
            (there / "pgbench.txt").write_text(text.replace(str(workdir), "/dev/shm/perflab-regen"), encoding="utf-8")
            print(f"{name}: exit {code}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sysbench", action="store_true", help="record sysbench's only")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="perflab-regen-", dir="/dev/shm"))
    try:
        record_sysbench(workdir)  # the servers' context managers kill them on any exit
        if not args.sysbench:
            record_pgbench(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
