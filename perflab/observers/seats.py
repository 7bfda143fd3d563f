"""On-CPU profiles and allocation counts per seat of an interleaved group (run/interleave.py).

Why it can be done per seat: only the running seat's client works; the others' clients are
stopped, and their servers idle but for background work (purge, flushing), which a sequential
cell's profile holds too. So one `perf record -a` for the whole group, folded per process, gives
each server (and client) its own profile (with the servers on a host, perf records there: `site`,
of the servers alone); the allocation counter is preloaded into every server
and read around the window, so its counts are each server's own, whatever the turns.

What differs from a sequential cell's profile: the phases are the warm-up and the measured
window (the seconds of a stall are seconds of the client's running time, not of the wall
clock, so they get no profile of their own), and a profile's `seconds` are the seconds the seat's
client ran in that phase, not the wall-clock span: per second figures stay per second of work.

    group = SeatObservers(spec.observe, workdir)       # nothing runs yet
    tracer = runner.stage().tracer(rundir, workdir)    # per seat, before its server starts
    with group.recording(pids):                        # perf -a, not yet sampling
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

    def __init__(self, observe: ObserveSection, workdir: Path, site: Site | None = None, tree: bool = False) -> None:
        self.observe = observe
        self.tree = tree  # a server is its process tree (PostgreSQL's backends: Kind.profiles_tree)
        self.workdir = Path(workdir)
        self.site = site or Site(HERE, self.workdir)  # where the servers run: perf records there
        self.perf: PerfRecorder | None = None
        self._windows = contextlib.ExitStack()

    @contextlib.contextmanager
    def recording(self, pid: int) -> Iterator[SeatObservers]:
        """perf record -a for the group, started once every seat's server and client runs (its
        start-up reads every process's maps), sampling from warmup_started() or window_started();
        stopped (and its data written) on leaving."""
        spec = self.observe.perf
        try:
            if spec is None:
                yield self
                return
            site = self.site
            if site.clock is not None:
                site.clock.begin()  # a host's clock: read again when the window ends
            recorder = PerfRecorder(
                pid, site.dir, frequency=spec.frequency, call_graph=spec.call_graph, enabled=False,
                place=site.place, clock=site.clock, starts=site.starts,
            )  # fmt: skip
            with recorder:
                self.perf = recorder
                yield self
        finally:
            self._windows.close()

    def arm(self, seats: list[tuple[int, Path, AllocTracer | None]]) -> None:
        """Before the warm-up: each seat's allocation counter starts what takes seconds to start
        (server pid, run directory, tracer), so that window_started() opens every window at once."""
        for pid, rundir, tracer in seats:
            if tracer is not None:
                self._windows.enter_context(tracer.armed(pid, rundir))

    def warmup_started(self) -> None:
        if self.perf is not None and self.observe.perf is not None and self.observe.perf.warmup:
            self.perf.resume()

    def window_started(self, seats: list[tuple[int, Path, AllocTracer | None]]) -> None:
        """The window begins for every seat at once: perf samples (if not yet) and each seat's
        allocation counter opens its window (server pid, run directory, tracer)."""
        if self.perf is not None and not self.perf.enabled:
            self.perf.resume()
        for pid, rundir, tracer in seats:
            if tracer is not None:
                self._windows.enter_context(tracer.window(pid, rundir))

    def window_ended(self) -> None:
        try:
            self._windows.close()
        finally:
            if self.perf is not None and self.site.clock is not None:
                with contextlib.suppress(PerflabError):  # a host dropped off: its profile cannot be cut
                    self.site.clock.finish()

    def remove(self) -> None:
        self.site.remove()  # a host's: its perf.data

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
            profilers = Profilers.shared(self.observe, pids, self.workdir, self.perf, self.site, self.tree)
            profilers.store(results, cell_id, spans)
        if tracer is not None:
            window = round(spans.own.get(MEASURED, (0.0, 0.0))[1])
            tracer.check_window(window)
            fields["alloc"] = tracer.fields(window) | {"window_share": 1.0}  # its own turns' counts and transactions
            if tracer.spec.stacks:
                store_alloc(results, cell_id, window, tracer, pids["server"])
        return fields
