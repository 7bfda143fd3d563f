"""What a cell keeps of its server when it ends: the server's logs beside the results
(logs/cell-NNNN/: error.log, its option file, its console output), and on a failure the row's
error, the tail of its log and the server's backtrace.

    row.update(failure_fields(exc, server)); keep_logs(server, rundir, results.log_dir(cell.order))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perflab.errors import PerflabError, ServerStartError
from perflab.servers.managed import Managed, copy_log


def failure_fields(exc: PerflabError, server: Managed) -> dict[str, Any]:
    error = exc.message
    died = server.crashed or (server.crashed is None and server.child is not None and not server.alive())
    if died and not isinstance(exc, ServerStartError) and not exc.message.startswith("server"):
        error = f"{server.death()}; {exc.message}"  # the server's death explains the rest
    return {"error": error, "log_tail": server.error_lines(30), "backtrace": server.backtrace()}


def keep_logs(server: Managed, rundir: Path, logs: Path) -> None:
    """The server's error log, option file and console output, kept with the results: each read
    without following a link (a server's user owns its directory: servers/managed.read_log)."""
    copy_log(server.error_log, logs / "error.log")
    copy_log(server.option_file, logs / server.option_file.name)  # my.cnf, postgresql.conf
    console = rundir / "stdout.log"
    if console.exists() and console.stat().st_size:
        copy_log(console, logs / "stdout.log")
