#!/usr/bin/env python3
"""Re-record the go-tpc outputs in tests/data/gotpc/ from the real go-tpc (`make go-tpc`).

    flock /work/measure.lock python3 tests/data/regen_gotpc.py     # about 4 minutes on 2 vCPUs

Starts one mariadbd through perflab's own classes on a throw-away datadir under /dev/shm,
creates the user tpcc@127.0.0.1 and runs `go-tpc tpcc prepare` for one warehouse as a cell's
dataset stage does (prepare.txt), then `go-tpc tpcc run` with 4 clients for 15 s twice: once
through perflab's stamping pipe, as a cell writes it (run-stamped.txt), once as go-tpc prints it
(run-unstamped.txt). Then the same against a PostgreSQL 15 perflab starts (initdb, its socket
only, go-tpc's postgres driver as a cell runs it): prepare-pg.txt, run-pg-stamped.txt, and
run-pg-wait.txt with --wait (TPC-C's keying and think times: 10 clients, 20 s, a handful of
transactions). Each server is killed and its datadir removed at the end, even on failure.
run-stall.txt is a cell's log kept from a real run (a stall at 6-7 s); re-record it by copying
logs/cell-NNNN/go-tpc.txt of a results directory whose report names a stall.
The unit tests (tests/unit/test_gotpc_parse.py) read counts from the recordings themselves,
so a new recording needs no expected-values file.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "gotpc"
sys.path.insert(0, str(HERE.parent.parent))  # the perflab checkout this file belongs to

from perflab.workloads import client
from perflab.places.proc import clean_env
from perflab.workloads import gotpc, tpcc
from perflab.servers.mariadb.datadir import install_datadir
from perflab.servers.managed import LOOPBACK
from perflab.servers.mysqld import Mysqld
from perflab.servers.postgresql.server import PORT, SUPERUSER, PostgreSQL, initdb

SECONDS, THREADS = 15, 4


def main() -> None:
    OUT.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="perflab-regen-gotpc-", dir="/dev/shm"))
    tmp.chmod(0o711)  # the servers' own users (mysql, postgres) reach their directories below it
    try:
        install_datadir(tmp / "data")
        server = Mysqld(tmp / "run", tmp / "data", {"innodb_buffer_pool_size": "512M"})
        server.bind_address = LOOPBACK  # go-tpc's MySQL driver: TCP only (as a cell's server listens)
        with server:
            server.sql(f"CREATE DATABASE {gotpc.DATABASE}")
            server.sql(tpcc.GO_TPC.setup_sql())
            argv = server.client(gotpc.argv("prepare", port=server.port, warehouses=1, threads=2))  # its network
            done = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), check=True)
            (OUT / "prepare.txt").write_text(done.stdout + done.stderr, encoding="utf-8")
            run = server.client(gotpc.argv("run", port=server.port, warehouses=1, threads=THREADS, seconds=SECONDS))
            stamped(run, OUT / "run-stamped.txt", SECONDS)
            done = subprocess.run(run, capture_output=True, text=True, env=clean_env(), check=True)
            (OUT / "run-unstamped.txt").write_text(done.stdout, encoding="utf-8")
        postgresql(tmp / "pg")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def stamped(argv: list[str], out: Path, seconds: int, cut: bool = False) -> None:
    """go-tpc through perflab's stamping pipe; `cut`: killed 5 s after its --time, as perflab ends
    a --wait run (its clients finish their keying and think times past it, reporting nothing)."""
    child = client.start(argv, out, None, stamped=True)
    with child:
        try:
            assert child.wait(timeout=seconds + (5 if cut else 60)) == 0
        except TimeoutError:
            if not cut:
                raise
            child.kill()
    client.drain(child)


def postgresql(tmp: Path) -> None:
    """go-tpc's postgres driver through the server's socket directory, as a cell connects."""
    initdb(tmp / "data", tmp / "initdb.txt")
    with PostgreSQL(tmp / "run", tmp / "data", {"shared_buffers": "256MB"}) as server:
        server.sql(f"CREATE DATABASE {gotpc.DATABASE}")
        target = {"port": PORT, "socket_dir": server.rundir, "user": SUPERUSER}
        argv = gotpc.argv("prepare", warehouses=1, threads=2, options={"no_check": True}, **target)
        done = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), check=True)
        (OUT / "prepare-pg.txt").write_text(done.stdout + done.stderr, encoding="utf-8")
        run = gotpc.argv("run", warehouses=1, threads=THREADS, seconds=SECONDS, **target)
        stamped(run, OUT / "run-pg-stamped.txt", SECONDS)
        wait = gotpc.argv("run", warehouses=1, threads=10, seconds=20, options={"wait": True}, **target)
        stamped(wait, OUT / "run-pg-wait.txt", 20, cut=True)


if __name__ == "__main__":
    main()
