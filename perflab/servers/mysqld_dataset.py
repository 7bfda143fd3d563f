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
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab.builds import Build
from perflab.errors import PerflabError
from perflab.places.proc import call, clean_env
from perflab.servers.kind import Tool
from perflab.servers.dataset import Snapshot, tree_bytes
from perflab.servers.managed import LOOPBACK
from perflab.servers.mysql_dialects import plan
from perflab.servers.mysql_flavor import Init
from perflab.servers.mysqld import Mysqld

if TYPE_CHECKING:
    from perflab.spec.schema import ExperimentFile


def initialise(datadir: Path, build: Build | None, log: Path) -> Init:
    """Initialise `datadir` for `build` as its kind does; the tool's output goes to `log`;
    PerflabError with its tail on failure."""
    init = plan(datadir, build)
    datadir.parent.mkdir(parents=True, exist_ok=True)
    try:
        out = call(init.argv, what=init.method, env=clean_env(init.env), timeout=600)
    except PerflabError as exc:
        log.write_text(f"$ {' '.join(init.argv)}\n{exc}\n", encoding="utf-8")
        raise
    log.write_text(f"$ {' '.join(init.argv)}\n{out}", encoding="utf-8")
    return init


def prepare(
    workdir: Path,
    tool: Tool,
    *,
    server_options: dict[str, Any],
    log: Path,
    build: Build | None = None,
    name: str = "snapshot",
    spec: ExperimentFile | None = None,
) -> Snapshot:
    """Build the snapshot datadir `workdir/name`, initialised and served by `build` (None: the
    installed server); the tool's output goes to `log`, the initialisation's beside it. `tool`
    (the experiment's workload, with `spec`; or workloads/sysbench.Prepare, as the benches'):
    its database, setup SQL and prepare command (sysbench's tables, go-tpc's warehouses)."""
    start = time.monotonic()
    rundir = workdir / f"prepare-{name}"
    datadir = workdir / name
    init = initialise(datadir, build, log.with_name(log.stem + "-init.txt"))
    rundir.mkdir(parents=True, exist_ok=True)
    server = Mysqld(rundir, datadir, server_options, build=build)
    if tool.connects_by_tcp:
        server.bind_address = LOOPBACK
    error_log = log.with_name(log.stem + "-error.log")
    try:
        with server:
            database = tool.database
            server.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
            if tool.setup_sql():
                server.sql(tool.setup_sql())
            argv = tool.prepare_argv(spec, server)
            output = call(argv, what=f"{tool.name} prepare", env=clean_env(), timeout=3600)
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
