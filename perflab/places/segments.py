"""The System V shared memory segments a dead run's processes left (a SIGKILLed postmaster keeps
one: servers/postgresql/server.py), found from the kernel's own table, /proc/sysvipc/shm, never
from a file a server could write (postmaster.pid).

A segment is the run's only when its creator pid is one of the run's logged processes, it was
made after that process started, the pid is not another process's now, and its creator and owner
are accounts the run used: this perflab's, or an account it gave part of its work directory to
(chown: PostgreSQL's `postgres`). It is removed once nobody is attached to it.

    release({4711: 123456}, accounts={0, 104})   # the shmids removed: [32769]
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

from perflab.places.proc import start_ticks

SYSVIPC_SHM = Path("/proc/sysvipc/shm")
IPC_RMID = 0


def table(path: Path = SYSVIPC_SHM) -> list[dict[str, int]]:
    """Every segment as the kernel lists it: shmid, cpid, nattch, uid, cuid, ctime, ..."""
    try:
        header, *rows = path.read_text(encoding="ascii").splitlines()
    except (OSError, ValueError):
        return []
    names = header.split()
    return [dict(zip(names, map(int, row.split()), strict=False)) for row in rows if row.strip()]


def _boot_epoch() -> float:
    with open("/proc/stat", encoding="ascii") as f:
        return float(next(line.split()[1] for line in f if line.startswith("btime ")))


def theirs(rows: list[dict[str, int]], logged: dict[int, int], accounts: set[int]) -> list[int]:
    """The shmids of `rows` a dead run's processes (`logged`: pid -> start ticks) made."""
    started = {pid: _boot_epoch() + ticks / os.sysconf("SC_CLK_TCK") for pid, ticks in logged.items()}
    found = []
    for row in rows:
        pid = row.get("cpid", -1)
        if pid not in logged or row.get("cuid") not in accounts or row.get("uid") not in accounts:
            continue
        if row.get("ctime", 0) < started[pid] - 1:  # made before that process: another's
            continue
        if start_ticks(pid) not in (None, logged[pid]):  # the pid lives again: another process's now
            continue
        found.append(row["shmid"])
    return found


def release(logged: dict[int, int], accounts: set[int], wait_s: float = 3.0) -> list[int]:
    """Remove the run's segments once nobody is attached (its backends exit a moment after their
    postmaster died), waiting up to `wait_s`; the shmids removed."""
    shmids = theirs(table(), logged, accounts)
    removed: list[int] = []
    deadline = time.monotonic() + wait_s
    while shmids:
        attached = {r["shmid"]: r.get("nattch", 0) for r in table()}
        for shmid in [s for s in shmids if attached.get(s, 0) == 0]:
            shmids.remove(shmid)
            if shmid in attached and ctypes.CDLL(None).shmctl(shmid, IPC_RMID, None) == 0:
                removed.append(shmid)
        if not shmids or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return removed
