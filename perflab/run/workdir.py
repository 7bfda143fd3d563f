"""The run's work directory on tmpfs (or on the `[experiment] storage` directory: run/storage.py),
and what killed runs left there.

A run lives in one directory `TMPFS/perflab-XXXX` (or `STORAGE/perflab-XXXX`): the dataset snapshot, one `cell-NNNN`
per running cell (datadir, socket, logs), `owner.pid` (the perflab that made it) and `pids`
(every process it started, one a line). It is removed when the run ends, whatever happens;
a perflab killed with SIGKILL leaves it behind, and the next run or `perflab doctor --clean`
removes it after stopping what it started there, on this machine and on its remote hosts
(`hosts.json`, hosts/clean.py).

    with work_dir() as workdir: ...     # /dev/shm/perflab-k2j4x/, removed on the way out
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

from perflab.places.proc import recording_pids

TMPFS = os.environ.get("PERFLAB_TMPFS", "/dev/shm")  # where servers and datadirs live (RAM)
PREFIX = "perflab-"


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
    try:
        (path / "owner.pid").write_text(str(os.getpid()), encoding="ascii")
        with recording_pids(path / "pids"):
            yield path
    finally:
        _remove_workdir(path)


KEPT = ("hosts.json", "owner.pid")  # what a run whose remote host dropped off leaves for doctor --clean


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


def live_owner(workdir: Path) -> int | None:
    """The pid of the running perflab that owns `workdir`, or None (gone, or no such directory)."""
    try:
        text = (workdir / "owner.pid").read_text(encoding="ascii").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and Path(f"/proc/{text}").exists() else None


def stale_workdirs(base: Path) -> list[tuple[Path, list[int]]]:
    """Work directories whose perflab is gone, with the live processes it started there: a
    pid from the run's `pids` file counts only if its command line still names that work
    directory (a recycled pid belongs to someone else and is never touched)."""
    out = []
    for path in sorted(base.glob(PREFIX + "*")):
        try:
            owner = int((path / "owner.pid").read_text(encoding="ascii"))
        except (OSError, ValueError):
            continue
        if not Path(f"/proc/{owner}").exists():
            out.append((path, [pid for pid in _logged_pids(path) if _started_in(pid, path)]))
    return out


def remove_stale_workdirs(base: Path) -> list[tuple[Path, list[int]]]:
    """Delete work directories left by a perflab that died without cleaning up (SIGKILL):
    first stop any process it started that still runs (pdeathsig makes that rare), then
    remove its files. Returns what was removed: (work directory, pids killed)."""
    removed = []
    for path, pids in stale_workdirs(base):
        killed = [pid for pid in pids if _kill(pid)]
        release_postgres_shm(path)
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


def release_postgres_shm(workdir: Path) -> None:
    """The System V segments of PostgreSQL servers of a dead run (servers/postgresql/server.py): their
    backends exit once their postmaster is gone, and a segment is removed once none is attached."""
    from perflab.servers.postgresql.server import release_shm

    for pid_file in [*workdir.glob("*/data/postmaster.pid"), *workdir.glob("*/postmaster.pid")]:
        release_shm(pid_file)


def _logged_pids(workdir: Path) -> list[int]:
    try:
        return [int(x) for x in (workdir / "pids").read_text(encoding="ascii").split()]
    except (OSError, ValueError):
        return []


def _started_in(pid: int, workdir: Path) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return str(workdir).encode() in f.read()
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
