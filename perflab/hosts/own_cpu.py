"""perflab's own CPU on a remote host over the whole run (issue 36, docs/hosts.md "perflab's own CPU on
each host"): the SSH session that carries its commands, less the measured processes (the servers and
clients it ran there), from the host's opening to the run's end. A cell's window has its own figure
(observers/host_overhead.py, which reads the same snapshots).

Everything perflab runs on a host descends from the sshd process of its connection, which reaps each
command and process as it ends: that sshd's own CPU (the channels, the encryption) plus its reaped
children's (stat's cutime, cstime) is the session's CPU, measured processes included. Each measured
process is started under a bash outside its session (hosts/rundir.py, `measured=True`), which writes
its CPU (bash's `times`: setsid and the measured tree, each reaped by the one above) into the run
directory's `measured-*` files once it has ended, killed or not. perflab's own is the difference.

    run = RunCpu(link, rundir.path)           # as the host is opened
    run.finish()                              # at the run's end, every server stopped
    -> {"cpu_s": 0.41, "measured_cpu_s": 61.2, "session_cpu_s": 61.61, "wall_s": 95.3, "cores": 0.0043}
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from perflab.hosts.transport import Connection

# the reading shell's parent, the clock tick, then every process's stat line
SNAPSHOT = "echo $PPID; getconf CLK_TCK; cat /proc/[0-9]*/stat 2>/dev/null"
# $0: the run directory. The children's line of each measured process's `times` (rundir.py's _MEASURED)
_MEASURED = 'for f in "$0"/measured-*; do [ -f "$f" ] && sed -n 2p "$f"; done; true'
MARK_TIMEOUT_S = 15
_TIMES = re.compile(r"(\d+)m([\d.]+)s\s+(\d+)m([\d.]+)s")


@dataclass(frozen=True)
class Proc:
    pid: int
    comm: str
    ppid: int
    pgid: int
    own: int  # utime + stime, clock ticks
    reaped: int  # cutime + cstime: its children that exited and were waited for


@dataclass(frozen=True)
class Snapshot:
    parent: int  # the reading shell's parent
    tick: int
    procs: dict[int, Proc]


def parse_snapshot(text: str) -> Snapshot:
    """SNAPSHOT's output: the shell's parent pid, CLK_TCK, then /proc/PID/stat lines."""
    lines = text.splitlines()
    procs = {}
    for line in lines[2:]:
        head, _, rest = line.rpartition(")")
        pid, _, comm = head.partition(" (")
        f = rest.split()
        if len(f) > 14 and pid.strip().isdigit():
            own, reaped = int(f[11]) + int(f[12]), int(f[13]) + int(f[14])
            procs[int(pid)] = Proc(int(pid), comm, int(f[1]), int(f[2]), own, reaped)
    return Snapshot(int(lines[0]), int(lines[1]), procs)


def read_snapshot(link: Connection) -> Snapshot:
    return parse_snapshot(link.run(["sh", "-c", SNAPSHOT], timeout=60).stdout)


def session_of(snap: Snapshot) -> int | None:
    """The sshd process above the reading's shell."""
    pid = snap.parent
    while pid in snap.procs and not snap.procs[pid].comm.startswith("sshd"):
        pid = snap.procs[pid].ppid
    return pid if pid in snap.procs else None


def session_ticks(snap: Snapshot) -> int | None:
    """The session's CPU so far: its sshd's own and what it reaped (every command and process ended)."""
    session = session_of(snap)
    return snap.procs[session].own + snap.procs[session].reaped if session is not None else None


def measured_s(text: str) -> float:
    """The measured processes' CPU: the sum of _MEASURED's lines ("0m1.234s 0m0.567s": user, system)."""
    return sum(int(um) * 60 + float(us) + int(sm) * 60 + float(ss) for um, us, sm, ss in _TIMES.findall(text))


def figures(session_s: float, measured: float, wall_s: float) -> dict[str, float | None]:
    """meta `hosts.NAME.perflab_cpu`: the session's CPU less the measured processes', over the wall time."""
    own = max(session_s - measured, 0.0)  # a measured process's times are to 1 ms, the session's to a tick
    return {
        "cpu_s": round(own, 3),
        "measured_cpu_s": round(measured, 3),
        "session_cpu_s": round(session_s, 3),
        "wall_s": round(wall_s, 3),
        "cores": round(own / wall_s, 5) if wall_s > 0 else None,
    }


@dataclass(frozen=True)
class Mark:
    """One reading of a host: the session's CPU so far and the measured processes' that have ended."""

    at: float  # this machine's time.monotonic()
    ticks: int | None  # the session's (None: no sshd found above the reading)
    tick: int  # CLK_TCK there
    measured_s: float

    def until(self, end: Mark) -> dict[str, float | None] | None:
        """figures() from this reading to `end`; None without the session at either."""
        if self.ticks is None or end.ticks is None:
            return None
        return figures((end.ticks - self.ticks) / end.tick, end.measured_s - self.measured_s, end.at - self.at)


def mark(link: Connection, rundir: str) -> Mark:
    """A reading of the host (one command: its processes' stat lines, then the measured files of `rundir`)."""
    at = time.monotonic()
    # a short deadline: a host that stopped answering costs each cell this much before it fails
    text = link.run(["sh", "-c", f"{SNAPSHOT}; echo --; {_MEASURED}", rundir], timeout=MARK_TIMEOUT_S).stdout
    procs, _, measured = text.partition("\n--\n")
    head = procs.splitlines()[:2]
    if len(head) < 2 or not all(line.isdigit() for line in head):  # no answer: no session figure
        return Mark(at, None, 1, measured_s(measured))
    snap = parse_snapshot(procs)
    return Mark(at, session_ticks(snap), snap.tick, measured_s(measured))


class RunCpu:
    """perflab's CPU on one host from begin() (its run directory made) to finish() (the run's end)."""

    def __init__(self, link: Connection, rundir: str) -> None:
        self.link, self.rundir = link, rundir
        self.start = mark(link, rundir)
        self.result: dict[str, Any] | None = None

    def finish(self) -> dict[str, Any] | None:
        """The figures (kept in `result`); None when the session could not be found at either end."""
        self.result = self.start.until(mark(self.link, self.rundir))
        return self.result
