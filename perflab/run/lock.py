"""One perflab run per machine: two benchmarks on one machine measure each other.

`MachineLock` takes an exclusive flock on /run/perflab/perflab.lock for the whole run and
writes who holds it (pid, results directory, start time) into the file, so a second run
can say whom it waits for. The kernel drops the lock when the holder dies, even by
SIGKILL, so a stale file never blocks anyone.

The lock lives in a directory of root's (/run is root's; /run/perflab is made 0700), not on the
world-writable /dev/shm: there another account could plant a symlink at its name (and have root
truncate any file) or hold its flock and stop every run. The directory and the file are checked
(perflab/lockfile.py) before the file is truncated or trusted. Where /run/perflab cannot be made
(perflab not run as root), the lock is this account's own: $XDG_RUNTIME_DIR/perflab, else
/tmp/perflab-lock-UID, checked alike; it then keeps this account's runs apart, not other accounts'.

    with MachineLock(results_dir): run()
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from perflab import lockfile
from perflab.errors import ConcurrentRunError
from perflab.units import utc_now

LOCK_PATH = Path("/run/perflab/perflab.lock")


def fallback_dir() -> Path:
    """This account's own lock directory, where /run/perflab cannot be made."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "perflab"
    return Path(tempfile.gettempdir()) / f"perflab-lock-{os.geteuid()}"


def _lock_dir(path: Path) -> tuple[int, Path]:
    """(an fd of the lock's checked directory, the lock file's path): `path`'s directory, or this
    account's own when that cannot be made (not root)."""
    try:
        return lockfile.private_dir(path.parent), path
    except (PermissionError, FileNotFoundError):
        other = fallback_dir()
        return lockfile.private_dir(other), other / path.name


class MachineLock:
    def __init__(self, results_dir: Path, path: Path = LOCK_PATH) -> None:
        self.results_dir = results_dir
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> MachineLock:
        dir_fd, self.path = _lock_dir(self.path)
        holder = {"pid": os.getpid(), "results": str(self.results_dir), "started_at": utc_now()}
        self.fd = lockfile.take(dir_fd, self.path.name, str(self.path), holder, _refused)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def _refused(holder: dict) -> ConcurrentRunError:
    return ConcurrentRunError(
        f"another perflab run is using this machine: pid {holder.get('pid', '?')}, results "
        f"{holder.get('results', '?')}, since {holder.get('started_at', '?')}",
        "benchmarks running side by side measure each other; wait for it to end, "
        "or pass --allow-concurrent if you accept that",
    )
