"""The PostgreSQL dataset: initdb once, the workload's tables, a fast shutdown, kept as the snapshot.

`prepare()` runs `initdb` into `workdir/NAME`, starts postgres on it, creates the database and
fills it: `pgbench -i -s SCALE` into database "bench" (tool = "pgbench"), or `sysbench TEST
prepare` with the pgsql driver into "sbtest". A fast shutdown (a checkpoint: no recovery at the
next start) leaves the stopped datadir, which every cell gets a copy of, exactly like MariaDB's
(run/dataset.py: `restore`, `copy_tree`; the copy is then given to the server's user).

    snapshot = prepare(workdir, spec=exp.file, log=results/logs/prepare.txt)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

from perflab.run.dataset import Snapshot
from perflab.run.proc import call, clean_env
from perflab.run.workloads import pgbench, sysbench
from perflab.servers.postgresql.server import PORT, SUPERUSER, PostgreSQL, initdb, pg_binary
from perflab.spec import ExperimentFile


def prepare(
    workdir: Path, *, spec: ExperimentFile, log: Path, name: str = "snapshot", build: object | None = None
) -> Snapshot:
    """The snapshot datadir `workdir/name`; the loader's output goes to `log`, initdb's beside it.
    `build`: a build of another major version, whose own initdb, postgres and pgbench make it."""
    started = time.monotonic()
    rundir, datadir = workdir / f"prepare-{name}", workdir / name
    server = PostgreSQL(rundir, datadir, spec.server_options, build=build)
    method = initdb(datadir, log.with_name(log.stem + "-init.txt"), server.bindir)
    server_log = log.with_name(log.stem + "-error.log")
    try:
        with server:
            database = fill(server, spec, log)
            data_bytes = int(server.sql(f"SELECT pg_database_size('{database}')").strip())
            server.stop(clean=True)  # a checkpoint: the snapshot needs no recovery
    finally:
        with contextlib.suppress(OSError):
            shutil.copy2(server.error_log, server_log)
    shutil.rmtree(rundir, ignore_errors=True)
    return Snapshot(datadir, data_bytes, time.monotonic() - started, "", method)


def database(tool: str) -> str:
    """The database the workload tool's dataset lives in."""
    from perflab.run import workloads

    return workloads.get(tool).database


def fill(server: PostgreSQL, spec: ExperimentFile, log: Path) -> str:
    """Create and fill the workload's database; returns its name."""
    name = database(spec.workload.tool)
    server.sql(f"CREATE DATABASE {name}")
    if spec.workload.tool == "pgbench":
        argv = pgbench.init_argv(
            spec.dataset.scale or 1,
            socket_dir=server.rundir,
            port=PORT,
            user=SUPERUSER,
            binary=pg_binary("pgbench", server.bindir),
        )
        out = call(argv, what="pgbench -i", env=clean_env(), timeout=3600)
        log.write_text(out, encoding="utf-8")
        return name
    argv = sysbench.argv(
        spec.workload.test,
        "prepare",
        socket=server.rundir,
        tables=spec.dataset.tables,
        table_size=spec.dataset.table_size,
        threads=min(spec.dataset.tables, os.cpu_count() or 1),
        options=spec.workload.options,
        driver="pgsql",
    )
    log.write_text(call(argv, what="sysbench prepare (pgsql)", env=clean_env(), timeout=3600), encoding="utf-8")
    return name
