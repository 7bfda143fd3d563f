"""The PostgreSQL dataset: initdb once, the workload's tables, a fast shutdown, kept as the snapshot.

`prepare()` runs `initdb` into `workdir/NAME`, starts postgres on it, creates the database and
fills it: `pgbench -i -s SCALE` into database "bench" (tool = "pgbench"), or `sysbench TEST
prepare` with the pgsql driver into "sbtest". A fast shutdown (a checkpoint: no recovery at the
next start) leaves the stopped datadir, which every cell gets a copy of, exactly like MariaDB's
(servers/dataset.py: `restore`; places/copy.py: `copy_tree`; the copy is then given to the server's user).

    snapshot = prepare(workdir, spec=exp.file, tool=workloads.of(exp.file), log=results/logs/prepare.txt)
"""

from __future__ import annotations

import contextlib
import shutil
import time
from pathlib import Path

from perflab.servers.kind import Tool
from perflab.servers.dataset import Snapshot
from perflab.places.proc import call, clean_env
from perflab.servers.postgresql.server import PostgreSQL, initdb
from perflab.spec.schema import ExperimentFile


def prepare(
    workdir: Path, *, spec: ExperimentFile, tool: Tool, log: Path, name: str = "snapshot", build: object | None = None
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
            database = fill(server, spec, tool, log)
            data_bytes = server.data_bytes(database)
            server.stop(clean=True)  # a checkpoint: the snapshot needs no recovery
    finally:
        with contextlib.suppress(OSError):
            shutil.copy2(server.error_log, server_log)
    shutil.rmtree(rundir, ignore_errors=True)
    return Snapshot(datadir, data_bytes, time.monotonic() - started, "", method)


def fill(server: PostgreSQL, spec: ExperimentFile, tool: Tool, log: Path) -> str:
    """Create and fill the workload's database (its tool's prepare: `pgbench -i`, or sysbench's
    over the pgsql driver); returns its name."""
    server.sql(f"CREATE DATABASE {tool.database}")
    argv = tool.prepare_argv(spec, server)
    log.write_text(call(argv, what=f"{tool.name} prepare", env=clean_env(), timeout=3600), encoding="utf-8")
    return tool.database


PG_PREWARM = (
    "CREATE EXTENSION IF NOT EXISTS pg_prewarm; "
    "SELECT count(pg_prewarm(c.oid)) FROM pg_class c "
    "WHERE c.relkind IN ('r', 'i') AND c.relnamespace = 'public'::regnamespace"
)


def prewarm(server: PostgreSQL, database: str) -> float:
    """pg_prewarm every table and index of `database`'s public schema; returns seconds."""
    started = time.monotonic()
    server.sql(PG_PREWARM, database)
    return round(time.monotonic() - started, 3)
