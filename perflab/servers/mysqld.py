"""A server of MySQL's protocol that perflab owns (`Mysqld`): its own datadir on tmpfs, option
file, socket and port. It is the server process of every kind of MySQL's protocol
(servers/mysql_protocol.py): the installed MariaDB, a build's MariaDB, MySQL or Percona Server,
each with its option file in its kind's dialect, its Flavor (servers/mariadb/flavor.py:
[mariadbd]; servers/mysql/flavor.py: [mysqld], translated options, mysqlx=0, ...).

Isolation: the server is started with `--defaults-file=<run dir>/my.cnf` only, so it never
reads /etc/mysql and never meets the system's own service. Readiness is the server's
handshake on our socket, within a deadline; if the server exits first, its own [ERROR] lines
become the message.

    with Mysqld(rundir, datadir, options) as server:   # start, wait ready, kill on exit
        server.sql("SELECT 1")
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from perflab.builds import Build
from perflab.errors import PerflabError
from perflab.places.proc import call
from perflab.tools import binary
from perflab.servers.home import HereHome, Home
from perflab.servers.managed import LOOPBACK, Managed, account, free_port, read_log
from perflab.servers.mysql_dialects import dialect
from perflab.servers.mysql_flavor import RUN_USER

READY_DEADLINE_S = 90.0

# Benchmarking defaults; every one is documented in docs/experiment.md and overridable.
DEFAULT_OPTIONS: dict[str, Any] = {
    "skip-log-bin": True,  # no binary log: it is not what a read benchmark measures
    "performance_schema": "OFF",
    "innodb_buffer_pool_size": "256M",  # raised to fit the dataset by the dataset stage
    "innodb_log_file_size": "256M",
    "max_connections": 2000,
    "max_prepared_stmt_count": 1048576,
    "skip-name-resolve": True,
}
# defaults that hold on tmpfs only (docs/storage.md): on disk ([experiment] storage = a path) the
# server's own apply, as MySQL 8's binary log (on, sync_binlog = 1); MariaDB's is off anyway
TMPFS_ONLY = ("skip-log-bin",)


def defaults(durable: bool, options: dict[str, Any]) -> dict[str, Any]:
    """perflab's defaults under a cell's `options`: without TMPFS_ONLY when `durable` (on disk),
    and without skip-log-bin when the options turn the binary log on (the last one would win)."""
    names = {name.replace("-", "_").lower() for name in options}
    drop = set(TMPFS_ONLY) if durable else set()
    if names & {"log_bin", "skip_log_bin"}:
        drop.add("skip-log-bin")
    return {k: v for k, v in DEFAULT_OPTIONS.items() if k not in drop}


def share_options(build: Build | None) -> dict[str, Path]:
    """A build's own error messages and charsets (lc-messages-dir, character-sets-dir)."""
    if build is None or build.share is None:
        return {}
    out = {"lc-messages-dir": build.share}
    if (build.share / "charsets").is_dir():
        out["character-sets-dir"] = build.share / "charsets"
    return out


_OPTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_.,:/+@%*=-]+")  # written as is; anything else is quoted


def option_line(name: str, value: Any) -> str:
    r"""One `name=value` line of the option file, read back by the server as exactly `value`.

    MariaDB's reader (mysys/my_default.c) ends a line at a newline, strips a `#` comment and
    surrounding spaces, drops one pair of quotes, and turns backslash escapes (\n, \t, \s,
    \\ ...) into characters in every value, quoted or not. So anything but plain characters
    is double-quoted with `\` and `"` escaped; a line break or control character cannot be
    written at all (the spec refuses them first, with the key path).
    """
    if not _OPTION_NAME.fullmatch(name):
        raise ValueError(f"not a server option name: {name!r}")
    if value is True:
        return name
    if value is False:
        return f"{name}=0"
    text = str(value)
    if any(ord(c) < 0x20 and c != "\t" or ord(c) == 0x7F for c in text):
        raise ValueError(f"server option {name}: control character in {text!r}")
    if not _PLAIN_VALUE.fullmatch(text):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t") + '"'
    return f"{name}={text}"


HINT = "apt-get install mariadb-server creates it (or `adduser --system --group mysql`)"


def run_user() -> pwd.struct_passwd | None:
    """The account mariadbd and mysqld run as: RUN_USER when perflab is root, else perflab's own (None)."""
    return account(RUN_USER, HINT)


class Mysqld(Managed):
    """One server process (mariadbd or mysqld) on a datadir perflab created; a context manager. `home`:
    where it runs (here, or a server host's cell directory: hosts/home.py), with that place's
    `programs` (tool -> path there); None: this machine's, the installed MariaDB's or the build's own."""

    home: Home
    build: Build | None

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
        build: Build | None = None,
        durable: bool = False,
        home: Home | None = None,
        programs: dict[str, str] | None = None,
    ) -> None:
        here = home if home is not None else HereHome(rundir, cpus, Path(datadir))
        super().__init__(here, rundir, datadir, env=env, preload=preload, tracer=tracer, cpus=cpus, build=build,
                         programs=programs)  # fmt: skip
        self.socket = Path(self.home.dir) / "mysqld.sock"
        self.port = free_port()
        # no TCP: the clients here connect by the socket, in the run's directory only root reaches (issue 48);
        # an address only for a client that connects by TCP (go-tpc, a client host: Kind.listen_on; a server host's)
        self.bind_address: str | None = None
        self.error_log = rundir / "error.log"
        self.option_file = rundir / "my.cnf"
        self.options = {**defaults(durable, options), **options}  # durable: on disk, the server's own
        self.flavor = dialect(build)  # the option file's dialect, as the build's kind says
        # True only for a PGO training server, which writes its profile into the build's tree (root's)
        self.as_root = False
        self.become = False  # exec'd as its account (start); else started as perflab's, it becomes it itself

    def binary(self, name: str) -> str:
        """The tool `name` (mariadbd, mariadb) where the server runs."""
        return self.programs[name] if self.programs is not None else binary(name)

    def write_option_file(self) -> None:
        there = self.home.dir
        listen: dict[str, Any] = {"skip-networking": True}  # the socket only
        if self.bind_address:
            listen = {"port": self.port, "bind-address": self.bind_address}
        fixed = {
            "datadir": self.datadir,
            "socket": self.socket,
            **listen,
            "pid-file": f"{there}/mysqld.pid",
            "log-error": f"{there}/error.log",
            "tmpdir": f"{there}/tmp",
        }
        if not self.become:  # started as root, it becomes its account itself
            user = self.home.account("root" if self.as_root else RUN_USER, HINT)
            if user:
                fixed["user"] = user
        if self.build is not None and self.build.share is not None:  # a build's own messages and charsets
            fixed["lc-messages-dir"] = self.build.share
            if self.home.is_dir(f"{self.build.share}/charsets"):
                fixed["character-sets-dir"] = f"{self.build.share}/charsets"
        private = self.flavor.private(there, self.build)  # secure-file-priv; MySQL's basedir and mysqlx=0
        if "basedir" in private and self.build is not None and self.build.extra.get("shipped_from"):
            private["basedir"] = self.build.binary.parent.parent  # the tree copied there (hosts/trees.py)
        fixed.update(private)
        lines = ["# written by perflab; the server reads no other option file", f"[{self.flavor.group}]"]
        # the fixed options come last: the last occurrence of an option wins
        lines += [option_line(k, v) for k, v in {**self.flavor.translate(self.options), **fixed}.items()]
        self.home.write("my.cnf", "\n".join(lines) + "\n")  # its copy here: option_file

    def start(self, deadline_s: float = READY_DEADLINE_S) -> None:
        libraries, env = self.preloads()
        launcher = self.build.launcher if self.build is not None else []  # a private root's loader
        user = "" if self.as_root else RUN_USER  # its own account from its exec when it reaches every file it loads
        self.become = bool(user and self.home.account(user, HINT)) and self._reaches(user, launcher, libraries)
        self.write_option_file()
        argv = self.launched([*launcher, str(self.program), f"--defaults-file={self.home.dir}/my.cnf"])
        # a TCP client here (go-tpc, which takes its password only in argv): not this machine's
        # loopback, which every account reaches, but 127.0.0.1 of a network of its own (places/netns.py)
        self.own_network = self.bind_address == LOOPBACK and not self.home.remote_clients
        # what the server (or ld.so, before it) prints outside its error log: stdout.log
        self.child = self.home.start(argv, env, "stdout.log", user, HINT, become=self.become,
                                     dirs=("tmp", "files"), network=self.own_network)  # fmt: skip
        self._wait_ready(deadline_s)

    def _reaches(self, user: str, launcher: list[str], libraries: list[str]) -> bool:
        """Whether the server is exec'd as its own account (RUN_USER): when that account reaches every
        file it loads, so that it dies with perflab (setpriv sets --pdeathsig after the uid change).
        Else (a build in root's cache) it starts as root and becomes RUN_USER itself (option `user`):
        the kernel then clears its parent-death signal, and only the next run's sweep (or
        `perflab doctor --clean`) stops it if perflab is killed with SIGKILL."""
        programs = [p for p in launcher if p.startswith("/")] + [str(self.program)]
        files = libraries + ([str(self.build.share)] if self.build and self.build.share else [])
        return self.home.reaches(user, programs, files)

    @property
    def program(self) -> Path:
        return self.build.binary if self.build is not None else Path(self.binary("mariadbd"))  # installed: MariaDB's

    def _ready(self) -> bool:
        """True once the server accepts a connection and sends its greeting packet: on its socket, or
        on its address from here (a server host's)."""
        address: str | tuple[str, int]
        if self.home.remote_clients:
            assert self.bind_address is not None
            family, address = socket.AF_INET6 if ":" in self.bind_address else socket.AF_INET, (self.bind_address, self.port)
        elif not self.socket.exists():
            return False
        else:
            family, address = socket.AF_UNIX, str(self.socket)
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            try:
                sock.connect(address)
                return len(sock.recv(5)) > 0
            except OSError:
                if self.home.remote_clients:
                    time.sleep(0.2)  # each miss costs a round trip's worth at most: no tight loop over the network
                return False

    def login(self, password: str | None) -> list[str]:
        """A `mariadb` client's options here to reach it: on its socket as root; from here over TCP to a
        server on its host as the run's `perflab` user, its `password` in an option file only its owner
        reads (`--defaults-file`, never the command line)."""
        if not self.home.remote_clients:
            return ["--no-defaults", f"--socket={self.socket}", "--user=root"]
        options = self.rundir / "status.cnf"
        fd = os.open(options, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"[client]\nprotocol=tcp\nhost={self.bind_address}\nport={self.port}\n")
            f.write(f"user=perflab\npassword={password}\n")
        return [f"--defaults-file={options}"]

    def error_lines(self, limit: int = 12) -> str:
        """The server's own [ERROR] lines (or the log tail if there are none)."""
        with contextlib.suppress(PerflabError):  # a host that dropped off: what was fetched before
            self.home.fetch("error.log", "stdout.log")
        try:
            lines = read_log(self.error_log).splitlines()
        except FileNotFoundError:
            lines = []
        errors = [ln for ln in lines if "[ERROR]" in ln]
        try:  # ld.so and early start-up failures go to the console, not the error log
            console = (self.rundir / "stdout.log").read_text(encoding="utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            console = []
        chosen = errors or [ln for ln in console if ln.strip()] or lines
        return "\n".join(chosen[-limit:]) if chosen else "(no error log written)"

    def sql(self, statement: str) -> str:
        argv = [self.binary("mariadb"), "--no-defaults", f"--socket={self.socket}", "--user=root"]
        # the statement on stdin, never in argv (a password in it: every account reads /proc/PID/cmdline)
        return self.home.client([*argv, "--batch", "--skip-column-names"], statement, "mariadb client")

    def data_bytes(self, database: str) -> int:
        """The database's files, in bytes, where it runs."""
        return self.home.tree_bytes(f"{self.datadir}/{database}")

    def _exited(self, code: int) -> str:
        caught = re.search(r"got signal (\d+)", self.backtrace() or "")  # MySQL 8+: its handler exits
        if caught and int(caught.group(1)) in signal.valid_signals():
            number = int(caught.group(1))
            return f"server died: signal {number} ({signal.Signals(number).name}; its handler exited with code {code})"
        return super()._exited(code)

    def backtrace(self, limit: int = 80) -> str | None:
        """The stack trace mariadbd writes into its error log when it crashes, if any."""
        try:
            lines = read_log(self.error_log).splitlines()
        except FileNotFoundError:
            return None
        for i, line in enumerate(lines):
            if "Attempting backtrace" in line or "got signal" in line:
                return "\n".join(lines[i : i + limit])
        return None

    def _stopped(self) -> None:
        self.home.fetch("error.log", "stdout.log")


def of(server: Managed) -> Mysqld:
    """`server` typed as the mariadbd or mysqld that a MySQL-protocol kind's own code is handed (the
    kinds' interface passes a Managed); not checked at run time: tests hand stand-ins."""
    return cast(Mysqld, server)


def version() -> str:
    return call([binary("mariadbd"), "--version"], what="mariadbd --version").strip()
