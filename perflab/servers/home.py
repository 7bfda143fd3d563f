"""Where a managed server lives: its cell's directory, the files perflab writes there, its start as
its own account, the statements of its client, its signals and what it leaves. Here (`HereHome`: this
machine's tmpfs, the account taken from its passwd) or on a server host (hosts/home.HostHome: the
same over its SSH link), so that a server kind is written once (servers/postgresql/server.py, servers/mysqld.py).

    home = HereHome(rundir, cpus)                   # or hosts/home.HostHome(server_host, rundir, datadir)
    home.write("postgresql.conf", text)             # into its directory there, a copy here
    child = home.start(argv, env, "postgres.log", "postgres")   # as that account, its output logged
    home.client(psql_argv, "SELECT 1", "psql")
"""

from __future__ import annotations

import os
import pwd
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from perflab import allocators
from perflab.places import Process, netns, segments
from perflab.places.proc import Child, call, clean_env, start_ticks
from perflab.places.proctree import children
from perflab.servers.dataset import tree_bytes
from perflab.servers.managed import account, as_account, give, ld_preload, randomized, reachable

if TYPE_CHECKING:
    from perflab.hosts.rundir import RunDir
    from perflab.hosts.transport import Connection


class ServerHostPlace(Protocol):
    """The run's server host as a kind's server there uses it (hosts/server.ServerHost): its link,
    its run directory, the address this machine reaches it by, its server's binaries and version."""

    name: str
    address: str  # the server listens there only
    binaries: dict[str, str]  # tool -> its path on the host
    version: str  # the host's server, as its --version says it

    @property
    def link(self) -> Connection: ...

    @property
    def rundir(self) -> RunDir: ...

    @property
    def program(self) -> str: ...

    def free_port(self) -> int: ...


class Home(Protocol):
    """A managed server's quarters: `dir`, its cell's directory where it runs; `local`, the same cell's
    directory here (its configuration's copy, its logs fetched back); `name`, "here" or the host's."""

    name: str
    dir: str
    local: Path
    remote_clients: bool  # its clients here reach it by TCP, as the run's role (a server host's)

    def write(self, name: str, text: str) -> None:
        """The file `name` of its directory there, its copy in `local`."""

    def preloaded(self, library: str) -> str:
        """`library` as LD_PRELOAD names it there."""

    def account(self, user: str, hint: str) -> str:
        """The account a server of `user` runs as there: `user` when perflab (its ssh user) is root, else
        "" (perflab's own). ToolMissingError with `hint` when there is no such account."""

    def reaches(self, user: str, programs: Sequence[str], files: Sequence[str]) -> bool:
        """Whether the account `user` can run `programs` and read `files` there (then the server is
        exec'd as that account; else it starts as perflab's and becomes the account itself)."""

    def start(self, argv: list[str], env: dict[str, str], log: str, user: str, hint: str, *, become: bool = True,
              dirs: Sequence[str] = (), network: bool = False) -> Process:  # fmt: skip
        """`argv` started as the account `user` ("": perflab's; when perflab is root: never as root),
        its output into `log` of its directory, its environment `env`; its directory (with `dirs` made
        in it) and its datadir the account's first. `become` False: it starts as perflab's account and
        becomes `user` itself (mysqld's option `user`). `network`: in a network of its own (netns.own)."""

    def peers(self, user: str) -> list[str]:
        """The OS accounts that may log in on its socket there: perflab's, and the server's (`user`)."""

    def ready(self, name: str) -> bool:
        """Whether `name` (its socket) can be there yet (False: not worth a client's try)."""

    def client(self, argv: list[str], statement: str, what: str) -> str:
        """`statement` through the client `argv` there (on its stdin, never in argv: a password in it)."""

    def fetch(self, *names: str) -> None:
        """Files of its directory there into `local` (nothing to do here)."""

    def signal(self, pid: int, sig: int) -> None:
        """`sig` to the process `pid` alone."""

    def started(self, pid: int, datadir: str) -> None:
        """The server `pid` is up: what it may leave behind if killed is noted (a postmaster's
        System V segment: a run killed first leaves it to doctor --clean)."""

    def release(self, pid: int, datadir: str) -> None:
        """What the server `pid` left behind (a killed postmaster's System V segment): found in the
        kernel's table, made by this process as its account, never by the id in postmaster.pid (the
        server's account writes that file, and could name anyone's segment: issue 48)."""

    def children_titled(self, pid: int, text: str) -> int:
        """How many children of `pid` have `text` in their command line (a postmaster's backends)."""

    def aslr_seen(self, pid: int) -> bool | None:
        """Whether `pid`'s address space is randomized (its personality), None when unread."""

    def mapped(self, pid: int) -> set[str]:
        """Real paths of the files `pid` maps there."""

    def is_dir(self, path: str) -> bool:
        """Whether `path` is a directory there."""

    def tree_bytes(self, path: str) -> int:
        """The bytes of the files under `path` there (a database's on disk)."""

    def remove(self) -> None:
        """Its cell's directory there, once the server is gone (a host's: not left to fill its tmpfs)."""


class HereHome:
    """This machine: the cell's directory is `local` itself; the server pinned to `cpus` (`pin`)."""

    name = "here"
    remote_clients = False

    def __init__(self, local: Path, cpus: Sequence[int] | None = None, datadir: Path | None = None) -> None:
        self.local, self.dir, self.cpus, self.datadir = local, str(local), cpus, datadir
        self.ticks: int | None = None  # the server's start time (its segment's: release)
        self.uid = os.geteuid()  # the account it runs as (start)

    def write(self, name: str, text: str) -> None:
        self.local.mkdir(parents=True, exist_ok=True)
        (self.local / name).write_text(text, encoding="utf-8")

    def preloaded(self, library: str) -> str:
        return ld_preload(Path(library), self.local)

    def account(self, user: str, hint: str) -> str:
        server = account(user, hint)
        return server.pw_name if server is not None else ""

    def reaches(self, user: str, programs: Sequence[str], files: Sequence[str]) -> bool:
        server = pwd.getpwnam(user)
        return all(reachable(Path(p), server, 0o5) for p in programs) and all(reachable(Path(f), server) for f in files)

    def start(self, argv: list[str], env: dict[str, str], log: str, user: str, hint: str, *, become: bool = True,
              dirs: Sequence[str] = (), network: bool = False) -> Child:  # fmt: skip
        server = account(user, hint) if user else None
        self.uid = server.pw_uid if server is not None else os.geteuid()
        for name in dirs:
            (self.local / name).mkdir(parents=True, exist_ok=True)
        give(self.local, server, "the server")  # its directory its account's (issue 48)
        if self.datadir is not None and not self.datadir.is_relative_to(self.local):  # on disk ([experiment] storage)
            give(self.datadir, server, "the server")
        argv = as_account(argv, server if become else None)
        if network:  # outside setpriv: unshare needs root (places/netns.py)
            argv = netns.own(argv)
        with open(self.local / log, "w", encoding="utf-8") as out:
            child = Child(argv, env=clean_env(env), cpus=self.cpus, cwd=self.local, stdout=out)
        self.ticks = start_ticks(child.pid)  # setpriv execs it in place: the server's own
        return child

    def peers(self, user: str) -> list[str]:
        server = account(user, "")
        return [pwd.getpwuid(os.geteuid()).pw_name] + ([server.pw_name] if server is not None else [])

    def ready(self, name: str) -> bool:
        return (self.local / name).exists()

    def client(self, argv: list[str], statement: str, what: str) -> str:
        return call(argv, what=what, env=clean_env(), timeout=120, stdin=statement)

    def fetch(self, *names: str) -> None:
        pass

    def signal(self, pid: int, sig: int) -> None:
        os.kill(pid, signal.Signals(sig))

    def started(self, pid: int, datadir: str) -> None:
        pass  # its start time, taken in start(), finds its segment

    def release(self, pid: int, datadir: str) -> None:
        if self.ticks is not None:
            segments.release({pid: self.ticks}, {self.uid})

    def children_titled(self, pid: int, text: str) -> int:
        count = 0
        for member in children(pid):
            try:
                title = Path(f"/proc/{member}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            count += text.encode() in title
        return count

    def aslr_seen(self, pid: int) -> bool | None:
        return randomized(pid)

    def mapped(self, pid: int) -> set[str]:
        return allocators.mapped_libraries(pid)

    def is_dir(self, path: str) -> bool:
        return Path(path).is_dir()

    def tree_bytes(self, path: str) -> int:
        return tree_bytes(Path(path))

    def remove(self) -> None:
        pass  # the run's work directory is removed with the run
