"""perf and the stack sampler of the workload's client where it runs (`[observe] perf`, `pmp` with
`targets` naming "client" and `[experiment] client_host`, docs/hosts.md): sysbench's own process on
its host, profiled there as a server on a server host is (observers/remote_profilers.py):
`perf record -a` (cpu-clock) with its events off, enabled through its control FIFOs there, then
`perf script --pid` of sysbench's pid run there, where the host's binaries name the frames; and an
`eu-stack -m -p PID` loop there, each sample stamped with the host's clock. The client host's clock
is read before the workload starts and after the window (hosts/clock.WindowClock), and the samples
are put on this machine's clock with those readings, so the phases (window, warm-up, stalls) are cut
as for a local client. The profiles are stored as a local client's, target "client"
(`profiles/cell-NNNN.perf.client.folded`): `perflab profile`, `diff` and `flame` read them alike.

The server's own profilers (here, or on its host) run beside them: `Paired` drives both as one.
A client here beside a server on its host is profiled here (`ClientHereProfilers`, a local cell's
profilers of the client alone), the server there: `beside_server_host`.

    profilers = Paired(server_profilers, on_host(observe, rundir, cell, server))   # run/window.py
    with profilers: ...; profilers.workload_started(child); ...   # child: hosts/child.RemoteChild
    profilers.store(results, cell_id, spans); profilers.remove()
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any, Self

from perflab.hosts.rundir import RunDir
from perflab.observers.phases import Spans
from perflab.observers.profilers import Profilers
from perflab.observers.remote_profilers import NoProfilers, RemoteProfilers
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


class ClientHostProfilers(RemoteProfilers):
    """RemoteProfilers of target "client": the workload's client on its host, its pid known once it
    has started; the host's clock read by these profilers themselves."""

    target = CLIENT

    def __init__(self, observe: ObserveSection, workdir: Path, rundir: RunDir, remote_dir: str) -> None:
        super().__init__(of_target(observe, CLIENT), None, workdir, rundir, remote_dir, None)

    def workload_started(self, client_pid: int | None = None) -> None:
        """The client runs (its threads started, its libraries mapped): its pid on the host."""
        if client_pid is not None:
            self._target_is(client_pid)
        self._begin(warmup=True)

    def client_started(self, child: Any) -> None:
        """`child`: hosts/child.RemoteChild, sysbench there."""
        self.workload_started(child.client_pid() if child is not None else None)


class ClientHereProfilers(Profilers):
    """Profilers of target "client" alone: the workload's client on this machine, beside a server on
    its host (run/window.py), as a local cell's client is profiled (system-wide perf here,
    folded for the client's pid; its stack sampler here), on this machine's clock. The server's
    profilers run on its host (remote_profilers.RemoteProfilers); host_speed and io are theirs too."""

    def __init__(self, observe: ObserveSection, workdir: Path) -> None:
        super().__init__(of_target(observe, CLIENT).model_copy(update={"host_speed": False}), None, workdir)

    def client_started(self, child: Any) -> None:
        """`child`: the client's process here (run/client.start's)."""
        self.workload_started(child)


class Paired:
    """The server's profilers (here or on its host; NoProfilers without a server target) and the
    client's on its host, driven and stored as one."""

    def __init__(
        self, server: Profilers | NoProfilers, client: ClientHostProfilers | ClientHereProfilers | None
    ) -> None:
        self.server, self.client = server, client
        self._stack = ExitStack()

    @property
    def members(self) -> list[Any]:
        return [p for p in (self.server, self.client) if p is not None and not isinstance(p, NoProfilers)]

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

    def workload_started(self, child: Any = None) -> None:
        """The server's warm-up samplers; the client's, of `child` (hosts/child.RemoteChild on its
        host, or the client's process here)."""
        self.server.workload_started()
        if self.client is not None:
            self.client.client_started(child)

    def window_started(self) -> None:
        for member in self.members:
            member.window_started()

    def store(self, results: Any, cell_id: int, spans: Spans) -> list[dict[str, Any]]:
        return [row for member in self.members for row in member.store(results, cell_id, spans)]

    def remove(self) -> None:
        for member in self.members:
            if hasattr(member, "remove"):
                member.remove()


def names_client(observe: ObserveSection) -> bool:
    """Whether [observe] perf or pmp names the client among its targets."""
    return any(e is not None and CLIENT in e.targets for e in (observe.perf, observe.pmp))


def on_host(observe: ObserveSection, rundir: RunDir, cell: Any, server: Any) -> ClientHostProfilers | None:
    """The client's profilers on its host (`rundir`: the host's run directory), in its
    `client-profile-NNNN/` there (`server.rundir`: the cell's local directory); None unless named."""
    if not names_client(observe):
        return None
    return ClientHostProfilers(observe, server.rundir, rundir, f"{rundir.path}/client-profile-{cell.order:04d}")
