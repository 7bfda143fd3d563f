"""pgbench's command lines and what its text says (workloads/pgbench.py's `Pgbench` runs them): a
cell's run, the dataset's `pgbench -i`, the options perflab sets itself, a script's statements,
`pgbench --help`'s option names and its verdict on a script. Against a server elsewhere (a server
host, docs/hosts.md) the run's `perflab` role logs in over TCP with the run's password, which goes
into a passfile only its owner reads (PGPASSFILE), never onto a command line; on a client host
pgbench logs every transaction into the host's `client-NNNN/` directory (fetched back:
pgbench_log.fetch_log). A module of its own below pgbench.py and pgbench_check.py, which build on it
(tests/unit/test_layers.py).

    argv, env = login_command(spec, cell, server, login, seconds)       # pgbench here, the server there
    argv, env, script = host_command(spec, cell, server, login, remote)  # pgbench on the client host
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab.places.proc import clean_env
from perflab.workloads import rate
from perflab.workloads.client import window_seconds

if TYPE_CHECKING:
    from perflab.servers.managed import Managed
    from perflab.spec.matrix import Cell
    from perflab.spec.schema import ExperimentFile

BUILTINS = {"select-only": 1, "simple-update": 5, "tpcb-like": 7}  # name -> SQL statements per transaction
DEFAULT_OPTIONS: dict[str, Any] = {"protocol": "prepared", "max_tries": 10}
# set by perflab itself (a cell's clients, duration, log and server); refused in workload options
RESERVED = {
    "client",
    "time",
    "transactions",
    "progress",
    "log",
    "log_prefix",
    "host",
    "port",
    "username",
    "aggregate_interval",
    "sampling_rate",
    "builtin",
    "file",
    "select_only",
    "initialize",
    "scale",
    "no_vacuum",
    "progress_timestamp",
    "dbname",
    "connect",
    "skip_some_updates",
    "init_steps",
}
DATABASE = "bench"
# a window end mark this close under a whole second past the launch still ends that second (the
# two clocks, time.time() at the launch and at the mark, are read microseconds apart from monotonic's)
TAIL_S = 60  # a sequential cell's -T past the window (Pgbench.tail_s)


def argv(
    test: str,
    *,
    socket_dir: Path | str,  # a socket directory, or a remote server's address
    port: int,
    user: str,
    clients: int,
    jobs: int,
    seconds: int,
    log_prefix: Path | None,
    options: dict[str, Any] | None = None,
    binary: str = "pgbench",
) -> list[str]:
    """The pgbench command line of a run; workload options become --key-with-dashes=value.
    `log_prefix`: where pgbench logs every transaction (the window's percentiles); None: no log."""
    args = [binary, "-h", str(socket_dir), "-p", str(port), "-U", user, "-n"]
    args += [f"--client={clients}", f"--jobs={min(jobs, clients)}", f"--time={seconds}", "--progress=1"]
    args += ["--log", f"--log-prefix={log_prefix}"] if log_prefix is not None else []
    for key, value in {**DEFAULT_OPTIONS, **(options or {})}.items():
        args.append(f"--{key.replace('_', '-')}={value}")
    args += [f"--builtin={test}"] if test in BUILTINS else [f"--file={test}"]
    return args + [DATABASE]


def init_argv(scale: int, *, socket_dir: Path | str, port: int, user: str, binary: str = "pgbench") -> list[str]:
    """`pgbench -i -s SCALE` (tables, rows, vacuum, primary keys) into the database DATABASE."""
    return [binary, "-h", str(socket_dir), "-p", str(port), "-U", user, "-i", "-q", f"--scale={scale}", DATABASE]


def statements(test: str) -> int:
    """SQL statements per transaction: a builtin's, or the commands of a script (each ends with
    ';'; lines of meta-commands, starting with '\\', and comments are not statements)."""
    if test in BUILTINS:
        return BUILTINS[test]
    text = Path(test).read_text(encoding="utf-8", errors="replace")
    lines = [ln.split("--", 1)[0].strip() for ln in text.splitlines()]
    sql = [ln for ln in lines if ln and not ln.startswith("\\")]
    ends = sum(1 for ln in sql if ln.endswith(";"))
    return max(1, ends + (1 if sql and not sql[-1].endswith(";") else 0))


def long_options(help_text: str) -> set[str]:
    """The long option names of `pgbench --help`, with '_' for '-'."""
    return {m.replace("-", "_") for m in re.findall(r"--([a-z][a-z-]*)", help_text)}


def script_problem(output: str) -> str | None:
    """pgbench's verdict on a script, from a run against a socket that does not exist: a parse
    error comes first ("syntax error ..."); a script that parses gets as far as connecting."""
    if "connection to server" in output or "could not create connection" in output:
        return None
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    return " ".join(lines[:3])[:400] if lines else "pgbench printed nothing"


def cell_argv(spec: ExperimentFile, cell: Cell, server: Managed, seconds: int, jobs: int) -> list[str]:
    """A cell's pgbench (sequential or a seat): the server build's own pgbench when it has one,
    every transaction logged into the server's run directory (`pgbench_log.*`)."""
    from perflab.servers.postgresql.server import of, pg_binary

    postgres = of(server)
    host, port, user = postgres.client_target  # its socket; on a server host its address, port and the run's role
    return argv(
        spec.workload.test,
        socket_dir=host,
        port=port,
        user=user,
        clients=cell.threads,
        jobs=jobs,
        seconds=seconds,
        log_prefix=server.rundir / "pgbench_log",
        options=rate.options(spec, cell),
        binary=pg_binary("pgbench", postgres.bindir),
    )


LOG = "pgbench_log"  # its per-transaction log's prefix, there and in the cell's directory here


def passline(address: str, port: object, user: str, password: str) -> str:
    """libpq's passfile line for the run's role at the server's address."""
    return f"{address}:{port}:*:{user}:{password}\n"


def passfile(server: Managed, password: str) -> Path:
    """libpq's passfile for the run's role at the server's address, mode 600 (PGPASSFILE)."""
    from perflab.servers.postgresql.server import of

    path = server.rundir / "pgpass"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        address, port, user = of(server).client_target
        f.write(passline(str(address), port, user, password))
    return path


def passfile_env(server: Managed, password: str) -> dict[str, str]:
    """A libpq client here (pgbench, go-tpc's lib/pq): perflab's environment and the run's role's passfile."""
    return {**clean_env(), "PGPASSFILE": str(passfile(server, password))}


def host_passfile(remote: Any, cell: Cell, login: dict[str, str]) -> str:
    """The run's role's passfile in the cell's directory on the client host (only its owner reads it); its path."""
    line = passline(login["pgsql-host"], login["pgsql-port"], login["pgsql-user"], login["pgsql-password"])
    return remote.write_private(f"{Path(cell_dir(remote, cell)).name}/pgpass", line)


def prepare_argv(spec: ExperimentFile, server: Managed, password: str) -> tuple[list[str], dict[str, str]]:
    """`pgbench -i -s SCALE` here against the server there (hosts/dataset.py), as the run's role."""
    from perflab.servers.postgresql.server import of, pg_binary

    host, port, user = of(server).client_target
    argv = init_argv(spec.dataset.scale or 1, socket_dir=host, port=port, user=user, binary=pg_binary("pgbench"))
    return argv, passfile_env(server, password)


def login_command(
    spec: ExperimentFile, cell: Cell, server: Managed, login: dict[str, str], seconds: int
) -> tuple[list[str], dict[str, str]]:
    """The cell's pgbench here against the server on its host: its log in the cell's directory here."""
    argv = cell_argv(spec, cell, server, seconds, cell.threads)
    return argv, passfile_env(server, login["pgsql-password"])


def host_command(
    spec: ExperimentFile, cell: Cell, server: Managed, login: dict[str, str], remote: Any, budget: int | None = None
) -> tuple[list[str], dict[str, str], str | None]:
    """The cell's pgbench on the client host (`remote`: hosts/client.RemoteClient): (argv, its
    environment there, the script's path there when the test is a local script). `budget`: its -T (an
    interleaved seat's own deadline); else the window's and its tail."""
    warmup, seconds = window_seconds(spec)
    there = cell_dir(remote, cell)
    address, port, user = login["pgsql-host"], login["pgsql-port"], login["pgsql-user"]
    secret = host_passfile(remote, cell, login)
    test = spec.workload.test
    script = None if test in BUILTINS else remote.copy(Path(test))
    command = argv(
        script or test,
        socket_dir=address,
        port=int(port),
        user=user,
        clients=cell.threads,
        jobs=cell.threads,  # no pinning on a client host
        seconds=budget or warmup + seconds + TAIL_S,
        log_prefix=f"{there}/{LOG}",  # type: ignore[arg-type]  # a path on the host
        options=rate.options(spec, cell),
        binary=remote.binary,
    )
    return command, {"PGPASSFILE": secret}, script


def cell_dir(remote: Any, cell: Cell) -> str:
    """The cell's directory in the host's run directory (not `cell-NNNN`: a server host's, when both are one)."""
    return f"{remote.rundir.path}/client-{cell.order:04d}"
