"""`prewarm = true` ([experiment] or a variant): every table and index of the workload's
database read into the server's buffer pool after it started and before the workload does,
so a cell's warm-up starts from the same full pool at every restart (issue 12 item 7).

MariaDB: one full scan per index (`SELECT COUNT(*) FROM t FORCE INDEX (i)`: the clustered
index holds the rows, a secondary index its own pages), and `innodb_buffer_pool_load_at_startup`
off unless the variant sets it: without it, InnoDB reloads the pages the dataset's server
listed at its shutdown in a background thread that would still run during the warm-up.
PostgreSQL: `pg_prewarm` (contrib, in Debian's postgresql-15) on every table and index of the
workload's database; a sequential scan would not do it (it reads through a small ring buffer).

    fields = prewarm.server_switches(cell, server, tool, kind)  # after it answers, before the workload
    -> {"aslr": False, "prewarm_s": 0.41}                   # the cell's resources.aslr, .prewarm_s

`aslr` is what /proc/PID/personality of the running server says (None: unreadable); a server
that does not run as its variant asks (setarch missing or refused) fails the cell.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from perflab.errors import ServerStartError
from perflab.spec.matrix import Cell

if TYPE_CHECKING:
    from perflab.servers import Kind
    from perflab.servers.mysqld import Mysqld
    from perflab.servers.postgresql.server import PostgreSQL

# the server options a prewarmed MariaDB cell gets unless its variant sets them
MARIADB_OPTIONS: dict[str, Any] = {"innodb_buffer_pool_load_at_startup": "OFF"}

INDEXES = (
    "SELECT DISTINCT TABLE_NAME, INDEX_NAME FROM information_schema.STATISTICS "
    "WHERE TABLE_SCHEMA = '{schema}' ORDER BY TABLE_NAME, INDEX_NAME"
)
PG_PREWARM = (
    "CREATE EXTENSION IF NOT EXISTS pg_prewarm; "
    "SELECT count(pg_prewarm(c.oid)) FROM pg_class c "
    "WHERE c.relkind IN ('r', 'i') AND c.relnamespace = 'public'::regnamespace"
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


def mariadb(server: Mysqld, schema: str = "sbtest") -> float:
    """Read every index of the workload's schema (sysbench's sbtest, go-tpc's tpcc); returns the seconds it took."""
    started = time.monotonic()
    statements = scans(server.sql(INDEXES.format(schema=schema)), schema)
    if statements:
        server.sql(";\n".join(statements))
    return round(time.monotonic() - started, 3)


def postgresql(server: PostgreSQL, database: str) -> float:
    """pg_prewarm every table and index of `database`'s public schema; returns seconds."""
    started = time.monotonic()
    server.sql(PG_PREWARM, database)
    return round(time.monotonic() - started, 3)


def server_switches(cell: Cell, server: Mysqld | PostgreSQL, tool: str, kind: Kind) -> dict[str, Any]:
    """The cell's `aslr` as seen, and its prewarm, done now: the resources fields."""
    seen = server.aslr_seen()
    if seen is not None and seen != cell.aslr:
        raise ServerStartError(
            f"the server runs with aslr = {str(seen).lower()}, its variant asks for {str(cell.aslr).lower()}",
            "check that setarch (util-linux) works here: setarch -R true",
        )
    if not cell.prewarm:
        return {"aslr": seen, "prewarm_s": None}
    return {"aslr": seen, "prewarm_s": kind.prewarm(server, tool)}
