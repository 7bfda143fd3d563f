"""perflab's own CPU on a remote host over a cell's window (issue 36, docs/hosts.md): the SSH session
that carries perflab's commands and every process perflab started there, less the server and the
client it runs there (the measured processes).

Read from the host's /proc at two moments inside the window, one command each: every process's
stat line (hosts/own_cpu.py, which also gives the run's whole figure). The session is the sshd process that forked the reading's shell (found walking up from
its parent to the first `sshd`). Counted: that sshd's own CPU (the encryption of what streams back,
the channels) and, for each of its descendants, its own CPU and its reaped children's (cutime,
cstime: each `eu-stack` and `sleep` of perflab's loops). Left out: the measured processes' groups,
and the `setsid --wait` wrapper above each (it reaps the measured process: its children's time is
the measured process's) with the bash above that (it reaps the wrapper), and the sshd's own reaped children (the wrapper of a client that exited).

    overhead = HostOverhead(link, groups=[server.pid]); overhead.begin(); run(); overhead.finish()
    -> {"cpu_s": 0.021, "cores": 0.0105}
"""

from __future__ import annotations

import time
from typing import Any

from perflab.errors import HostLostError
from perflab.hosts import own_cpu
from perflab.hosts.own_cpu import Proc, Snapshot, read_snapshot, session_of
from perflab.hosts.transport import Connection


def wrappers(snap: Snapshot, groups: set[int]) -> set[int]:
    """The processes between the measured groups' leaders and the session: the `setsid --wait` that
    reaps each, and the bash above it that writes its CPU once it has ended (hosts/rundir.py)."""
    out = set()
    for group in groups:
        pid = snap.procs[group].ppid if group in snap.procs else None
        while pid in snap.procs and not snap.procs[pid].comm.startswith("sshd"):
            out.add(pid)
            pid = snap.procs[pid].ppid
    return out


def perflab_ticks(snap: Snapshot, groups: set[int], skip: set[int]) -> dict[tuple[int, str], int]:
    """Ticks per counted process ((pid, comm): a recycled pid is another process): the session's
    own, its descendants' own and reaped ones; the measured groups (and their descendants) and the
    `skip` processes left out."""
    session = session_of(snap)
    if session is None:
        return {}
    children: dict[int, list[Proc]] = {}
    for proc in snap.procs.values():
        children.setdefault(proc.ppid, []).append(proc)
    counted, todo = {(session, snap.procs[session].comm): snap.procs[session].own}, [session]
    while todo:
        for proc in children.get(todo.pop(), []):
            if proc.pgid in groups or proc.pid in groups or proc.pid in skip:
                continue
            counted[(proc.pid, proc.comm)] = proc.own + proc.reaped
            todo.append(proc.pid)
    return counted


def window_ticks(start: dict[tuple[int, str], int], end: dict[tuple[int, str], int]) -> int:
    """Ticks used between two readings: each process's growth, or all of a process new since the
    first (one gone by the second shows in its parent's reaped ticks, when that parent is counted)."""
    return sum(ticks - start.get(key, 0) for key, ticks in end.items())


class HostOverhead:
    """perflab's CPU on one host between begin() and finish(), the measured `groups` left out."""

    def __init__(self, link: Connection, groups: list[int]) -> None:
        self.link, self.groups = link, set(groups)
        self._skip: set[int] = set()
        self._start: tuple[float, dict[tuple[int, str], int]] | None = None

    def _read(self) -> Snapshot:
        return read_snapshot(self.link)

    def begin(self) -> None:
        snap = self._read()
        self._skip = wrappers(snap, self.groups)
        self._start = (time.monotonic(), perflab_ticks(snap, self.groups, self._skip))

    def finish(self) -> dict[str, float | None] | None:
        """{"cpu_s", "cores"} over the span; None when begin() did not read."""
        if self._start is None:
            return None
        snap = self._read()
        ticks = window_ticks(self._start[1], perflab_ticks(snap, self.groups, self._skip))
        seconds = time.monotonic() - self._start[0]
        cpu = ticks / snap.tick
        return {"cpu_s": round(cpu, 3), "cores": round(cpu / seconds, 4) if seconds > 0 else None}


class Overheads:
    """perflab's CPU on each remote host of a cell (the server host, the client host), measured together.

    overheads = Overheads.of_cell((server_link, server.pid), (client_link, client_pid)).begin(); ...; overheads.finish()
    -> {"db": {"cpu_s": 0.02, "cores": 0.01}, "load": {...}}   # the row's resources.perflab_host_cpu
    """

    def __init__(self, hosts: dict[str, HostOverhead]) -> None:
        self.hosts = hosts

    @classmethod
    def of_cell(cls, *measured: tuple[Connection | None, int | None]) -> Overheads:
        """`measured`: (a host's link, the pid there whose CPU is not perflab's) of the server and the
        client; a link None (here) or a pid None (not known) is left out."""
        groups: dict[str, tuple[Connection, list[int]]] = {}
        for link, pid in measured:
            if link is not None and pid is not None:
                groups.setdefault(link.name, (link, []))[1].append(pid)
        return cls({name: HostOverhead(link, pids) for name, (link, pids) in groups.items()})

    def begin(self) -> Overheads:
        for host in self.hosts.values():
            host.begin()
        return self

    def finish(self) -> dict[str, dict[str, float | None] | None]:
        return {name: host.finish() for name, host in self.hosts.items()}


class CellCpu:
    """perflab's own CPU on each remote host of a cell over the whole cell, from before its restore to
    after its server's stop (hosts/own_cpu.py: the session less the measured processes): the window's
    figure (Overheads) plus what perflab did there outside it (the restore, the start, prewarm, the logs).

    own = CellCpu.begin([(link, rundir_path), ...]); ...; row["resources"]["perflab_host_cpu_cell"] = own.finish()
    -> {"db": {"cpu_s": 0.35, "measured_cpu_s": 9.1, "session_cpu_s": 9.45, "wall_s": 6.2, "cores": 0.056}}
    """

    def __init__(self, starts: dict[str, tuple[Connection, str, own_cpu.Mark | None]]) -> None:
        self.starts = starts

    @classmethod
    def begin(cls, hosts: list[tuple[Connection, str]]) -> CellCpu:
        """`hosts`: the cell's remote hosts, each (its link, the run's directory there); one reading a host."""
        places: dict[str, tuple[Connection, str]] = {}
        for link, path in hosts:
            places.setdefault(link.name, (link, path))
        return cls({name: (link, path, _mark(link, path)) for name, (link, path) in places.items()})

    def record(self, row: dict[str, Any]) -> None:
        """The cell's `resources.perflab_host_cpu_cell` (a row that has resources: it was measured)."""
        if self.starts and "resources" in row:
            row["resources"]["perflab_host_cpu_cell"] = self.finish()

    def finish(self) -> dict[str, dict[str, float | None] | None] | None:
        """Per host, the figures over the cell (None where a reading failed); None without a remote host."""
        if not self.starts:
            return None
        out = {}
        for name, (link, path, start) in self.starts.items():
            end = _mark(link, path)
            out[name] = start.until(end) if start is not None and end is not None else None
        return out


def _mark(link: Connection, path: str) -> own_cpu.Mark | None:
    """A reading, or None when the host has dropped off (the cell fails with that cause anyway)."""
    try:
        return own_cpu.mark(link, path)
    except HostLostError:
        return None
