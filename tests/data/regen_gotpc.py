#!/usr/bin/env python3
"""Re-record the go-tpc outputs in tests/data/gotpc/ from the real go-tpc (`make go-tpc`).

    flock /work/measure.lock python3 tests/data/regen_gotpc.py     # about 3 minutes on 2 vCPUs

Starts one mariadbd through perflab's own classes on a throw-away datadir under /dev/shm,
creates the user tpcc@127.0.0.1 and runs `go-tpc tpcc prepare` for one warehouse as a cell's
dataset stage does (prepare.txt), then `go-tpc tpcc run` with 4 clients for 15 s twice: once
through perflab's stamping pipe, as a cell writes it (run-stamped.txt), once as go-tpc prints it
(run-unstamped.txt). The server is killed and the datadir removed at the end, even on failure.
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
from perflab.servers.mysqld import Mysqld

SECONDS, THREADS = 15, 4


def main() -> None:
    OUT.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="perflab-regen-gotpc-", dir="/dev/shm"))
    try:
        install_datadir(tmp / "data")
        with Mysqld(tmp / "run", tmp / "data", {"innodb_buffer_pool_size": "512M"}) as server:
            server.sql(f"CREATE DATABASE {gotpc.DATABASE}")
            server.sql(tpcc.GO_TPC.setup_sql())
            argv = gotpc.argv("prepare", port=server.port, warehouses=1, threads=2)
            done = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), check=True)
            (OUT / "prepare.txt").write_text(done.stdout + done.stderr, encoding="utf-8")
            run = gotpc.argv("run", port=server.port, warehouses=1, threads=THREADS, seconds=SECONDS)
            child = client.start(run, OUT / "run-stamped.txt", None, stamped=True)
            with child:
                assert child.wait(timeout=SECONDS + 60) == 0
            client.drain(child)
            done = subprocess.run(run, capture_output=True, text=True, env=clean_env(), check=True)
            (OUT / "run-unstamped.txt").write_text(done.stdout, encoding="utf-8")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
