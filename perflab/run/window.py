"""A cell's measured window, written once for every place and workload tool (issue 47).

The steps, wherever the server and the client run and whichever tool drives the load: the observers
armed, the client started, its start awaited (the workload's start_watch: sysbench's "Threads
started!", pgbench's clients all connected; else its launch), the warm-up slept, the window's start
read (the server's counters, perflab's own, the machine's), the server's memory and the client's
sampled and the profilers' window begun over it; then either the client's own end (sysbench and
go-tpc stop with the window: their statistics were reset at its start) or perflab's end mark (a
client with a tail, pgbench: it cannot reset its statistics, so it runs on past the window with its
connections live while the counters are read, is told to end then, and its figures are cut from its
per-transaction log at the marks); the window's end read; the row's fields assembled.

What differs by place is asked of two ends, and only they know where they run:
  server  `ServerHere` (this machine) or `ServerThere` (a server host), both in run/ends.py: its
          host), made by the cell's stage (Stage.measure): its counters and memory there, its
          profilers and host observers, its status counters, the resources as read there,
          [observe] alloc's counts
  client  `ClientHere` (run/ends.py) or a client host's (hosts/client.ClientOnHost): its command line
          (the workload's, workloads/), its start, its counters at the marks, its row fields

    end = ServerHere(runner, cell, server, tracer)        # run/stage.Here.measure
    intervals, rss, measured = measure(runner, end, cell, server, logs, runner.client_end(cell))
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from perflab import workloads
from perflab.errors import ServerCrashedError
from perflab.observers.alloc import tracer as alloc_tracer
from perflab.observers.host_overhead import Overheads
from perflab.observers.phases import Spans
from perflab.observers.resources import StealSampler
from perflab.run import accounting
from perflab.run.context import Measured, Runner
from perflab.spec.matrix import Cell
from perflab.workloads import client

if TYPE_CHECKING:
    from perflab.servers.managed import Managed


class ServerEnd(Protocol):
    """The window's view of its server where it runs (run/ends.py: ServerHere, ServerThere)."""

    def read(self, pid: int) -> Any:
        """Its counters now (a kind's process tree summed): accounting.Reader."""

    def memory(self) -> Any:
        """Its memory sampled over the window (an RssSeries; with [observe] alloc, spanning its counts)."""

    def observers(self, cell: Cell, client_end: ClientEnd, clock: Any) -> tuple[Any, Any]:
        """(profilers, host observers) of the cell: perf and pmp of the server (and of the client, when
        `client_end` names none of its own), host_speed and io where the server runs."""

    def status(self, password: str | None) -> Any:
        """[observe] status's sampler, connected now (None when off); `password`: the run's login."""

    def connected(self, cell: Cell, child: Any) -> dict[str, Any]:
        """Checks once the clients have connected, as `resources` fields (PostgreSQL's backends)."""

    def end_mark(self, rss: Any) -> None:
        """The window's end mark, before the counters (a client with a tail runs on)."""

    def resources(self, start: Any, end: Any, usage: Any, transactions: float, rss: Any) -> dict[str, Any]:
        """The row's `resources` as read where the server runs."""

    def alloc_span(self) -> tuple[float, float] | None:
        """The span of [observe] alloc's counts (None: off)."""

    def observed(self, measured: dict[str, Any], covered: Any) -> None:
        """The window's fields that are read there: [observe] alloc's (`covered`: the window's
        transactions its counts cover), the host's clock."""

    @property
    def client_address(self) -> str | None:
        """Where a client here reaches it (a server host's address), for the row's `client`."""

    @property
    def link(self) -> Any:
        """Its host's link (perflab's own CPU there is measured over the window); None here."""


class ClientEnd(Protocol):
    """The window's view of its client where it runs (ClientHere, hosts/client.ClientOnHost)."""

    password: str | None  # the run's login the client uses (a server on a host), else None
    here: bool  # it runs on this machine: a local server's profilers cover it (one system-wide perf)
    link: Any  # its host's link (perflab's own CPU there is measured over the window); None here

    def profilers(self, runner: Runner, cell: Cell, server: Managed) -> Any:
        """Its own profilers beside a server's that cannot cover it ([observe] targets naming it), or None."""

    def command(
        self, runner: Runner, cell: Cell, server: Managed, seconds: int | None = None
    ) -> tuple[list[str], dict[str, str] | None]: ...

    def start(self, argv: list[str], env: dict[str, str] | None, out: Path) -> Any: ...

    def launched(self, child: Any, cell: Cell, out: Path, profilers: Any) -> dict[str, Any]: ...

    def versions(self, fields: dict[str, Any]) -> dict[str, Any]: ...

    def running(self, child: Any, profilers: Any) -> None: ...

    def pid(self, child: Any) -> int | None: ...

    def connections(self, child: Any) -> int:
        """The sockets the client holds open where it runs (its connections: pgbench's start)."""
        ...

    def host_pid(self, child: Any) -> int | None: ...

    def sampler(self, child: Any) -> Any: ...

    def mark(self, child: Any, exited: bool) -> Any: ...

    def end_now(self, child: Any) -> None: ...

    def after(self, child: Any, tail: bool) -> None: ...

    def on_its_clock(self, launched: float, marks: tuple[float, float]) -> tuple[float, tuple[float, float]]: ...

    def fields(self, start: Any, child: Any, transactions: float, marks: tuple[Any, Any], rss: Any, tail: bool) -> dict: ...


@dataclass
class _Run:
    """What the client's run gave: times on this machine's CLOCK_MONOTONIC, epochs by time.time()."""

    started: float  # the client launched
    launched: float  # its clock's zero (`origin`), time.time()
    origin: float  # its start (its clock's zero: the workload's start_watch), else its launch
    window_at: float  # the window's start
    ended: float  # the window's end
    marks: tuple[float, float]  # the window's (start, end), time.time()
    code: int
    start: accounting.WindowStart
    end: accounting.WindowEnd
    rss: Any
    client_rss: Any
    client_marks: tuple[Any, Any]
    perflab_cpu: dict[str, Any]
    checks: dict[str, Any]
    loaded: dict[str, Any]
    child: Any  # its rusage once reaped (a client here's)


def measure(runner: Runner, end: ServerEnd, cell: Cell, server: Managed, logs: Path, client_end: ClientEnd) -> Measured:
    """The window of `cell` on its started `server`: (intervals, RSS samples, the row's measured fields)."""
    spec, wl = runner.exp.file, workloads.of(runner.exp.file)
    warmup = client.window_seconds(spec)[0]
    argv, env = client_end.command(runner, cell, server)
    out = logs / wl.output_name
    memory = end.memory()
    clock = getattr(memory, "clock", None)  # a server host's clock over the window (its samples aligned)
    profilers, observers = end.observers(cell, client_end, clock)
    counters = end.status(client_end.password)  # before the workload loads the server
    with (
        observers,
        profilers,
        contextlib.closing(counters) if counters else contextlib.nullcontext(),
        StealSampler() as steal,
    ):
        run = _run(runner, end, cell, server, (argv, env, out), client_end, (memory, profilers, counters))
    if not server.alive():
        raise ServerCrashedError(f"{server.death()} during the run:\n{server.error_lines()}")
    launched, marks = client_end.on_its_clock(run.launched, run.marks)
    summary, intervals = wl.window_output(spec, out, run.code, warmup, server, launched, marks, cell.rate)
    txn = summary.transactions
    spans = _spans(runner, run, summary, intervals)
    _store(runner, cell, profilers, spans)
    resources = end.resources(run.start, run.end, run.child.rusage, txn, run.rss)
    if runner.kind.profiles_tree and not wl.tail_s:  # backends that exit inside the window take their switches
        resources.update(voluntary_ctx_switches=None, involuntary_ctx_switches=None, ctx_switches_per_txn=None)
    resources.update(run.checks)
    if run.perflab_cpu:
        resources["perflab_host_cpu"] = run.perflab_cpu
    used = client_end.fields(run.start, run.child, txn, run.client_marks, run.client_rss, bool(wl.tail_s))
    address = {"address": end.client_address} if end.client_address is not None else {}
    measured: dict[str, Any] = {
        "steal": lambda a, b: steal.cores(run.origin + a, run.origin + b),  # seconds of the client's clock
        "summary": summary.to_dict(),
        "resources": resources,
        "sysbench_options": wl.effective_options(spec, argv),
        "client": {**client_end.versions(run.loaded), **used, **address},
    }
    if counters is not None:
        measured["server_status"] = counters.figures(txn, summary.queries, summary.total_time_s)
        measured["status_samples"] = counters.samples
    if hasattr(profilers, "fields"):  # host_speed, io (popped by the cell): a local cell's Profilers
        measured.update(profilers.fields(spans))
    measured.update(observers.fields(spans))  # the same, observed where a remote end runs
    span = end.alloc_span()
    covered = None
    if span is not None:  # [observe] alloc's counts: the window's transactions over their own span
        done = reported(run.origin, intervals)
        window = (run.window_at, run.ended)
        covered = functools.partial(accounting.share, window=window, span=span, runs_on=bool(wl.tail_s), done=done)
    end.observed(measured, covered)
    return intervals, run.rss.samples, measured


def _run(
    runner: Runner, end: ServerEnd, cell: Cell, server: Managed, command: tuple, client_end: ClientEnd, reads: tuple
) -> _Run:
    """The client from its launch to its end, the observers over their phases."""
    spec, wl = runner.exp.file, workloads.of(runner.exp.file)
    argv, env, out = command
    memory, profilers, counters = reads
    warmup, seconds = client.window_seconds(spec)
    margin = spec.experiment.timeout_margin
    profilers.workload_starting()
    started, launched = time.monotonic(), time.time()
    with client_end.start(argv, env, out) as child:
        watch = wl.start_watch(server, client_end, cell, child, out, margin)
        loaded = client_end.launched(child, cell, out, profilers)
        origin = watch.wait() if watch else started
        epoch = launched + (origin - started)  # its clock's zero, time.time()
        client_end.running(child, profilers)
        # the server's checks once the clients have connected (PostgreSQL: each backend's maps, 22 ms
        # of CPU at 16 clients): in the warm-up when there is one, out of the window's own CPU
        checks = end.connected(cell, child) if warmup else None
        if warmup:
            client.sleep_until(origin + warmup, child)
        start = accounting.WindowStart.take(
            server.pid, client_end.pid(child), end.read, window=(origin + warmup, seconds)
        )
        window_at, begun = time.monotonic(), time.time()
        client.window_began(child, origin + warmup, wl.name)
        before = client_end.mark(child, exited=False)
        with memory as rss, client_end.sampler(child) or contextlib.nullcontext() as client_rss, counters or (
            contextlib.nullcontext()
        ):
            profilers.window_started()
            overheads = Overheads.of_cell((end.link, server.pid), (client_end.link, client_end.host_pid(child))).begin()
            if checks is None:
                checks = end.connected(cell, child)
            if wl.tail_s:  # the window ends at perflab's mark; the client runs on, its connections live
                client.sleep_until(origin + warmup + seconds, child)
                finish = accounting.WindowEnd.take(start, server.pid, end.read, client_pid=client_end.pid(child))
                marks, ended = (begun, time.time()), time.monotonic()
                end.end_mark(rss)  # PSS there (17-28 ms at 16 clients): after the window, the backends still live
                alloc_tracer.end_mark(memory)  # [observe] alloc's counts end at the mark too
                after = client_end.mark(child, exited=False)
                perflab_cpu = overheads.finish()
                client_end.end_now(child)
                code = wl.wait(child, warmup + seconds + wl.tail_s, margin)
            else:
                code = wl.wait(child, warmup + seconds, margin)
                marks, ended = (begun, time.time()), min(time.monotonic(), origin + warmup + seconds)
                perflab_cpu = overheads.finish()
        if not wl.tail_s:
            finish = accounting.WindowEnd.take(start, server.pid, end.read)
            after = client_end.mark(child, exited=True)
    client_end.after(child, bool(wl.tail_s))
    return _Run(started, epoch, origin, window_at if wl.tail_s else origin + warmup, ended, marks, code, start,
                finish, rss, client_rss, (before, after), perflab_cpu, checks, loaded, child)  # fmt: skip


def reported(origin: float, intervals: list[dict[str, Any]]) -> Callable[[float, float], float]:
    """The client's own count of its transactions between two instants (time.monotonic()): each
    per-second report's, second t covering (origin + t - 1, origin + t], spread evenly within it."""
    seconds = [(origin + iv["t"] - 1, origin + iv["t"], iv.get("tps") or 0.0) for iv in intervals]

    def done(x: float, y: float) -> float:
        return sum(tps * max(0.0, min(y, hi) - max(x, lo)) for lo, hi, tps in seconds)

    return done


def _spans(runner: Runner, run: Any, summary: Any, intervals: list[dict[str, Any]]) -> Spans:
    """The phases the profiles are cut into: the client's launch, its clock's zero, the window, its end."""
    stalls = runner._steady(intervals, summary.qps)["stalls"]
    return Spans.of_cell(
        run.started, run.origin, run.ended, run.window_at - run.origin, stalls, intervals, summary.transactions
    )


def _store(runner: Runner, cell: Cell, profilers: Any, spans: Spans) -> None:
    """The cell's profiles per target and phase (profiles/ and the profiles table), then their files on a
    host removed."""
    try:
        if hasattr(profilers, "store"):
            profilers.store(runner.results, cell.order, spans)
    finally:
        if hasattr(profilers, "remove"):
            profilers.remove()
