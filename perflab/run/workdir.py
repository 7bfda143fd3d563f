"""The run's work directory on tmpfs (or on the `[experiment] storage` directory: run/storage.py),
and what killed runs left there.

A run lives in one directory `TMPFS/perflab-XXXXXXXX` (or `STORAGE/perflab-XXXXXXXX`), made 0700
by mkdtemp: the dataset snapshot, one `cell-NNNN` per running cell (datadir, socket, logs),
`live.lock` (flocked by the run from start to end: its liveness), `owner.pid` (the perflab that
made it) and `pids` (`PID START_TICKS` of every process it started, one a line; each is tagged
PERFLAB_RUN=<this directory> in its environment: places/proc.py). It is removed when the run ends,
whatever happens; a perflab killed with SIGKILL leaves it behind, and the next run or
`perflab doctor --clean` removes it after stopping what it started there, on this machine and on
its remote hosts (`hosts.json`, hosts/clean.py).

/dev/shm is everyone's, so the sweep takes only what this machine's perflab made: a directory of
the exact name pattern, not a symlink, owned by this perflab's uid with mode 0700 (0711 once a
PostgreSQL cell made it traversable), whose live.lock (ours, not a symlink) can be flocked: the run
is dead. A directory without live.lock is a run starting (or an older perflab's): left alone. Only
processes that are the very ones the run started (the pid with its start time, and the tag) are
killed, and only the shared memory segments they made are removed (places/segments.py); a directory
that fails a check is never read, so a planted hosts.json never causes an SSH connection.

    with work_dir() as workdir: ...     # /dev/shm/perflab-k2j4x_8q/, removed on the way out
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from perflab import lockfile
from perflab.errors import UnsafePathError
from perflab.places import segments
from perflab.places.proc import RUN_ENV, recording_pids, start_ticks
from perflab.units import utc_now

TMPFS = os.environ.get("PERFLAB_TMPFS", "/dev/shm")  # where servers and datadirs live (RAM)
PREFIX = "perflab-"
NAME = re.compile(re.escape(PREFIX) + r"[a-z0-9_]{8}")  # what mkdtemp makes of PREFIX: 8 of its characters
LIVE = "live.lock"
MODES = (0o700, 0o711)  # work_dir's (0o700: mkdtemp's, a directory made before 2026-11-29)


def base_dir() -> Path:
    """The tmpfs, or the system's temporary directory where there is none."""
    return Path(TMPFS) if Path(TMPFS).is_dir() else Path(tempfile.gettempdir())


@contextlib.contextmanager
def work_dir(base: Path | None = None) -> Iterator[Path]:
    """A new work directory (stale ones removed first) that records the pids of the processes
    started inside the `with`, and is removed on exit whatever happens."""
    base = base or base_dir()
    remove_stale_workdirs(base)
    path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))
    # searchable, not listable, by the servers' accounts (mysql, postgres): each reaches its own 0700
    # directory inside (servers/managed.give), whichever is made first (a build's dataset, its root)
    path.chmod(0o711)
    live = _hold_live_lock(path)
    try:
        (path / "owner.pid").write_text(str(os.getpid()), encoding="ascii")
        with recording_pids(path / "pids"):
            yield path
    finally:
        _remove_workdir(path)
        os.close(live)  # the run is over: a directory kept for its hosts may be swept from now on


def _hold_live_lock(path: Path) -> int:
    """Flock a new file and only then give it its name (rename is atomic), so that no sweep ever
    sees a live.lock it can take while this run lives."""
    dir_fd = os.open(path, lockfile.DIR_FLAGS)
    try:
        fd = os.open(LIVE + ".new", lockfile.FILE_FLAGS | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
        fcntl.flock(fd, fcntl.LOCK_EX)
        lockfile.write_holder(fd, {"pid": os.getpid(), "started_at": utc_now()})
        os.rename(LIVE + ".new", LIVE, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    return fd


KEPT = ("hosts.json", "owner.pid", LIVE)  # what a run whose remote host dropped off leaves for doctor --clean


def _remove_workdir(path: Path) -> None:
    """Remove the run's work directory; where hosts.json still names a remote host that could not be
    cleaned (it dropped off), keep that record and the owner's pid, so that `perflab doctor --clean`
    (or the next run) cleans the host once it is back."""
    if not (path / "hosts.json").exists():
        shutil.rmtree(path, ignore_errors=True)
        return
    for entry in path.iterdir():
        if entry.name not in KEPT:
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)


def unsafe(st: os.stat_result) -> str | None:
    """Why a work directory with this (l)stat is not one this perflab made (None: it is)."""
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}"
    if stat.S_IMODE(st.st_mode) not in MODES:
        return f"mode {stat.S_IMODE(st.st_mode):04o}"
    return None


def foreign(base: Path) -> list[tuple[Path, str]]:
    """Entries under `base` named like work directories that this perflab did not make (another
    account's, a symlink, another mode): never read nor removed; with why, for `doctor --clean`."""
    found = []
    for path in sorted(base.glob(PREFIX + "*")):
        try:
            st = path.lstat()
        except OSError:
            continue
        why = "a symbolic link" if stat.S_ISLNK(st.st_mode) else unsafe(st)
        if why and (stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            found.append((path, why))
    return found


@contextlib.contextmanager
def _dead_runs(base: Path) -> Iterator[list[Path]]:
    """The work directories under `base` of this perflab's dead runs, each one's live.lock held
    (so that no other sweep takes it meanwhile) until the `with` ends."""
    held: list[int] = []
    found = []
    try:
        for path in sorted(base.glob(PREFIX + "*")):
            fd = _claim(path) if NAME.fullmatch(path.name) else None
            if fd is not None:
                held.append(fd)
                found.append(path)
        yield found
    finally:
        for fd in held:
            os.close(fd)


def _claim(path: Path) -> int | None:
    """live.lock of `path`, flocked, when `path` is a work directory this perflab made and its run
    is dead; None otherwise (alive, someone else's, a symlink, no live.lock)."""
    try:
        dir_fd = os.open(path, lockfile.DIR_FLAGS)  # O_NOFOLLOW: a symlink is refused here
    except OSError:
        return None
    try:
        if unsafe(os.fstat(dir_fd)):
            return None
        fd = lockfile.open_owned(dir_fd, LIVE, create=False)
    except (OSError, UnsafePathError):
        return None
    finally:
        os.close(dir_fd)
    if lockfile.try_lock(fd):
        return fd
    os.close(fd)
    return None


def stale_workdirs(base: Path) -> list[tuple[Path, list[int]]]:
    """Work directories of this perflab's dead runs, with the live processes each started there
    (the very processes: their pid with its start time, and the run's tag in their environment)."""
    with _dead_runs(base) as dead:
        return [(path, [pid for pid, ticks in _left(path).items() if _started_by(pid, ticks, path)]) for path in dead]


def remove_stale_workdirs(base: Path) -> list[tuple[Path, list[int]]]:
    """Delete work directories left by a perflab that died without cleaning up (SIGKILL):
    first stop any process it started that still runs (pdeathsig makes that rare), then
    remove its files. Returns what was removed: (work directory, pids killed)."""
    removed = []
    with _dead_runs(base) as dead:
        for path in dead:
            pids = _left(path)
            killed = [pid for pid, ticks in pids.items() if _started_by(pid, ticks, path) and _kill(pid)]
            release_segments(path, pids)
            if _remote_left(path):
                continue  # kept: its hosts.json still names what is left on a host it could not reach
            shutil.rmtree(path, ignore_errors=True)
            removed.append((path, killed))
    return removed


def _remote_left(workdir: Path) -> bool:
    """Clean what a dead run left on its remote hosts (hosts/clean.py); True when a host could not be reached."""
    if not (workdir / "hosts.json").exists():
        return False
    from perflab.hosts.clean import clean_remote

    return any(why is not None for *_, why in clean_remote(workdir))


def release_segments(workdir: Path, pids: dict[int, int]) -> list[int]:
    """The System V segments the dead run's processes made (a killed postmaster's), removed once
    nobody is attached (places/segments.py); the accounts the run used are this perflab's and those it
    gave part of `workdir` to (only this perflab can chown in its own directory)."""
    return segments.release(pids, {os.geteuid(), *_owners(workdir)})


def _owners(workdir: Path, depth: int = 2) -> set[int]:
    found: set[int] = set()
    level = [workdir]
    for _ in range(depth):
        entries = [e for d in level for e in _scan(d)]
        found |= {st.st_uid for _, st in entries}
        level = [Path(e.path) for e, st in entries if stat.S_ISDIR(st.st_mode)]
    return found


def _scan(directory: Path) -> list[tuple[os.DirEntry, os.stat_result]]:
    """The entries of `directory` with their lstat (a symlink is not followed); [] when it is gone."""
    try:
        with os.scandir(directory) as entries:
            return [(e, e.stat(follow_symlinks=False)) for e in entries]
    except OSError:
        return []


def logged(workdir: Path) -> dict[int, int]:
    """pid -> start ticks of each process the run at `workdir` started (its `pids` file; a line of
    an older perflab, a pid alone, names no process for certain and is left out)."""
    try:
        fd = os.open(workdir / "pids", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    with open(fd, encoding="ascii", errors="replace") as f:
        lines = [line.split() for line in f]
    return {int(p[0]): int(p[1]) for p in lines if len(p) == 2 and p[0].isdigit() and p[1].isdigit()}


def tagged(workdir: Path) -> dict[int, int]:
    """pid -> start ticks of every process here whose environment carries the run's tag (RUN_ENV):
    those a run killed with SIGKILL started in the instant before it logged them and before their
    `setpriv --pdeathsig` took hold (a postmaster seen once in some 25 CI runs), and their children.
    Only processes of the accounts the run used (as release_segments): another account's that
    carries the tag is not the run's."""
    tag, found, accounts = f"{RUN_ENV}={workdir}".encode(), {}, {os.geteuid(), *_owners(workdir)}
    for entry, st in _scan(Path("/proc")):
        name = entry.name
        if not name.isdigit() or int(name) == os.getpid() or st.st_uid not in accounts:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                carries = tag in f.read().split(b"\0")
        except OSError:
            continue
        ticks = start_ticks(int(name)) if carries else None
        if ticks is not None:
            found[int(name)] = ticks
    return found


def _left(workdir: Path) -> dict[int, int]:
    """The processes a dead run may have left: those it logged, and those that carry its tag."""
    return {**tagged(workdir), **logged(workdir)}


def _started_by(pid: int, ticks: int, workdir: Path) -> bool:
    """Whether `pid` is still the process the run at `workdir` started: the same start time (a
    recycled pid has a later one) and the run's tag in its environment."""
    if start_ticks(pid) != ticks:
        return False
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{RUN_ENV}={workdir}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def space_hint(results_dir: Path) -> str:
    return (
        f"free space on {TMPFS} or the [experiment] storage directory (datadirs) or {results_dir} (results), "
        "or use a smaller dataset; "
        f"the stored cells are intact: `perflab run --resume {results_dir}` continues"
    )
