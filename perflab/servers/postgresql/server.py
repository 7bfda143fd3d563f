"""A PostgreSQL server that perflab owns: its own datadir on tmpfs, postgresql.conf and socket.

`postgres` is started directly (not pg_ctl, not a service) with `-D DATADIR -c config_file=RUN/
postgresql.conf`; it reads no other file perflab does not write: its pg_hba.conf and pg_ident.conf
are in the run directory too (`auth_files`: peer on the socket, mapped accounts only).
No TCP (listen_addresses = '') but
for a client on a remote host (docs/hosts.md): then the one address it reaches, a password role only;
a unix socket in the cell's run directory, dynamic shared memory as files in the datadir (mmap:
nothing in /dev/shm survives a killed server). postgres refuses to run as root: when perflab is
root, the server runs as the `postgres` system user that Debian's package creates (RUN_USER),
via `setpriv --reuid/--regid/--init-groups`, and its run and data directories are given to it.

Shutdown: SIGINT to the postmaster is PostgreSQL's "fast" shutdown (roll back, checkpoint, exit),
used before a snapshot is kept; otherwise SIGKILL to the postmaster and every backend (each
backend calls setsid, outside the postmaster's group: places/proc.kill_tree finds them by parent,
hosts/rundir.py's _KILL there), waited for until none is left. A backend that dies makes the
postmaster kill and restart every backend ("terminating any other active server processes"):
`restart_cause()` finds that in the log, and the cell fails with it.

    with PostgreSQL(rundir, datadir, {"shared_buffers": "256MB"}) as server:
        server.sql("SELECT 1")
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from perflab.errors import PerflabError, ServerStartError, ToolMissingError
from perflab.places.proc import call, clean_env
from perflab.servers.home import HereHome, Home
from perflab.servers.managed import Managed, read_log
from perflab.servers.postgresql.user import RUN_USER, as_server_user, give, reachable

PG_BIN = Path(os.environ.get("PERFLAB_PG_BIN", "/usr/lib/postgresql/15/bin"))
SUPERUSER = "postgres"  # the database role initdb creates (-U), trusted on the local socket
PORT = 5432  # names the socket file only (every server has a socket directory of its own), unless it
# listens on TCP too (listen): then a port free at its address, which names its socket too
READY_DEADLINE_S = 60.0

# Benchmarking defaults (docs/experiment.md, "PostgreSQL"); each is overridable by server_options.
DEFAULT_OPTIONS: dict[str, Any] = {
    "fsync": False,  # a tmpfs datadir thrown away after the cell: durability is not measured
    "synchronous_commit": False,
    "full_page_writes": False,
    "shared_buffers": "128MB",  # raised to hold the dataset by the dataset stage
    "max_connections": 300,
    "max_wal_size": "1GB",  # fewer checkpoints inside a short window
}
# defaults that hold on tmpfs only (docs/storage.md): on disk ([experiment] storage = a path) the
# server's own apply (fsync, synchronous_commit and full_page_writes on)
TMPFS_ONLY = ("fsync", "synchronous_commit", "full_page_writes")
# written by perflab itself; a server_options entry of these names is refused (spec/fields.py)
FIXED: tuple[str, ...] = ("listen_addresses", "unix_socket_directories", "port", "data_directory", "config_file")
FIXED += ("hba_file", "ident_file")
# peer on the socket (each cell's own pg_hba.conf maps who: auth_files), no TCP login at all
INITDB_OPTIONS = ("--auth-local=peer", "--auth-host=reject", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8")


def pg_binary(name: str, bindir: Path | None = None) -> str:
    """`name` from a build's bin/ (`bindir`), else the installed postgresql-15's. A build must
    have its own postgres and initdb; pgbench and psql fall back to the installed ones."""
    if bindir is not None:
        if os.access(bindir / name, os.X_OK):
            return str(bindir / name)
        if name in ("postgres", "initdb"):
            raise ToolMissingError(
                f"{name} not found in {bindir}", "a PostgreSQL build's bin/ needs postgres and initdb"
            )
    for candidate in (PG_BIN / name, Path(f"/usr/lib/postgresql/15/bin/{name}")):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found and name != "postgres":
        return found
    raise ToolMissingError(f"{name} not found in {PG_BIN}", "apt-get install postgresql-15 (or `make setup`)")


def auth_files(tcp: bool, os_users: Sequence[str]) -> dict[str, str]:
    """pg_hba.conf and pg_ident.conf of a cell (issue 48): on the socket, peer authentication,
    the OS accounts perflab runs as and the server runs as (`os_users`: Home.peers) mapped to
    SUPERUSER, every other one refused; over TCP (`tcp`: a client elsewhere), the role `perflab` by
    password (scram-sha-256) only."""
    hba = "# written by perflab: who may log in (perflab docs trust)\nlocal all all peer map=perflab\n"
    hba += "host all perflab all scram-sha-256\n" if tcp else ""
    ident = "# written by perflab: these OS accounts may log in as the superuser, on the socket\n"
    ident += "".join(f"perflab {user} {SUPERUSER}\n" for user in dict.fromkeys(os_users))
    return {"pg_hba.conf": hba, "pg_ident.conf": ident}


def conf_line(name: str, value: Any) -> str:
    """One `name = 'value'` line of postgresql.conf (a quote is doubled inside the quotes)."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.]*", name):
        raise ValueError(f"not a PostgreSQL setting name: {name!r}")
    if value is True or value is False:
        text = "on" if value else "off"
    else:
        text = str(value)
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ValueError(f"server option {name}: control character in {text!r}")
    return f"{name} = '" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def build_bindir(build: Any, workdir: Path) -> Path | None:
    """The bin/ of `build` (None: the installed server's). When postgres runs as RUN_USER and
    cannot reach the build (perflab's cache is under root's 0700 home), its install tree is
    copied once into the work directory (tmpfs) and given to that user: the same binary."""
    if build is not None and build.extra.get("root"):  # another suite's package, or C library ([variants] glibc)
        from perflab.servers.postgresql.rooted import ShadowBin

        return ShadowBin.make(build, workdir).bindir  # its programs through the root's loader
    if build is None or getattr(build, "kind", "installed") == "installed":
        return None
    bindir = Path(build.binary).parent
    if reachable(bindir):
        return bindir
    if build.kind != "source":  # a basedir's share/ may lie outside it (Debian's layout): not copied
        raise ServerStartError(
            f"{bindir} is not reachable by the {RUN_USER} user, who runs postgres",
            "make every directory above it searchable (chmod o+x), or move the tree",
        )
    target = workdir / "pg-builds" / build.sha256[:16]
    if not (target / ".complete").is_file():
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(bindir.parent, target, symlinks=True)
        (target / ".complete").write_text(str(bindir.parent) + "\n", encoding="utf-8")
        give(target.parent)  # the work directory made traversable, the copy the server user's
    return target / "bin"


def initdb(datadir: Path, log: Path, bindir: Path | None = None) -> str:
    """A new cluster in `datadir` (which must not exist): peer auth on the socket, C.UTF-8;
    by the build's own initdb when `bindir` is a build's (the same version makes its datadir)."""
    datadir.parent.mkdir(parents=True, exist_ok=True)
    datadir.mkdir()
    give(datadir)
    argv = [pg_binary("initdb", bindir), "-D", str(datadir), "-U", SUPERUSER, *INITDB_OPTIONS]
    try:
        out = call(as_server_user(argv), what="initdb", env=clean_env(), timeout=300, cwd=datadir)
    except PerflabError as exc:
        log.write_text(f"$ {' '.join(argv)}\n{exc}\n", encoding="utf-8")
        raise
    log.write_text(f"$ {' '.join(argv)}\n{out}", encoding="utf-8")
    return "initdb" if bindir is None else f"initdb of the build ({argv[0]})"


class PostgreSQL(Managed):
    """One postmaster (and its backends) on a datadir perflab created; a context manager. The same
    interface as Mysqld (servers/mysqld.py), so a cell runs either. `home`: where it runs (here, or
    a server host's cell directory: hosts/home.py), with that place's `programs` (tool -> path there)
    behind a private root's `launcher` there; None: this machine's, the build's own (`bindir`)."""

    kind = "postgresql"
    home: Home
    STOP_SIGNAL, STOP_GROUP = signal.SIGINT, False  # its fast shutdown: SIGINT to the postmaster alone

    def __init__(
        self,
        rundir: Path,
        datadir: Path | str,
        options: dict[str, Any],
        *,
        env: dict[str, str] | None = None,
        preload: Path | str | None = None,
        tracer: Path | str | None = None,
        cpus: Sequence[int] | None = None,
        build: Any = None,
        durable: bool = False,
        home: Home | None = None,
        programs: dict[str, str] | None = None,
        launcher: Sequence[str] = (),
    ) -> None:
        here = home if home is not None else HereHome(rundir, cpus)
        super().__init__(here, rundir, datadir, env=env, preload=preload, tracer=tracer, cpus=cpus, build=build,
                         programs=programs)  # fmt: skip
        self.socket = Path(self.home.dir)  # libpq's host: the socket's directory (there)
        self.port = PORT
        self.bind_address = None  # TCP only for a client elsewhere (Kind.listen_on, a server host): that address alone
        self.error_log = rundir / "postgres.log"
        self.option_file = rundir / "postgresql.conf"
        own = {k: v for k, v in DEFAULT_OPTIONS.items() if not (durable and k in TMPFS_ONLY)}
        self.options = {**own, **options}  # durable: on disk, the server's own defaults
        self.launcher = list(launcher)
        self.bindir = build_bindir(build, rundir.parent) if programs is None else None  # None: postgresql-15's

    def binary(self, name: str) -> str:
        """The tool `name` (postgres, psql) where the server runs."""
        return self.programs[name] if self.programs is not None else pg_binary(name, self.bindir)

    @property
    def conf_dir(self) -> str:
        """The directory of its socket and of the files perflab writes for it, where it runs."""
        return self.home.dir

    @property
    def client_target(self) -> tuple[str | Path, int, str]:
        """Where a client here reaches it: its socket as the superuser (peer), or, from another
        machine, its address and port as the run's role (its password the run's)."""
        if self.home.remote_clients:
            return self.bind_address or "", self.port, "perflab"
        return self.rundir, self.port, SUPERUSER

    def write_option_file(self) -> None:
        fixed = {
            "listen_addresses": self.bind_address or "",
            "unix_socket_directories": self.conf_dir,
            "unix_socket_permissions": "0700",  # its user and root only (and peer auth: issue 48)
            "port": self.port,
            "dynamic_shared_memory_type": "mmap",  # files in the datadir, not /dev/shm/PostgreSQL.*
            "logging_collector": False,  # stderr is the log: one file, the postmaster's stdout
            # who may log in: perflab's files in the run directory, not the datadir's (auth_files)
            "hba_file": f"{self.conf_dir}/pg_hba.conf",
            "ident_file": f"{self.conf_dir}/pg_ident.conf",
        }
        lines = ["# written by perflab; the server reads no other configuration file"]
        lines += [conf_line(k, v) for k, v in {**self.options, **fixed}.items()]
        self.home.write("postgresql.conf", "\n".join(lines) + "\n")
        # on its socket, by peer: perflab's account and the server's (and the ssh user's there)
        for name, text in auth_files(bool(self.bind_address), self.home.peers(RUN_USER)).items():
            self.home.write(name, text)

    def argv(self) -> list[str]:
        conf = f"config_file={self.conf_dir}/postgresql.conf"
        return self.launched([*self.launcher, self.binary("postgres"), "-D", str(self.datadir), "-c", conf])

    def start(self, deadline_s: float = READY_DEADLINE_S) -> None:
        self.write_option_file()
        env = self.preloads()[1]
        hint = f"postgresql-15 creates the {RUN_USER} account: apt-get install postgresql-15"
        self.child = self.home.start(self.argv(), env, "postgres.log", RUN_USER, hint)
        self._wait_ready(deadline_s)
        self.home.started(self.pid, str(self.datadir))

    @property
    def program(self) -> Path:
        """The postgres binary itself (a private root's: the program its wrapper runs)."""
        wrapped = self.bindir is not None and self.build is not None and self.build.extra.get("root")
        return Path(self.build.binary) if wrapped else Path(self.binary("postgres"))

    READY_POLL_S = 0.1

    def _ready(self) -> bool:
        """A real connection and query (psql), not just a socket that accepts."""
        if not self.home.ready(f".s.PGSQL.{self.port}"):
            return False
        try:
            return self.sql("SELECT 1").strip() == "1"
        except PerflabError:
            return False

    def psql(self, binary: str, database: str) -> list[str]:
        """`binary` (a psql) as the superuser on its socket, on `database`: a statement on its stdin."""
        where = ["-h", self.conf_dir, "-p", str(self.port), "-U", SUPERUSER, "-d", database]
        return [binary, "-X", "-At", "-v", "ON_ERROR_STOP=1", *where]

    def sql(self, statement: str, database: str = "postgres") -> str:
        # the statement on stdin, never in argv (a password in it: every account reads /proc/PID/cmdline)
        return self.home.client(self.psql(self.binary("psql"), database), statement, "psql")

    def log_lines(self) -> list[str]:
        with contextlib.suppress(PerflabError):  # a host that dropped off: what was fetched before
            self.home.fetch("postgres.log")
        try:
            return read_log(self.error_log).splitlines()
        except FileNotFoundError:
            return []
    def error_lines(self, limit: int = 12) -> str:
        """The server's own PANIC/FATAL/ERROR lines and crash lines (or the log tail)."""
        lines = self.log_lines()
        marks = ("PANIC:", "FATAL:", "ERROR:", "terminated by signal", "terminating any other", "setpriv:")
        chosen = [ln for ln in lines if any(m in ln for m in marks)] or lines
        return "\n".join(chosen[-limit:]) if chosen else "(no server log written)"

    def restart_cause(self) -> str | None:
        """The log line of a backend whose death made the postmaster restart every backend."""
        for line in self.log_lines():
            if "server process (PID" in line or "terminating any other active server processes" in line:
                return line.split("LOG:", 1)[-1].strip()
        return None

    def _running(self) -> str:
        cause = self.restart_cause()
        return f"backend crashed: {cause}" if cause else super()._running()

    def backtrace(self, limit: int = 40) -> str | None:
        """PostgreSQL writes no stack trace; the log from the first crash line on, if any."""
        lines = self.log_lines()
        for i, line in enumerate(lines):
            if "server process (PID" in line or "PANIC:" in line:
                return "\n".join(lines[i : i + limit])
        return None

    def alive(self) -> bool:
        return super().alive() and self.restart_cause() is None

    def client_backends(self, database: str) -> int:
        """The postmaster's backends serving a client on `database` now (their titles name it)."""
        return self.home.children_titled(self.pid, f" {database} ")

    def data_bytes(self, database: str) -> int:
        return int(self.sql(f"SELECT pg_database_size('{database}')").strip())

    def _signal(self, sig: int) -> None:
        self.home.signal(self.pid, sig)

    def _stopped(self) -> None:
        """The System V segment a killed postmaster leaves released (postgres keeps one of 56 bytes to see
        whether old backends are still attached, and removes it only at a clean shutdown), and its log
        fetched back from a host."""
        self.home.release(self.child.pid, str(self.datadir))
        self.home.fetch("postgres.log")


def known_settings() -> dict[str, str]:
    """Every setting this postgres knows, with its type (`postgres --describe-config`)."""
    out = call([pg_binary("postgres"), "--describe-config"], what="postgres --describe-config", env=clean_env())
    settings = {}
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) >= 4:
            settings[fields[0].lower()] = fields[3]
    return settings


def of(server: Managed) -> PostgreSQL:
    """`server` typed as the postgres that PostgreSQL's kind, pgbench and go-tpc on a host are handed
    (the interfaces pass a Managed); not checked at run time: tests hand stand-ins."""
    return cast(PostgreSQL, server)


def version() -> str:
    return call([pg_binary("postgres"), "--version"], what="postgres --version", env=clean_env()).strip()
