"""`[observe] host_speed` and `[observe] io` of a cell where its server runs: here, or on its server
host (docs/hosts.md, "The canary and I/O on the server host"). The same observers wherever it runs,
at the server's site: the canary (observers/host_speed.py) runs there, on the CPUs the server may use
there, its lines stamped with that place's wall clock and fetched at the end; the server's own I/O
counters (Kind.io_counters) are read once a second, its fsync and fdatasync calls counted by perf
there (observers/io.FsyncRecorder on that place) and, with `[experiment] storage` on a disk there,
the disk.* counters are its block device's line of that place's /proc/diskstats. A host's clock is
read over the window (the server's RSS sampler's, else their own) to put its times on this machine's.

A server here with its client here has these inside its Profilers (one system-wide perf); with its
client on a client host, `here()` gives them beside the server's profilers.

    extra = on_host(observe, server_host, kind, server, clock)   # started before the workload
    with extra: run_window()
    measured.update(extra.fields(spans))
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from perflab.errors import PerflabError
from perflab.hosts.clock import WindowClock
from perflab.observers.host_speed import HostSpeed
from perflab.observers.io import FsyncRecorder, IoObserver
from perflab.observers.phases import Spans
from perflab.places import Place, Site
from perflab.spec.observe import ObserveSection

if TYPE_CHECKING:
    from perflab.servers.managed import Managed


class ServerObservers:
    """[observe] host_speed and io of a cell, over its workload, where its server runs. `clock`: the
    window's reading of the server host's clock (the server's RSS sampler's), else one of its own
    (`own`), read when these start and stop; None for a server here. `armed`: what runs over the
    whole workload before them ([observe] alloc's perf of a server here)."""

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
        if self.io is not None:  # popped by the cell (run/cell.py): resources.io and the series
            out["io"] = self.io.fields(spans.workload, spans.window, spans.end, spans.window_transactions)
        return out


def diskstats(place: Place) -> str:
    """The place's /proc/diskstats (IoSampler's `diskstats`, once a second)."""
    done = place.run(["cat", "/proc/diskstats"], timeout=30)
    if done.status != 0:
        raise PerflabError(f"cannot read /proc/diskstats{place.where}: {done.stderr.strip()[-300:]}")
    return done.stdout


def on_host(
    observe: ObserveSection, host: Any, kind: Any, server: Managed, clock: WindowClock | None
) -> ServerObservers:
    """The cell's observers on its server host (`host`: hosts/server.ServerHost), as [observe]
    asks; `kind`: the server's (its I/O counters)."""
    own = clock is None
    clock = clock if clock is not None else WindowClock(host.link)
    place, there = host.place, f"{host.rundir.path}/{server.rundir.name}"  # the cell's directory there
    canary = io = None
    if observe.host_speed:
        cache, log = server.rundir.parent / "canary-build", server.rundir / "host-speed.txt"  # built once per run
        canary = HostSpeed(cache, log, cpus=place.cpus(server.pid), site=Site(place, Path(there), clock))
    if observe.io:
        disk = host.storage.dev if host.storage is not None and host.storage.block_device else None
        io = IoObserver(
            disk,
            lambda: kind.io_counters(server),
            server.pid,
            server.rundir,
            recorder=FsyncRecorder(server.pid, there, place=place, clock=clock),
            diskstats=lambda: diskstats(place),
        )
    return ServerObservers(canary, io, clock, own)


def here(
    observe: ObserveSection, io: IoObserver | None, server: Managed, armed: contextlib.AbstractContextManager[Any] | None = None
) -> ServerObservers:
    """The cell's canary and I/O observer (`io`) of a server on this machine, as a local cell's
    (Profilers): with the client on a client host (run/window.py). `armed`: ServerObservers'."""
    canary = None
    if observe.host_speed:  # built once per run, beside the cells' directories
        canary = HostSpeed(server.rundir.parent / "canary-build", server.rundir / "host-speed.txt")
    return ServerObservers(canary, io, None, own=False, armed=armed)
