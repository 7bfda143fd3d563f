"""One perflab run per machine: two benchmarks on one machine measure each other.

`MachineLock` takes an exclusive flock on /dev/shm/perflab.lock for the whole run and
writes who holds it (pid, results directory, start time) into the file, so a second run
can say whom it waits for. The kernel drops the lock when the holder dies, even by
SIGKILL, so a stale file never blocks anyone.

    with MachineLock(results_dir): run()
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from perflab.errors import ConcurrentRunError
from perflab.units import utc_now

LOCK_PATH = Path("/dev/shm/perflab.lock")


class MachineLock:
    def __init__(self, results_dir: Path, path: Path = LOCK_PATH) -> None:
        self.results_dir = results_dir
        self.path = path if path.parent.is_dir() else Path("/tmp") / path.name
        self.fd: int | None = None

    def __enter__(self) -> MachineLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            raise ConcurrentRunError(
                f"another perflab run is using this machine: pid {holder.get('pid', '?')}, results "
                f"{holder.get('results', '?')}, since {holder.get('started_at', '?')}",
                "benchmarks running side by side measure each other; wait for it to end, "
                "or pass --allow-concurrent if you accept that",
            ) from None
        os.ftruncate(fd, 0)
        holder = {"pid": os.getpid(), "results": str(self.results_dir), "started_at": utc_now()}
        os.write(fd, json.dumps(holder).encode())
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def _read(fd: int) -> dict:
    try:
        return json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
