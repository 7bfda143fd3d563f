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

import os
import pwd
import re
import signal
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from perflab.builds import Build
from perflab.places import netns
from perflab.places.proc import Child, call, clean_env
from perflab.tools import binary
from perflab.servers.managed import LOOPBACK, Managed, account, as_account, free_port, give, ld_preload, reachable, read_log
from perflab.servers.mysql_dialects import dialect

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


RUN_USER = "mysql"  # Debian's mariadb-server (and mysql-server) create it; used only when perflab is root


def run_user() -> pwd.struct_passwd | None:
    """The account mariadbd and mysqld run as: RUN_USER when perflab is root, else perflab's own (None)."""
    return account(RUN_USER, "apt-get install mariadb-server creates it (or `adduser --system --group mysql`)")


class Mysqld(Managed):
    """One server process (mariadbd or mysqld) on a datadir perflab created; a context manager."""

    def __init__(
        self,
        rundir: Path,
        datadir: Path,
        options: dict[str, Any],
        *,
        env: dict[str, str] | None = None,
        preload: Path | None = None,
        tracer: Path | None = None,
        cpus: Sequence[int] | None = None,
        build: Build | None = None,
        durable: bool = False,
    ) -> None:
        self.rundir = rundir
        self.datadir = datadir
        self.socket = rundir / "mysqld.sock"
        self.port = free_port()
        # no TCP: the clients here connect by the socket, in the run's directory only root reaches (issue 48);
        # an address only for a client that connects by TCP (go-tpc, a client host: Kind.listen_on)
        self.bind_address: str | None = None
        self.error_log = rundir / "error.log"
        self.option_file = rundir / "my.cnf"
        self.tmpdir = rundir / "tmp"
        self.options = {**defaults(durable, options), **options}  # durable: on disk, the server's own
        self.env = clean_env(env)
        self.preload = preload
        self.tracer = tracer  # preloaded before the allocator, which it forwards to ([observe] alloc)
        self.cpus = cpus
        self.build = build  # another server binary (a [builds] entry); None: the installed one
        self.flavor = dialect(build)  # the option file's dialect, as the build's kind says
        self.child: Child | None = None
        self.crashed: bool | None = None  # known once stopped: did it end on its own first?
        # True only for a PGO training server, which writes its profile into the build's tree (root's)
        self.as_root = False
        self.exec_as: pwd.struct_passwd | None = None  # the account it is exec'd as (start: _exec_account)

    def write_option_file(self) -> None:
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        listen: dict[str, Any] = {"skip-networking": True}  # the socket only
        if self.bind_address:
            listen = {"port": self.port, "bind-address": self.bind_address}
        fixed = {
            "datadir": self.datadir,
            "socket": self.socket,
            **listen,
            "pid-file": self.rundir / "mysqld.pid",
            "log-error": self.error_log,
            "tmpdir": self.tmpdir,
        }
        if os.geteuid() == 0 and self.exec_as is None:  # started as root: it becomes this account itself
            user = None if self.as_root else run_user()
            fixed["user"] = user.pw_name if user is not None else "root"
        fixed.update(share_options(self.build))
        fixed.update(self.flavor.private(self.rundir, self.build))
        lines = ["# written by perflab; the server reads no other option file", f"[{self.flavor.group}]"]
        # the fixed options come last: the last occurrence of an option wins
        lines += [option_line(k, v) for k, v in {**self.flavor.translate(self.options), **fixed}.items()]
        self.option_file.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def ld_preload(self) -> str:
        assert self.preload is not None
        return ld_preload(self.preload, self.rundir)

    def start(self, deadline_s: float = READY_DEADLINE_S) -> None:
        libraries = [str(self.tracer)] if self.tracer is not None else []
        libraries += [self.ld_preload()] if self.preload is not None else []
        if libraries:
            self.env["LD_PRELOAD"] = " ".join(libraries)
        launcher = self.build.launcher if self.build is not None else []  # a private root's loader
        self.exec_as = self._exec_account(launcher, libraries)
        self.write_option_file()
        if not self.as_root:  # its run directory and datadir its account's (servers/managed.give)
            give(self.rundir, run_user(), "mariadbd")
            if not self.datadir.is_relative_to(self.rundir):
                give(self.datadir, run_user(), "mariadbd")
        argv = self.launched([*launcher, str(self.program), f"--defaults-file={self.option_file}"])
        argv = as_account(argv, self.exec_as)
        # a TCP client here (go-tpc, which takes its password only in argv): not this machine's
        # loopback, which every account reaches, but 127.0.0.1 of a network of its own (places/netns.py)
        self.own_network = self.bind_address == LOOPBACK
        if self.own_network:
            argv = netns.own(argv)
        # what the server (or ld.so, before it) prints outside its error log
        with open(self.rundir / "stdout.log", "w", encoding="utf-8") as console:
            self.child = Child(argv, env=self.env, cpus=self.cpus, cwd=self.rundir, stdout=console)
        self._wait_ready(deadline_s)

    def _exec_account(self, launcher: list[str], libraries: list[str]) -> pwd.struct_passwd | None:
        """The account the server is exec'd as: its own (RUN_USER) when it reaches every file it
        loads, so that it dies with perflab (setpriv sets --pdeathsig after the uid change). Else
        (a build in root's cache) it starts as root and becomes RUN_USER itself (option `user`):
        the kernel then clears its parent-death signal, and only the next run's sweep (or
        `perflab doctor --clean`) stops it if perflab is killed with SIGKILL."""
        user = None if self.as_root else run_user()
        if user is None:
            return None
        programs = [Path(p) for p in launcher if p.startswith("/")] + [self.program]
        files = [Path(lib) for lib in libraries] + ([self.build.share] if self.build and self.build.share else [])
        if all(reachable(p, user, 0o5) for p in programs) and all(reachable(f, user) for f in files):
            return user
        return None

    @property
    def program(self) -> Path:
        return self.build.binary if self.build is not None else Path(binary("mariadbd"))  # installed: MariaDB's

    def _ready(self) -> bool:
        """True once the server accepts a connection and sends its greeting packet."""
        if not self.socket.exists():
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            try:
                sock.connect(str(self.socket))
                return len(sock.recv(5)) > 0
            except OSError:
                return False

    def error_lines(self, limit: int = 12) -> str:
        """The server's own [ERROR] lines (or the log tail if there are none)."""
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
        argv = [
            binary("mariadb"),
            "--no-defaults",
            f"--socket={self.socket}",
            "--user=root",
            "--batch",
            "--skip-column-names",
        ]
        # the statement on stdin, never in argv (a password in it: every account reads /proc/PID/cmdline)
        return call(argv, what="mariadb client", env=clean_env(), timeout=120, stdin=statement)

    def death(self) -> str:
        """How the server ended, for a failed cell: "server died: signal 11 (SIGSEGV)"."""
        code = None if self.child is None else self.child.poll()
        if code is None:
            return "server still running"
        if code < 0:
            return f"server died: signal {-code} ({signal.Signals(-code).name})"
        caught = re.search(r"got signal (\d+)", self.backtrace() or "")  # MySQL 8+: its handler exits
        if caught and int(caught.group(1)) in signal.valid_signals():
            number = int(caught.group(1))
            return f"server died: signal {number} ({signal.Signals(number).name}; its handler exited with code {code})"
        return f"server exited with code {code}"

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

    def alive(self) -> bool:
        return self.child is not None and self.child.poll() is None

    def stop(self, clean: bool = False) -> None:
        """Stop the server: SIGTERM and wait for a clean shutdown, or SIGKILL when the
        datadir is thrown away anyway (a cell's copy)."""
        if self.child is None:
            return
        if self.crashed is None:
            self.crashed = self.child.poll() is not None  # it ended before we stopped it
        if clean:
            self._stop_cleanly(signal.SIGTERM, group=True)
        else:
            self.child.kill()

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def version() -> str:
    return call([binary("mariadbd"), "--version"], what="mariadbd --version").strip()
