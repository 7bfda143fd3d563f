"""The profilers of a cell whose server and client are profiled apart: each where it runs.

A server here and its client here share one Profilers (one system-wide perf). Otherwise each side
has its own: the server's here or on its host, the client's here or on its client host, each a
Profilers of that target alone at its site (perf and pmp there: `on_host`), driven and stored as
one (`Paired`). The profiles are stored as a local cell's (`profiles/cell-NNNN.perf.client.folded`):
`perflab profile`, `diff` and `flame` read them alike.

    profilers = Paired(server_profilers, on_host(observe, "client", None, cell_dir, rundir, there, None))
    with profilers: ...; profilers.workload_started(client_pid); ...   # run/window.py
    profilers.store(results, cell_id, spans); profilers.remove()
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any, Self

from perflab.hosts.clock import WindowClock
from perflab.hosts.place import HostPlace
from perflab.hosts.rundir import RunDir
from perflab.observers.host_binaries import HostStarts
from perflab.observers.phases import Spans
from perflab.observers.profilers import Profilers
from perflab.places import Site
from perflab.spec.observe import ObserveSection

CLIENT = "client"


def of_target(observe: ObserveSection, target: str) -> ObserveSection:
    """[observe] with perf and pmp kept only where they name `target`, their targets that one alone."""
    update: dict[str, Any] = {}
    for name in ("perf", "pmp"):
        entry = getattr(observe, name)
        keep = entry is not None and target in entry.targets
        update[name] = entry.model_copy(update={"targets": [target]}) if keep else None
    return observe.model_copy(update=update)


def alone(
    observe: ObserveSection,
    target: str,
    pid: int | None,
    workdir: Path,
    tree: bool = False,
    site: Site | None = None,
    own_clock: bool = False,
) -> Profilers | None:
    """The profilers of `target` alone, here or at `site` (None unless [observe] names it):
    host_speed is the server's end's."""
    mine = of_target(observe, target).model_copy(update={"host_speed": False})
    if mine.perf is None and mine.pmp is None:
        return None
    return Profilers(mine, pid, workdir, tree=tree, site=site, own_clock=own_clock)


def on_host(
    observe: ObserveSection,
    target: str,
    pid: int | None,
    workdir: Path,
    rundir: RunDir,
    there: str,
    clock: WindowClock | None,
    tree: bool = False,
) -> Profilers | None:
    """The profilers of `target` on its host (`rundir`: the run's directory there), their recordings
    in `there` (removed once stored), their frames named from the host's binaries (HostStarts: the
    same files here, else copies fetched once per run beside `workdir`, the cell's directory here).
    `clock`: the host's clock read over the window (the server's RSS sampler's), else one of their
    own, read when the workload starts and when they stop. None unless [observe] names `target`."""
    site = host_site(rundir, there, clock or WindowClock(rundir.link), workdir.parent)
    return alone(observe, target, pid, workdir, tree, site, own_clock=clock is None)


def host_site(rundir: RunDir, there: str, clock: WindowClock, workdir: Path) -> Site:
    """Recordings on a host, in `there` (removed once stored): its clock read over the window, the
    frames of its binaries named from them (HostStarts: the same files here, else copies fetched
    once per run into `workdir`/host-binaries), a binary there (`HOST:PATH`) as a file here."""
    starts = HostStarts(rundir.link, workdir / "host-binaries")
    place = HostPlace(rundir.link.name, rundir)
    local = lambda binary: starts.local(binary.partition(":")[2])  # noqa: E731
    return Site(place, Path(there), clock, starts, local, loop=True, own_dir=True)


class Paired:
    """The server's profilers and the client's, each where it runs (either None: not profiled),
    driven and stored as one."""

    def __init__(self, server: Profilers | None, client: Profilers | None) -> None:
        self.server, self.client = server, client
        self._stack = ExitStack()

    @property
    def members(self) -> list[Profilers]:
        return [p for p in (self.server, self.client) if p is not None]

    def __enter__(self) -> Self:
        with ExitStack() as stack:
            for member in self.members:
                stack.enter_context(member)
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def workload_starting(self) -> None:
        for member in self.members:
            member.workload_starting()

    def workload_started(self, client: Any = None) -> None:
        """The server's warm-up samplers; the client's, of `client` (its process here, or its pid there)."""
        if self.server is not None:
            self.server.workload_started()
        if self.client is not None:
            self.client.workload_started(client)

    def window_started(self) -> None:
        for member in self.members:
            member.window_started()

    def store(self, results: Any, cell_id: int, spans: Spans) -> list[dict[str, Any]]:
        return [row for member in self.members for row in member.store(results, cell_id, spans)]

    def remove(self) -> None:
        for member in self.members:
            member.remove()
