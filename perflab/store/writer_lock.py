"""One writer per results directory: `perflab run -o DIR`, `run --resume DIR` and `calibrate -o DIR`
hold an exclusive flock on DIR/writer.lock for the whole run, so that two runs never store cells
into one results.db (a second one, even with --allow-concurrent, is refused at once with the
first one's pid and start). Readers (report, export, history) take no lock and are never held up.

The file is opened as every lock file of perflab's is (perflab/lockfile.py: no symlink followed,
ours, a regular file), and is left in place when the run ends: unlinking a lock file lets a third
process lock a new file while a second still holds the old one. An empty or stale one means
nothing: the kernel drops the flock when its holder ends, even by SIGKILL.

    with WriterLock(Path("results/quick")): ...   # {"pid": 4711, "started_at": "2026-11-29T01:10:00Z"}
"""

from __future__ import annotations

import os
from pathlib import Path

from perflab import lockfile
from perflab.errors import ConcurrentRunError
from perflab.units import utc_now

NAME = "writer.lock"


class WriterLock:
    """The exclusive writer's lock of a results directory (made, with its parents, when missing)."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.fd: int | None = None

    def _refused(self, holder: dict) -> ConcurrentRunError:
        return ConcurrentRunError(
            f"{self.dir} is being written by another perflab: pid {holder.get('pid', '?')}, "
            f"since {holder.get('started_at', '?')}",
            "one run writes a results directory at a time: wait for it to end (perflab report "
            f"{self.dir} reads it meanwhile), or write to another -o",
        )

    def __enter__(self) -> WriterLock:
        self.dir.mkdir(parents=True, exist_ok=True)
        dir_fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the user's own choice of path
        self.fd = lockfile.take(dir_fd, NAME, str(self.dir / NAME), {"pid": os.getpid(), "started_at": utc_now()},
                           self._refused)  # fmt: skip
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)
            self.fd = None
