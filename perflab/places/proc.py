"""Child processes that cannot outlive perflab.

Every process perflab starts runs in its own session (so a terminal's Ctrl-C reaches
perflab only, which then stops it in order) under `setpriv --pdeathsig KILL` (so the kernel
kills it even if perflab itself is killed with SIGKILL). `Child` is a context manager that
kills the whole process group (and its leader's descendants outside it: kill_tree) in `finally`;
`os.wait4` reaps it and returns its rusage.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, TypeVar

from perflab.errors import PerflabError, ToolMissingError
from perflab.places.proctree import children
from perflab.redact import redact, redact_argv

T = TypeVar("T")

_SETPRIV = shutil.which("setpriv")


def guarded(argv: Sequence[str], cpus: Sequence[int] | None = None) -> list[str]:
    """argv prefixed so the process dies with perflab and, optionally, runs on `cpus`."""
    prefix: list[str] = []
    if _SETPRIV:
        prefix += [_SETPRIV, "--pdeathsig", "KILL"]
    if cpus:
        prefix += ["taskset", "-c", ",".join(map(str, cpus))]
    return prefix + list(argv)


PID_LOG: Path | None = None  # the run's pid file, set by `recording_pids`
RUN_ENV = "PERFLAB_RUN"  # a logged Child's tag: the run's work directory, in its environment


@contextlib.contextmanager
def recording_pids(path: Path) -> Iterator[None]:
    """Append `PID START_TICKS` of every Child started inside to `path` (one per line), and tag
    its environment with RUN_ENV=`path`'s directory: a later perflab stops a leftover only if it
    is that very process (the pid and its start time) and carries the tag (run/workdir.py)."""
    global PID_LOG
    previous, PID_LOG = PID_LOG, path
    try:
        yield
    finally:
        PID_LOG = previous


class Child:
    """A started process in its own process group, killed with its group on exit."""

    lost: str | None = None  # never: a process here cannot drop off as a host's can (hosts/rundir.Tracked)

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        stdout: IO | int | None = subprocess.DEVNULL,
        stderr: IO | int | None = subprocess.STDOUT,
        cpus: Sequence[int] | None = None,
        cwd: str | Path | None = None,
        stdin: IO | int | None = subprocess.DEVNULL,
        text: bool = False,
    ) -> None:
        self.argv = guarded(argv, cpus)
        if PID_LOG is not None:
            env = {**(os.environ if env is None else env), RUN_ENV: str(PID_LOG.parent)}
        self.started = time.monotonic()  # before the fork: nothing it writes is older
        try:
            self.popen = subprocess.Popen(
                self.argv,
                env=env,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                cwd=cwd,
                text=text,
            )
        except FileNotFoundError as exc:
            raise ToolMissingError(f"cannot run {argv[0]}: {exc.strerror}", "run `perflab doctor`") from None
        self.pid = self.popen.pid
        self.rusage: resource.struct_rusage | None = None
        if PID_LOG is not None:  # so a later perflab can find it if it ever outlived us
            with open(PID_LOG, "a", encoding="ascii") as log:
                log.write(f"{self.pid} {start_ticks(self.pid)}\n")

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def poll(self) -> int | None:
        """Exit code if the process has ended (and reap it), else None."""
        if self.popen.returncode is not None:
            return self.popen.returncode
        pid, status, usage = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        self._reaped(status, usage)
        return self.popen.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for exit, reaping the process and keeping its rusage; TimeoutError on deadline."""
        if self.popen.returncode is not None:
            return self.popen.returncode
        if timeout is None:
            _, status, usage = os.wait4(self.pid, 0)
            self._reaped(status, usage)
            return self.popen.returncode  # type: ignore[return-value]
        deadline = time.monotonic() + timeout
        while (code := self.poll()) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{self.argv[-1]} still running after {timeout:.0f}s")
            exited(self.pid, left)
        return code

    def _reaped(self, status: int, usage: resource.struct_rusage) -> None:
        self.rusage = usage
        self.popen.returncode = os.waitstatus_to_exitcode(status)

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    def terminate(self, grace: float = 30.0) -> int:
        """SIGTERM the group, wait up to `grace` seconds, then SIGKILL; returns the exit code."""
        if self.popen.returncode is None:
            self.signal_group(signal.SIGTERM)
            try:
                return self.wait(grace)
            except TimeoutError:
                pass
        self.kill()
        return self.popen.returncode

    def kill(self) -> None:
        """SIGKILL the whole group (helpers it started included) and every descendant that left it,
        reap the leader and wait until those are gone too (`kill_tree`)."""
        if self.popen.returncode is not None:  # reaped: what its leader left in the group
            self.signal_group(signal.SIGKILL)
            return
        strays = kill_tree(self.pid)
        try:
            self.wait(10)
        except (TimeoutError, ChildProcessError):
            pass
        gone(strays, STRAYS_GONE_S)


STRAYS_GONE_S = 5.0  # how long a killed stray gets to die


def kill_tree(pid: int) -> list[tuple[int, int]]:
    """SIGKILL group `pid` and every descendant of its leader in another session: PostgreSQL's backends
    each call setsid, so a SIGKILL to the postmaster's group alone leaves them to notice its death, up to
    seconds later (and a host's run directory removed under them). The group is stopped first, and each
    descendant as it is found, so nothing forks a child that would be missed; the strays killed, as
    (pid, start ticks), for `gone`."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGSTOP)
    strays, todo = [], children(pid)
    while todo:
        child = todo.pop()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGSTOP)
        ticks = start_ticks(child)
        if ticks is not None:
            strays.append((child, ticks))
            todo += children(child)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for child, _ in strays:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)
    return strays


def gone(processes: Sequence[tuple[int, int]], timeout: float) -> bool:
    """Wait until none of `processes` (pid, start ticks) runs any more: it left the process table (a pid
    recycled since is another process) or is a zombie, dead and waiting for init to reap it (which here
    takes up to 2 s); False if one still runs after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while any(_running(pid, ticks) for pid, ticks in processes):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def _running(pid: int, ticks: int) -> bool:
    fields = _stat(pid)
    return fields is not None and int(fields[19]) == ticks and fields[0] not in (b"Z", b"X")


def _stat(pid: int) -> list[bytes] | None:
    """/proc/PID/stat's fields after the command's name (state first), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def exited(pid: int, timeout: float) -> None:
    """Return once child `pid` has exited (not reaped: `poll` does that) or `timeout` seconds have
    passed, whichever is first: its pidfd turns readable as it exits. A poll every 50 ms made each
    stop of a server, a client or a status reader wait 25 ms on average (an interleaved round of
    two seats: 0.3 s of 2.7). Where pidfds are missing (Linux < 5.3), a 10 ms sleep instead."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone already, or no pidfd here
        time.sleep(min(timeout, 0.01))
        return
    try:
        select.select([fd], [], [], timeout)
    finally:
        os.close(fd)


def start_ticks(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (/proc/PID/stat field 22): with the pid,
    what tells this process from a later one the pid was recycled for. None: it is gone."""
    fields = _stat(pid)
    try:
        return int(fields[19]) if fields is not None else None
    except (IndexError, ValueError):
        return None


def sockets(pid: int) -> int:
    """How many sockets process `pid` holds open (a client's connections); 0 once it is gone."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    count = 0
    for fd in fds:
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            continue  # closed since
    return count


def shown(argv: Sequence[str]) -> str:
    """A command line to show in a message: its passwords starred (perflab/redact.py)."""
    return " ".join(redact_argv(argv))


def call(
    argv: Sequence[str],
    *,
    what: str,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    cwd: Path | None = None,
    stdin: str | None = None,
) -> str:
    """Run a short command to completion; raise PerflabError with its output tail on failure.
    `stdin`: its input (what must not be in argv, which every account reads in /proc: a password)."""
    try:
        done = subprocess.run(
            guarded(argv),
            env=env,
            cwd=cwd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
            check=False,
        )
    except FileNotFoundError:
        raise ToolMissingError(f"{what}: {argv[0]} not found", "run `make setup` or `perflab doctor`") from None
    except subprocess.TimeoutExpired:
        raise PerflabError(f"{what}: no result after {timeout:.0f}s", f"command: {shown(argv)}") from None
    if done.returncode != 0:
        tail = redact("\n".join((done.stdout + done.stderr).strip().splitlines()[-15:]))
        raise PerflabError(f"{what} failed (exit {done.returncode}):\n{tail}", f"command: {shown(argv)}")
    return done.stdout


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """perflab's environment without variables that would change what is measured."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LD_", "MALLOC_", "GLIBC_TUNABLES"))}
    env.update(extra or {})
    return env


_ANSWERS: dict[tuple[object, ...], object] = {}


def per_binary(binaries: Sequence[str | Path], question: tuple[object, ...], ask: Callable[[], T]) -> T:
    """What `ask()` answers of these binaries (a `--version`), asked once a process while each file
    is the same (device, inode, size, mtime): a run asks its server's version in four places."""
    try:
        key = (question, *((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) for st in map(os.stat, binaries)))
    except OSError:
        return ask()
    if key not in _ANSWERS:
        _ANSWERS[key] = ask()
    return _ANSWERS[key]  # type: ignore[return-value]


def read_tail(log: Path | None, lines: int = 30) -> str | None:
    """The last `lines` lines of a process's log here; None when there is none."""
    if log is None or not log.is_file():
        return None
    return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def which(name: str) -> str | None:
    return shutil.which(name) or next(
        (
            p
            for p in (
                f"/usr/sbin/{name}",
                f"/sbin/{name}",
                os.path.expanduser(f"~/.cargo/bin/{name}"),
                os.path.expanduser(f"~/go/bin/{name}"),  # go install without GOBIN (go-tpc)
                f"/usr/lib/postgresql/15/bin/{name}",  # postgres and initdb are not on $PATH
            )
            if os.access(p, os.X_OK)
        ),
        None,
    )
