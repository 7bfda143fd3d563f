"""What every managed server process shares (MariaDB, MySQL, PostgreSQL): its pid, the wait until it
answers a real connection, the LD_PRELOAD of a variant's library, and its stop, liveness and death."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from perflab.errors import PerflabError, ServerStartError, ServerStopError, ToolMissingError
from perflab.places import netns

ADDR_NO_RANDOMIZE = 0x0040000  # <linux/personality.h>
LOOPBACK = "127.0.0.1"  # where a server here listens for a client that connects by TCP (go-tpc)


def free_port(address: str = LOOPBACK) -> int:
    """A TCP port nothing here listens on at `address` now (the kernel's pick; any address's when
    `address` is not this machine's)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((address, 0))
        except OSError:
            sock.bind(("", 0))
        return int(sock.getsockname()[1])


def ld_preload(library: Path, rundir: Path) -> str:
    """LD_PRELOAD for `library`. ld.so splits it at spaces and colons, so a library whose path
    holds one is preloaded through a symlink in the run directory (/proc/PID/maps shows the
    library's real path all the same)."""
    path = str(library)
    if not any(c in path for c in " :\t"):
        return path
    link = rundir / "preload.so"
    link.unlink(missing_ok=True)
    link.symlink_to(path)
    return str(link)


def account(name: str, hint: str) -> pwd.struct_passwd | None:
    """The system account a server runs as when perflab is root (never root itself: a local account
    that reached it would act as root, issue 48); None when perflab is not root (its own account)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise ToolMissingError(
            f"perflab runs no server as root, and there is no {name!r} account to run it as", hint
        ) from None


def give(path: Path, user: pwd.struct_passwd | None, who: str) -> None:
    """`path` (a tree perflab made) owned by the server's account `user`, 0700 (its socket, log and
    files: that account's and root's alone), its parent searchable; nothing when `user` is None.
    ServerStartError naming a directory above it that `user` cannot search."""
    if user is None:
        return
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), user.pw_uid, user.pw_gid)
    os.lchown(path, user.pw_uid, user.pw_gid)
    path.chmod(0o700)
    parent = path.parent
    if parent.stat().st_mode & 0o001 == 0:  # perflab's own work directory is 0700
        parent.chmod(parent.stat().st_mode | 0o011)
    above = _denied(parent.parent, user)
    if above is not None:
        raise ServerStartError(
            f"{above} is not searchable by the {user.pw_name} user, who runs {who}",
            f"chmod o+x {above}, or point [experiment] storage (or PERFLAB_TMPFS) elsewhere",
        )


def reachable(path: Path, user: pwd.struct_passwd, need: int = 0o4) -> bool:
    """`user` can search every directory on the way to `path` and has the `need` bits (0o4 read,
    0o5 read and execute) on it, by its owner or other bits (its group's are not counted)."""
    try:
        return _denied(path.parent, user) is None and _allows(path.stat(), user, need)
    except OSError:
        return False


def _allows(st: os.stat_result, user: pwd.struct_passwd, need: int) -> bool:
    perm = (st.st_mode >> 6) & 0o7 if st.st_uid == user.pw_uid else st.st_mode & 0o7
    return perm & need == need


def _denied(directory: Path, user: pwd.struct_passwd) -> Path | None:
    """The first directory on the way to (and including) `directory` that `user` cannot search."""
    return next((p for p in [*reversed(directory.parents), directory] if not _allows(p.stat(), user, 0o1)), None)


def as_account(argv: list[str], user: pwd.struct_passwd | None) -> list[str]:
    """argv run as `user` from its exec (unchanged for None). --pdeathsig comes after the uid change,
    which clears it (prctl(2)): the server still dies with perflab, even by SIGKILL."""
    if user is None:
        return argv
    ids = [f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups"]
    return [shutil.which("setpriv") or "setpriv", *ids, "--pdeathsig", "KILL", *argv]


def unsearchable(directory: Path, user: pwd.struct_passwd | None) -> Path | None:
    """The first directory on the way to `directory` that `user` (the server's account) cannot search."""
    return None if user is None else _denied(directory, user)


def read_log(path: Path) -> str:
    """A log in a directory the server's user owns, read without following a link (it could point at
    any file root reads: issue 48); FileNotFoundError when there is none, or it is not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise FileNotFoundError(f"{path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileNotFoundError(f"{path}: not a regular file")
        return f.read().decode("utf-8", errors="replace")


def copy_log(path: Path, to: Path) -> None:
    """`path` (read_log's way) into `to`; nothing when there is no such regular file. An OSError
    writing it names both files, as shutil.copy's does (a full results disk: run/cell.py)."""
    try:
        text = read_log(path)
    except FileNotFoundError:
        return
    try:
        to.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path), None, str(to)) from exc


def randomized(pid: int) -> bool | None:
    """Whether process `pid`'s address space is randomized, from its personality; None when it cannot be read."""
    try:
        return randomizing(Path(f"/proc/{pid}/personality").read_text())
    except OSError:
        return None


def randomizing(personality: str) -> bool | None:
    """Whether a process of this personality (/proc/PID/personality, hex) has its address space
    randomized (no ADDR_NO_RANDOMIZE, 0x0040000); None for what is not one."""
    try:
        return not int(personality.strip(), 16) & ADDR_NO_RANDOMIZE
    except ValueError:
        return None


class Managed:
    """A server process perflab started, where its `home` is (servers/home.py: here or a server host;
    it reads itself there): what a cell asks of any server (start, stop, alive, death, sql, data_bytes),
    the shared parts written here. Subclasses set `error_log` and `option_file` and define `program`,
    `start`, `error_lines`, `backtrace`, `sql`, `data_bytes` and `_ready` (a real connection answers)."""

    error_log: Path  # its log, this machine's copy (fetched back from a host)
    option_file: Path  # its configuration, this machine's copy
    port: int  # where it listens for TCP clients (when it does), and what names its socket
    socket: Path  # where a client here connects (MySQL's socket file, PostgreSQL's socket directory)
    bind_address: str | None = None  # the one address it listens on by TCP; None: its socket only
    alloc: Any = None  # [observe] alloc's counter on a server host (its AllocTracer), None here
    READY_POLL_S = 0.01  # a connection and its greeting (mysqld.py): cheap, and the start's wait is all latency
    CLEAN_STOP_S = 120.0  # a clean shutdown that takes longer is killed, and is not clean
    STOP_SIGNAL, STOP_GROUP = signal.SIGTERM, True  # its clean shutdown: this signal, to its process group?
    aslr = True  # False: the server starts under `setarch -R` (its children inherit it)
    own_network = False  # True: it listens on 127.0.0.1 of a network of its own (places/netns.py)

    def __init__(
        self,
        home: Any,
        rundir: Path,
        datadir: Path | str,
        *,
        env: dict[str, str] | None,
        preload: Path | str | None,
        tracer: Path | str | None,
        cpus: Sequence[int] | None,
        build: Any,
        programs: dict[str, str] | None,
    ) -> None:
        self.home = home  # servers/home.Home (not imported: home.py builds on this module)
        self.rundir = rundir  # this machine's cell directory: its configuration's copy, its logs
        self.datadir = datadir  # where it runs
        self.env = dict(env or {})  # the server's environment (perflab's own cleaned in: servers/home.py)
        self.preload = preload  # a variant's allocator
        self.tracer = tracer  # [observe] alloc's counter library, preloaded before the allocator it forwards to
        self.cpus = cpus
        self.build = build  # another server binary (a [builds] entry); None: the installed one
        self.programs = programs  # a host's tools by name; None: this machine's
        self.child: Any = None  # places/proc.Child here, hosts/rundir.Tracked there
        self.crashed: bool | None = None  # known once stopped: did it end on its own first?

    def launched(self, argv: list[str]) -> list[str]:
        """The server's argv behind its launcher: setarch execs it in place (same pid) with
        address-space randomization off, so the layout is the same at every start."""
        return argv if self.aslr else ["setarch", "-R", *argv]

    def client(self, argv: list[str]) -> list[str]:
        """argv of a client here that connects by TCP: in the server's own network when it has one."""
        return netns.join(self.pid, argv) if self.own_network else argv

    def aslr_seen(self) -> bool | None:
        return self.home.aslr_seen(self.pid)

    def mapped(self) -> set[str]:
        """Real paths of the files the server maps, where it runs."""
        return self.home.mapped(self.pid)

    def remove(self) -> None:
        """Its cell's directory where it runs (datadir included; here the run's, removed with it)."""
        self.home.remove()

    @property
    def program(self) -> Path:
        raise NotImplementedError

    def error_lines(self, limit: int = 12) -> str:
        raise NotImplementedError

    def _ready(self) -> bool:
        raise NotImplementedError

    @property
    def pid(self) -> int:
        """The server's pid (a launcher such as setpriv execs it in place: the Child's pid)."""
        assert self.child is not None
        return self.child.pid

    def _stop_cleanly(self, sig: int, *, group: bool) -> None:
        """`sig` to the server (its clean shutdown; `group`: to its process group), then wait for
        it, then SIGKILL its group (anything left). ServerStopError unless it exited 0 in time: a
        datadir snapshotted or a profile collected after it would be partial."""
        assert self.child is not None
        code = self.child.poll()
        why = f"had already exited (code {code}) when its clean shutdown was asked for" if code is not None else None
        if code is None:
            if group:
                self.child.signal_group(sig)
            else:
                self._signal(sig)
            try:
                code = self.child.wait(self.CLEAN_STOP_S)
            except TimeoutError:
                why = f"did not finish its clean shutdown within {self.CLEAN_STOP_S:.0f} s and was killed"
        self.child.kill()
        if why is None and code != 0:
            why = f"exited with code {code} from its clean shutdown" + (
                f" ({signal.Signals(-code).name})" if code < 0 else ""
            )
        if why is not None:
            raise ServerStopError(
                f"{self.program.name} {why}: what it writes at exit (a snapshot's checkpoint, a PGO profile) "
                f"may be partial:\n{self.error_lines()}",
                f"full log: {self.error_log}",
            )

    def preloads(self) -> tuple[list[str], dict[str, str]]:
        """The libraries LD_PRELOAD names where it runs ([observe] alloc's counter first, which forwards
        to the variant's allocator after it), and its environment with them."""
        libraries = [str(self.tracer)] if self.tracer is not None else []
        libraries += [self.home.preloaded(str(self.preload))] if self.preload is not None else []
        return libraries, {**self.env, "LD_PRELOAD": " ".join(libraries)} if libraries else self.env

    def start(self) -> None:
        """Start it and wait until it answers (each server's own deadline)."""
        raise NotImplementedError

    def stop(self, clean: bool = False) -> None:
        """Stop the server: its clean shutdown (STOP_SIGNAL) and a wait for it, or SIGKILL to its group
        when what it leaves is thrown away anyway (a cell's copy of the datadir); then `_stopped`."""
        if self.child is None:
            return
        if self.crashed is None:  # it ended before we stopped it (a host that dropped off: unknown, not a crash)
            self.crashed = self.child.poll() is not None and not self.child.lost
        try:
            if clean:
                self._stop_cleanly(self.STOP_SIGNAL, group=self.STOP_GROUP)  # and SIGKILL to what is left
            else:
                self.child.kill()
        finally:
            with contextlib.suppress(PerflabError):  # a host that dropped off: what it left is doctor --clean's
                self._stopped()

    def _stopped(self) -> None:
        """After it stopped: its logs fetched back from where it ran (a no-op here)."""

    def alive(self) -> bool:
        return self.child is not None and self.child.poll() is None

    def death(self) -> str:
        """How the server ended, for a failed cell: "server died: signal 11 (SIGSEGV)"."""
        code = None if self.child is None else self.child.poll()
        if code is None:
            return self._running()
        if self.child.lost:  # its host dropped off: how it fares there is unknown
            return str(self.child.lost)
        if code < 0:
            return f"server died: signal {-code} ({signal.Signals(-code).name})"
        return self._exited(code)

    def _running(self) -> str:
        """`death` of a server whose process still runs."""
        return "server still running"

    def _exited(self, code: int) -> str:
        """`death` of a server that exited on its own with `code` (>= 0)."""
        return f"server exited with code {code}"

    def backtrace(self, limit: int = 80) -> str | None:
        """The crash's lines in its log, if any."""
        raise NotImplementedError

    def sql(self, statement: str) -> str:
        """`statement`'s result as its command-line client prints it (on stdin, never in argv)."""
        raise NotImplementedError

    def data_bytes(self, database: str) -> int:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _signal(self, sig: int) -> None:
        """`sig` to the server process alone."""
        assert self.child is not None
        os.kill(self.child.pid, sig)

    def _wait_ready(self, deadline_s: float) -> None:
        """Until `_ready()`; a server that exits or stays mute past the deadline is a start error."""
        assert self.child is not None
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            code = self.child.poll()
            if code is not None:
                raise ServerStartError(
                    f"{self.program.name} exited with code {code} during start-up:\n{self.error_lines()}",
                    f"full log: {self.error_log}; check the variant's server_options",
                )
            if self._ready():
                return
            time.sleep(self.READY_POLL_S)
        self.child.kill()
        raise ServerStartError(
            f"{self.program.name} not ready after {deadline_s:.0f}s:\n{self.error_lines()}",
            f"full log: {self.error_log}",
        )
