"""A MariaDB or MySQL dataset (Kind.prepare of mysql_protocol.py's kinds): `prepare()` creates a
datadir on tmpfs, starts a server on it, runs `sysbench <test> prepare` (or the workload's own:
`go-tpc tpcc prepare`, workloads/), shuts the server down cleanly and keeps the stopped datadir
as the snapshot (servers/dataset.py). By default the installed server does it; `build=` makes a
build of another format initialise, serve and shut down its own.

`prewarm = true` (run/prewarm.py): one full scan per index (`SELECT COUNT(*) FROM t FORCE INDEX (i)`:
the clustered index holds the rows, a secondary index its own pages), and
`innodb_buffer_pool_load_at_startup` off unless the variant sets it: without it, InnoDB reloads the
pages the dataset's server listed at its shutdown in a background thread that would still run
during the warm-up.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

from perflab.builds import Build
from perflab.places.proc import call, clean_env
from perflab.servers.dataset import Snapshot, tree_bytes
from perflab.servers.managed import LOOPBACK
from perflab.servers.mysql_protocol import initialise
from perflab.servers.mysqld import Mysqld
from perflab.workloads import Workload, sysbench


def prepare(
    workdir: Path,
    *,
    test: str,
    tables: int,
    table_size: int,
    options: dict[str, Any],
    server_options: dict[str, Any],
    log: Path,
    build: Build | None = None,
    name: str = "snapshot",
    workload: Workload | None = None,
    spec: Any = None,
) -> Snapshot:
    """Build the snapshot datadir `workdir/name`, initialised and served by `build` (None: the
    installed server); sysbench output goes to `log`, the initialisation's beside it.
    `workload` (workloads/): another tool's database, setup SQL and prepare command (go-tpc's
    warehouses), with `spec`; None: sysbench with `test`, `tables`, `table_size` and `options`."""
    start = time.monotonic()
    rundir = workdir / f"prepare-{name}"
    datadir = workdir / name
    init = initialise(datadir, build, log.with_name(log.stem + "-init.txt"))
    rundir.mkdir(parents=True, exist_ok=True)
    server = Mysqld(rundir, datadir, server_options, build=build)
    if workload and workload.connects_by_tcp:
        server.bind_address = LOOPBACK
    error_log = log.with_name(log.stem + "-error.log")
    try:
        with server:
            database = workload.database if workload else "sbtest"
            server.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
            if workload and workload.setup_sql():
                server.sql(workload.setup_sql())
            argv = (
                workload.prepare_argv(spec, server)
                if workload
                else sysbench.argv(
                    test,
                    "prepare",
                    socket=server.socket,
                    tables=tables,
                    table_size=table_size,
                    threads=min(tables, os.cpu_count() or 1),
                    options=options,
                )
            )
            what = f"{workload.name if workload else 'sysbench'} prepare"
            output = call(argv, what=what, env=clean_env(), timeout=3600)
            log.write_text(output, encoding="utf-8")
            server.stop(clean=True)  # a clean shutdown: the snapshot must need no recovery
    except BaseException:
        with contextlib.suppress(OSError):  # the server's own words on why, kept with the results
            console = rundir / "stdout.log"  # what it printed when it died before its log was open
            shutil.copy2(server.error_log if server.error_log.exists() else console, error_log)
        raise
    shutil.copy2(server.error_log, error_log)
    shutil.rmtree(rundir, ignore_errors=True)
    shutil.rmtree(workdir / f"{name}-files", ignore_errors=True)  # MySQL's secure-file-priv at init
    fmt = build.format if build is not None else ""
    return Snapshot(datadir, tree_bytes(datadir / database), time.monotonic() - start, fmt, init.method)


# the server options a prewarmed MariaDB cell gets unless its variant sets them
PREWARM_OPTIONS: dict[str, Any] = {"innodb_buffer_pool_load_at_startup": "OFF"}

INDEXES = (
    "SELECT DISTINCT TABLE_NAME, INDEX_NAME FROM information_schema.STATISTICS "
    "WHERE TABLE_SCHEMA = '{schema}' ORDER BY TABLE_NAME, INDEX_NAME"
)
def quote(name: str) -> str:
    """A MariaDB identifier in backquotes (a backquote inside is doubled)."""
    return "`" + name.replace("`", "``") + "`"


def scans(listing: str, schema: str = "sbtest") -> list[str]:
    """The statements that read every index of `listing` (INDEXES' rows: table TAB index)."""
    out = []
    for line in listing.splitlines():
        table, _, index = line.partition("\t")
        if table and index:
            out.append(f"SELECT COUNT(*) FROM {schema}.{quote(table)} FORCE INDEX ({quote(index)})")
    return out


def prewarm(server: Mysqld, schema: str = "sbtest") -> float:
    """Read every index of the workload's schema (sysbench's sbtest, go-tpc's tpcc); returns the seconds it took."""
    started = time.monotonic()
    statements = scans(server.sql(INDEXES.format(schema=schema)), schema)
    if statements:
        server.sql(";\n".join(statements))
    return round(time.monotonic() - started, 3)
