"""pgbench against a server elsewhere: from here against a server host, or on a client host
(docs/hosts.md). The run's `perflab` role logs in over TCP with the run's password, which goes into a
passfile only its owner reads (PGPASSFILE), never onto a command line. On a client host pgbench logs
every transaction into the host's `client-NNNN/` directory; the log is fetched back into the cell's
directory here once it has ended, and the window's figures are cut from it at perflab's marks, put
on the host's clock (hosts/client.ClientOnHost).

    argv, env = login_command(spec, cell, server, login, seconds)       # pgbench here, the server there
    argv, env, script = host_command(spec, cell, server, login, remote)  # pgbench on the client host
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab.places.proc import clean_env
from perflab.workloads import pgbench_argv as pgbench
from perflab.workloads import rate
from perflab.workloads.client import window_seconds

if TYPE_CHECKING:
    from perflab.spec.schema import ExperimentFile
    from perflab.spec.matrix import Cell

LOG = "pgbench_log"  # its per-transaction log's prefix, there and in the cell's directory here


def passline(address: str, port: object, user: str, password: str) -> str:
    """libpq's passfile line for the run's role at the server's address."""
    return f"{address}:{port}:*:{user}:{password}\n"


def passfile(server: Any, password: str) -> Path:
    """libpq's passfile for the run's role at the server's address, mode 600 (PGPASSFILE)."""
    path = server.rundir / "pgpass"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(passline(*server.client_target, password))
    return path


def passfile_env(server: Any, password: str) -> dict[str, str]:
    """A libpq client here (pgbench, go-tpc's lib/pq): perflab's environment and the run's role's passfile."""
    return {**clean_env(), "PGPASSFILE": str(passfile(server, password))}


def host_passfile(remote: Any, cell: Cell, login: dict[str, str]) -> str:
    """The run's role's passfile in the cell's directory on the client host (only its owner reads it); its path."""
    line = passline(login["pgsql-host"], login["pgsql-port"], login["pgsql-user"], login["pgsql-password"])
    return remote.write_private(f"{Path(cell_dir(remote, cell)).name}/pgpass", line)


def prepare_argv(spec: ExperimentFile, server: Any, password: str) -> tuple[list[str], dict[str, str]]:
    """`pgbench -i -s SCALE` here against the server there (hosts/dataset.py), as the run's role."""
    from perflab.servers.postgresql.server import pg_binary

    host, port, user = server.client_target
    argv = pgbench.init_argv(spec.dataset.scale or 1, socket_dir=host, port=port, user=user, binary=pg_binary("pgbench"))
    return argv, passfile_env(server, password)


def login_command(
    spec: ExperimentFile, cell: Cell, server: Any, login: dict[str, str], seconds: int
) -> tuple[list[str], dict[str, str]]:
    """The cell's pgbench here against the server on its host: its log in the cell's directory here."""
    argv = pgbench.cell_argv(spec, cell, server, seconds, cell.threads)
    return argv, passfile_env(server, login["pgsql-password"])


def host_command(
    spec: ExperimentFile, cell: Cell, server: Any, login: dict[str, str], remote: Any, budget: int | None = None
) -> tuple[list[str], dict[str, str], str | None]:
    """The cell's pgbench on the client host (`remote`: hosts/client.RemoteClient): (argv, its
    environment there, the script's path there when the test is a local script). `budget`: its -T (an
    interleaved seat's own deadline); else the window's and its tail."""
    warmup, seconds = window_seconds(spec)
    there = cell_dir(remote, cell)
    address, port, user = login["pgsql-host"], login["pgsql-port"], login["pgsql-user"]
    secret = host_passfile(remote, cell, login)
    test = spec.workload.test
    script = None if test in pgbench.BUILTINS else remote.copy(Path(test))
    argv = pgbench.argv(
        script or test,
        socket_dir=address,
        port=int(port),
        user=user,
        clients=cell.threads,
        jobs=cell.threads,  # no pinning on a client host
        seconds=budget or warmup + seconds + pgbench.TAIL_S,
        log_prefix=f"{there}/{LOG}",  # type: ignore[arg-type]  # a path on the host
        options=rate.options(spec, cell),
        binary=remote.binary,
    )
    return argv, {"PGPASSFILE": secret}, script


def cell_dir(remote: Any, cell: Cell) -> str:
    """The cell's directory in the host's run directory (not `cell-NNNN`: a server host's, when both are one)."""
    return f"{remote.rundir.path}/client-{cell.order:04d}"


# $0: the cell's directory on the host: its per-transaction logs, one a line
_LOGS = 'for f in "$0"/' + LOG + '.*; do [ -f "$f" ] && echo "$f"; done; true'


def fetch_log(remote: Any, cell: Cell, local: Path) -> list[Path]:
    """pgbench's per-transaction logs (`pgbench_log.PID[.THREAD]`), copied from the host into `local`,
    then the cell's directory there removed."""
    link = remote.rundir.link
    fetched = []
    try:
        for path in link.run(["sh", "-c", _LOGS, cell_dir(remote, cell)]).stdout.split():
            target = local / Path(path).name
            link.get(path, target)
            fetched.append(target)
    finally:
        link.run(["rm", "-rf", "--one-file-system", cell_dir(remote, cell)])
    return fetched
