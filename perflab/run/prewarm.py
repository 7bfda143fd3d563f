"""`prewarm = true` ([experiment] or a variant): every table and index of the workload's
database read into the server's buffer pool after it started and before the workload does,
so a cell's warm-up starts from the same full pool at every restart (issue 12 item 7). How is
the kind's (Kind.prewarm): an index scan each for MariaDB and MySQL (servers/mysqld_dataset.py),
pg_prewarm for PostgreSQL (servers/postgresql/dataset.py).

    fields = prewarm.server_switches(cell, server, tool, kind)  # after it answers, before the workload
    -> {"aslr": False, "prewarm_s": 0.41}                   # the cell's resources.aslr, .prewarm_s

`aslr` is what /proc/PID/personality of the running server says (None: unreadable); a server
that does not run as its variant asks (setarch missing or refused) fails the cell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perflab import workloads
from perflab.errors import ServerStartError
from perflab.spec.matrix import Cell

if TYPE_CHECKING:
    from perflab.servers.kind import Kind
    from perflab.servers.managed import Managed

def server_switches(cell: Cell, server: Managed, tool: str, kind: Kind) -> dict[str, Any]:
    """The cell's `aslr` as seen, and its prewarm, done now: the resources fields."""
    seen = server.aslr_seen()
    if seen is not None and seen != cell.aslr:
        raise ServerStartError(
            f"the server runs with aslr = {str(seen).lower()}, its variant asks for {str(cell.aslr).lower()}",
            "check that setarch (util-linux) works here: setarch -R true",
        )
    if not cell.prewarm:
        return {"aslr": seen, "prewarm_s": None}
    return {"aslr": seen, "prewarm_s": kind.prewarm(server, workloads.get(tool).database)}
