"""On-CPU profiles and allocation counts per seat of an interleaved group (run/interleave.py).

Why it can be done per seat: only the running seat's client works; the others' clients are
stopped, and their servers idle but for background work (purge, flushing), which a sequential
cell's profile holds too. So one `perf record -a` for the whole group, folded per process, gives
each server (and client) its own profile. With the servers on a host, perf records there (`site`);
clients that run elsewhere than their servers (here beside a server host, or on a client host) get a
recording of their own where they run (`clients`), cut over the same turns. The allocation counter
is preloaded into every server and read around the window, so its counts are each server's own,
whatever the turns.

What differs from a sequential cell's profile: the phases are the warm-up and the measured
window (the seconds of a stall are seconds of the client's running time, not of the wall
clock, so they get no profile of their own), and a profile's `seconds` are the seconds the seat's
client ran in that phase, not the wall-clock span: per second figures stay per second of work.

    group = SeatObservers(spec.observe, workdir)       # nothing runs yet
    tracer = runner.stage().tracer(rundir, workdir)    # per seat, before its server starts
    with group.recording(server_pid, client_pid):      # perf -a, not yet sampling
        group.warmup_started()                         # perf samples (warmup = true)
        rotate(warmup)
        group.window_started(seats)                    # perf samples; each seat's alloc window opens
        rotate(window)
        group.window_ended()                           # the alloc windows close
    group.store(results, cell_id, seat_spans, ...)     # per seat, after perf stopped
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perflab.errors import PerflabError
from perflab.observers.alloc.tracer import AllocTracer
from perflab.observers.perf import PerfRecorder
from perflab.observers.phases import MEASURED, WARMUP, Range, Spans
from perflab.observers.alloc.profile import store_alloc
from perflab.observers.profilers import Profilers
from perflab.places import Site
from perflab.places.here import HERE
from perflab.spec.observe import ObserveSection
from perflab.store.results import Results


@dataclass
class SeatSpans(Spans):
    """A seat's phases on the wall clock (what perf's samples are cut by), with the seconds its
    client ran and the transactions it made in each: a seat shares the wall clock with the other
    seats of its group, so a phase's wall-clock span is not its work."""

    own: dict[str, tuple[float, float]] = field(default_factory=dict)  # phase: (seconds run, transactions)

    def ranges(self, phase: str) -> list[Range]:
        return super().ranges(phase) if phase in (MEASURED, WARMUP) else []

    def _seen(self, phase: str, span: Range) -> float:
        """The share of `phase`'s wall-clock span that a recording over `span` saw."""
        whole = sum(b - a for a, b in self.ranges(phase))
        return min(1.0, super().seconds(phase, span) / whole) if whole > 0 else 0.0

    def seconds(self, phase: str, span: Range) -> float:
        return self.own.get(phase, (0.0, 0.0))[0] * self._seen(phase, span)

    def transactions(self, phase: str, span: Range) -> float:
        return self.own.get(phase, (0.0, 0.0))[1] * self._seen(phase, span)


class SeatObservers:
    """[observe] perf and alloc of one interleaved group (module doc)."""

    def __init__(
        self, observe: ObserveSection, workdir: Path, site: Site | None = None, tree: bool = False,
        clients: Site | None = None,
    ) -> None:  # fmt: skip
        self.observe = observe
        self.tree = tree  # a server is its process tree (PostgreSQL's backends: Kind.profiles_tree)
        self.workdir = Path(workdir)
        self.site = site or Site(HERE, self.workdir)  # where the servers run: perf records there
        # where the clients run when it is not there (perf of target "client" records there too)
        perf = observe.perf
        self.clients = clients if perf is not None and "client" in perf.targets else None
        self.perf: PerfRecorder | None = None
        self.client_perf: PerfRecorder | None = None
        self._windows = contextlib.ExitStack()

    def _recorders(self) -> list[tuple[PerfRecorder, Site]]:
        found = [(self.perf, self.site), (self.client_perf, self.clients)]
        return [(r, site) for r, site in found if r is not None and site is not None]

    @contextlib.contextmanager
    def recording(self, pid: int, client: int | None = None) -> Iterator[SeatObservers]:
        """perf record -a for the group, started once every seat's server and client runs (its
        start-up reads every process's maps), sampling from warmup_started() or window_started();
        where the clients run too when that is elsewhere (`client`: one of them, the file's name);
        stopped (and its data written) on leaving."""
        spec = self.observe.perf
        try:
            with contextlib.ExitStack() as stack:
                if spec is not None:
                    self.perf = stack.enter_context(self._recorder(self.site, pid))
                    if self.clients is not None and client is not None:
                        self.client_perf = stack.enter_context(self._recorder(self.clients, client))
                yield self
        finally:
            self._windows.close()

    def _recorder(self, site: Site, pid: int) -> PerfRecorder:
        spec = self.observe.perf
        assert spec is not None
        if site.clock is not None:
            site.clock.begin()  # a host's clock: read again when the window ends
        return PerfRecorder(
            pid, site.dir, frequency=spec.frequency, call_graph=spec.call_graph, enabled=False,
            place=site.place, clock=site.clock, starts=site.starts,
        )  # fmt: skip

    def arm(self, seats: list[tuple[int, Path, AllocTracer | None]]) -> None:
        """Before the warm-up: each seat's allocation counter starts what takes seconds to start
        (server pid, run directory, tracer), so that window_started() opens every window at once."""
        for pid, _, tracer in seats:
            if tracer is not None:
                self._windows.enter_context(tracer.armed(pid))

    def warmup_started(self) -> None:
        if self.observe.perf is not None and self.observe.perf.warmup:
            for recorder, _ in self._recorders():
                recorder.resume()

    def window_started(self, seats: list[tuple[int, Path, AllocTracer | None]]) -> None:
        """The window begins for every seat at once: perf samples (if not yet) and each seat's
        allocation counter opens its window (server pid, run directory, tracer)."""
        for recorder, _ in self._recorders():
            if not recorder.enabled:
                recorder.resume()
        for pid, _, tracer in seats:
            if tracer is not None:
                self._windows.enter_context(tracer.window(pid))

    def window_ended(self) -> None:
        try:
            self._windows.close()
        finally:
            for _, site in self._recorders():
                if site.clock is not None:
                    with contextlib.suppress(PerflabError):  # a host dropped off: its profile cannot be cut
                        site.clock.finish()

    def remove(self) -> None:
        self.site.remove()  # a host's: its perf.data
        if self.clients is not None:
            self.clients.remove()

    def store(
        self,
        results: Results,
        cell_id: int,
        spans: SeatSpans,
        pids: dict[str, int],
        tracer: AllocTracer | None,
    ) -> dict[str, Any]:
        """A seat's profiles (profiles/ and the profiles table) and its row's `alloc`; after the
        recording stopped, while its server still runs (allocation stacks are named from its
        maps). PerflabError when a profile cannot be trusted (perf lost samples, the counter saw
        no call): the seat fails, as a sequential cell would."""
        fields: dict[str, Any] = {}
        if self.perf is not None:
            mine = pids if self.client_perf is None else {"server": pids["server"]}  # the client's: below
            profilers = Profilers.shared(self.observe, mine, self.workdir, self.perf, self.site, self.tree)
            profilers.store(results, cell_id, spans)
        if self.client_perf is not None and self.clients is not None:
            clients = Profilers.shared(self.observe, {"client": pids["client"]}, self.workdir, self.client_perf, self.clients)
            clients.store(results, cell_id, spans)
        if tracer is not None:
            window = round(spans.own.get(MEASURED, (0.0, 0.0))[1])
            tracer.check_window(window)
            fields["alloc"] = tracer.fields(window) | {"window_share": 1.0}  # its own turns' counts and transactions
            if tracer.spec.stacks:
                store_alloc(results, cell_id, window, tracer, pids["server"])
        return fields
