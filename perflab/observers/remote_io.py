"""`[observe] host_speed` and `[observe] io` of a server on a server host (`[experiment] server_host`,
docs/hosts.md): each runs where the server runs.

host_speed: the canary (host_speed.c) is built here, statically (libc.a: any host's C library runs it;
without libc.a here, as for a local server), copied into the host's run
directory once per run (SFTP, as [observe] alloc's counter: alloc/remote.py) and run there through
the run directory's wrapper over the cell's workload, one thread pinned to each CPU the server may run
on there, its lines stamped with the host's wall clock (`-r`) into a file in the cell's directory
there. That file is fetched at the end and parsed as a local canary's; the window's bounds are put on
the host's clock with the window's clock readings (hosts/clock.WindowClock), so the figure is the
host's vCPUs' over the same window. Once per run the copy is run without arguments: a host that
cannot run it (a dynamic build and an older C library) fails each cell with the loader's words
(HostSpeedError).

io: the server's own counters (Kind.io_counters: SHOW GLOBAL STATUS, pg_stat_*) read once a second
by the host's client over the SSH link (the server's `sql`), and its fsync and fdatasync calls counted
by `perf record` of their tracepoints on the host (FsyncRecorder on the host's place: its control
FIFOs driven there), listed there by `perf script` for the server's process tree and put on this
machine's clock (the host's monotonic clock, on its wall clock by perf's reference time, then aligned). With `[experiment] storage` on
a disk there, the disk.* counters are its block device's line of the host's /proc/diskstats, read
over the link with the server's counters once a second (their times this machine's, as the server's
counters'); on the host's tmpfs there is no block device, as for a local server on tmpfs.

A window (run/window.py) takes them from its server's end: on the server host (of_cell), or, for a
server here with its client on a client host, the local canary and I/O observer (here()), over the
same window, with the same fields (HostObservers.fields).

    extra = of_cell(observe, place, kind, server, clock)   # started before the workload, as Profilers
    with extra: run_window()
    measured.update(extra.fields(spans))
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Self

from perflab.errors import PerflabError
from perflab.hosts.clock import WindowClock
from perflab.hosts.place import HostPlace
from perflab.hosts.rundir import RunDir
from perflab.observers.host_speed import HostSpeed, HostSpeedError
from perflab.observers.io import FsyncRecorder, IoObserver
from perflab.observers.phases import Spans
from perflab.spec.observe import ObserveSection

_checked: dict[tuple[str, str], str | None] = {}  # (host run directory, canary) -> None: runs there; else why not


def cpu_list(text: str) -> list[int]:
    """The CPUs of a kernel CPU list ("0-3,6", /proc/PID/status' Cpus_allowed_list)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        low, _, high = part.strip().partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            cpus.update(range(int(low), int(high or low) + 1))
    return sorted(cpus)


def server_cpus(rundir: RunDir, pid: int) -> list[int]:
    """The CPUs the server may run on, on its host (its affinity there)."""
    status = rundir.link.run(["cat", f"/proc/{pid}/status"], timeout=60).stdout
    line = next((ln for ln in status.splitlines() if ln.startswith("Cpus_allowed_list:")), "")
    return cpu_list(line.partition(":")[2])


def runs_there(rundir: RunDir, binary: Path) -> str:
    """The canary's copy in the host's run directory (made and tried once per run); HostSpeedError
    when it cannot run there (its C library older than this machine's: the loader says which)."""
    there = f"{rundir.path}/{binary.name}"
    key = (rundir.path, binary.name)
    if key not in _checked:
        rundir.link.put(binary, there)
        done = rundir.link.run(["chmod", "+x", there])  # SFTP keeps the mode; said, not assumed
        done = rundir.link.run([there], timeout=60) if done.status == 0 else done
        said = (done.stdout + done.stderr).strip()
        _checked[key] = None if done.status == 2 and "usage:" in said else f"(exit {done.status}) {said[-400:]}"
    why = _checked[key]
    if why is not None:
        glibc = rundir.link.run(["getconf", "GNU_LIBC_VERSION"]).stdout.strip() or "an unknown C library"
        raise HostSpeedError(
            f"host {rundir.link.name}: the host-speed canary built here does not run there {why}",
            f"the host has {glibc}: install libc6-dev here (its libc.a makes the canary static), "
            "or set host_speed = false under [observe] (`perflab docs hosts`)",
        )
    return there


class RemoteHostSpeed(HostSpeed):
    """HostSpeed on the server's host: the canary there through the run directory's wrapper (Tracked:
    poll and kill as a local Child), its samples on the host's wall clock in `remote_log`, fetched
    into `log` for `fields`, whose window is put on the host's clock first."""

    def __init__(
        self, rundir: RunDir, remote_log: str, cache: Path, log: Path, cpus: list[int], clock: WindowClock
    ) -> None:
        super().__init__(cache, log, cpus=cpus, static=True)  # any host's C library runs it
        self.rundir, self.remote_log, self.clock = rundir, remote_log, clock
        self.there = runs_there(rundir, self.binary)

    def __enter__(self) -> Self:
        argv = [self.there, "-r", str(self.period_ms), *map(str, self.cpus)]
        self._child = HostPlace(self.rundir.link.name, self.rundir).spawn(argv, self.remote_log)  # type: ignore[assignment]
        return self

    def fields(self, start: float, end: float) -> dict[str, Any]:
        """HostSpeed.fields over [start, end] (this machine's CLOCK_MONOTONIC) on the host's clock."""
        try:
            self.rundir.link.get(self.remote_log, self.log)
        except (OSError, PerflabError) as exc:
            raise HostSpeedError(
                f"host {self.rundir.link.name}: the canary's samples could not be fetched: {exc}",
                f"its file there: {self.remote_log}",
            ) from exc
        aligned = self.clock.require()
        return super().fields(host_time(aligned, start), host_time(aligned, end))


def host_time(aligned: Any, monotonic: float) -> float:
    """This machine's time.monotonic() as the host's wall clock (hosts/clock.Alignment.monotonic's inverse)."""
    return monotonic - aligned.shift_s + aligned.wall_minus_monotonic


def diskstats_on(link: Any) -> str:
    """The host's /proc/diskstats, read over its link (IoSampler's `diskstats`, once a second)."""
    done = link.run(["cat", "/proc/diskstats"], timeout=30)
    if done.status != 0:
        raise PerflabError(f"host {link.name}: cannot read /proc/diskstats: {done.stderr.strip()[-300:]}")
    return done.stdout


class HostObservers:
    """[observe] host_speed and io of a cell, over its workload, where its server runs: on its host, or
    here (a server here with its client on a host: here()). `clock`: the window's reading of the server
    host's clock (the server's RSS sampler's), else one of its own (`own`), read when these start and
    stop; None for a server here. `armed`: what runs over the whole workload before them ([observe]
    alloc's perf of a server here)."""

    def __init__(
        self,
        canary: HostSpeed | None,
        io: IoObserver | None,
        clock: WindowClock | None,
        own: bool,
        armed: contextlib.AbstractContextManager[Any] | None = None,
    ) -> None:
        self.canary, self.io, self.clock, self.own, self.armed = canary, io, clock, own, armed
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Self:
        with contextlib.ExitStack() as stack:
            if self.armed is not None:
                stack.enter_context(self.armed)
            if self.own and self.clock is not None and (self.canary or self.io):
                self.clock.begin()
                stack.callback(self.clock.finish)
            for observer in (self.canary, self.io):
                if observer is not None:
                    stack.enter_context(observer)
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def fields(self, spans: Spans) -> dict:
        """{"host_speed": ..., "io": ...} as Profilers.fields gives them, over the cell's `spans`."""
        out: dict[str, Any] = {}
        if self.canary is not None:
            out["host_speed"] = self.canary.fields(spans.window, spans.end)
        if self.io is not None:  # popped by run/remote_server.py: resources.io and the series
            out["io"] = self.io.fields(spans.workload, spans.window, spans.end, spans.window_transactions)
        return out


def of_cell(observe: ObserveSection, place: Any, kind: Any, server: Any, clock: WindowClock | None) -> HostObservers:
    """The cell's observers on its server host (`place`: run/remote_server.ServerHost), as [observe]
    asks; `kind`: the server's (its I/O counters)."""
    own = clock is None
    clock = clock if clock is not None else WindowClock(place.link)
    remote_dir = f"{place.rundir.path}/{server.rundir.name}"  # the cell's directory there
    canary = io = None
    if observe.host_speed:
        cpus = server_cpus(place.rundir, server.pid)
        cache = server.rundir.parent / "canary-build"  # once per run, as a local cell's
        log = server.rundir / "host-speed.txt"
        canary = RemoteHostSpeed(place.rundir, f"{remote_dir}/host-speed.txt", cache, log, cpus, clock)
    if observe.io:
        fsyncs = FsyncRecorder(server.pid, remote_dir, place=place.place, clock=clock)
        disk = place.storage.dev if place.storage is not None and place.storage.block_device else None
        io = IoObserver(
            disk,
            lambda: kind.io_counters(server),
            server.pid,
            server.rundir,
            recorder=fsyncs,
            diskstats=lambda: diskstats_on(place.link),
        )
    return HostObservers(canary, io, clock, own)


def here(
    observe: ObserveSection, io: IoObserver | None, server: Any, armed: contextlib.AbstractContextManager[Any] | None = None
) -> HostObservers:
    """The cell's canary and I/O observer (`io`) of a server on this machine, as a local cell's
    (Profilers): with the client on a client host (run/window.py). `armed`: HostObservers'."""
    canary = None
    if observe.host_speed:  # built once per run, beside the cells' directories
        canary = HostSpeed(server.rundir.parent / "canary-build", server.rundir / "host-speed.txt")
    return HostObservers(canary, io, None, own=False, armed=armed)
