"""The ends of a cell's window (run/window.py) that run on this machine or read a server host: the
server here (`ServerHere`: /proc here, its memory with PSS, perf and pmp here, [observe] alloc's
counter here), the server on its host (`ServerThere`: its /proc there, its RSS on the host's clock,
perf and pmp there, status over TCP as the run's login, alloc's counter there), and the client here
(`ClientHere`: pinned, in its variant's environment, its libraries proven mapped, its CPU from its
rusage; a seat's, stopped and resumed for its turns here: `Turns`). A client on its host is
hosts/client.ClientOnHost.

    end = ServerHere(runner, cell, server, tracer)    # run/stage.Here.measure
    window.measure(runner, end, cell, server, logs, ClientHere(runner, cell))
"""

from __future__ import annotations

import dataclasses
import signal
from pathlib import Path
from typing import Any

from perflab import workloads
from perflab.observers import beside
from perflab.observers.alloc.profile import alloc_fields
from perflab.observers.alloc.tracer import AllocTracer, Spanning
from perflab.observers.profilers import Profilers
from perflab.observers.paired import CLIENT, Paired, alone, on_host
from perflab.observers.beside import ServerObservers
from perflab.places import Site
from perflab.places.here import HERE
from perflab.places.proc import sockets
from perflab.places.procfs import ProcCounters, RssSampler
from perflab.run import accounting
from perflab.run.context import Runner
from perflab.servers.managed import Managed
from perflab.spec.matrix import Cell
from perflab.workloads import client, client_variant, sysbench
from perflab.workloads.turn_latency import WRAPPER, TurnClock


class ServerHere:
    """A server on this machine as the window reads it (run/window.py's ServerEnd): /proc here, its
    memory with PSS, perf and pmp here, [observe] alloc's counter here."""

    def __init__(self, runner: Runner, cell: Cell, server: Managed, tracer: AllocTracer | None) -> None:
        self.runner, self.cell, self.server, self.tracer = runner, cell, server, tracer
        self.client_address: str | None = None
        self.link = None  # here: no host's CPU to measure

    def read(self, pid: int) -> ProcCounters:
        return self.runner.kind.process_counters(HERE, pid, True)

    def memory(self) -> Any:
        return Spanning.over(self.runner.kind.memory_sampler(HERE, self.server.pid), self.tracer, self.server.pid)

    def observers(self, cell: Cell, client_end: Any, clock: Any) -> tuple[Any, Any]:
        """One Profilers for the server and a client here (one system-wide perf), with the canary and
        the I/O observer; beside a client on its host, the server's alone and its own."""
        runner, server, tree = self.runner, self.server, self.runner.kind.profiles_tree
        observe = runner.exp.file.observe
        tracer = self.tracer
        armed = tracer.armed(server.pid) if tracer is not None else None
        if client_end.here:
            profilers = Profilers(observe, server.pid, server.rundir, tree=tree, io=runner.io_observer(server))
            return profilers, ServerObservers(None, None, None, own=False, armed=armed)
        mine = alone(observe, "server", server.pid, server.rundir, tree)
        theirs = client_end.profilers(runner, cell, server)
        return Paired(mine, theirs), beside.here(observe, runner.io_observer(server), server, armed)

    def status(self, password: str | None) -> Any:
        return self.runner.kind.status(self.server, None).connect() if self.runner.exp.file.observe.status else None

    def connected(self, cell: Cell, child: Any) -> dict[str, Any]:
        return self.runner.kind.window_checks(self.server, cell, child, workloads.of(self.runner.exp.file))

    def end_mark(self, rss: Any) -> None:
        sample = getattr(rss, "sample", None)  # a process tree's PSS at the mark (places/proctree.py)
        if sample is not None:
            sample()

    def resources(self, start: Any, end: Any, usage: Any, transactions: float, rss: Any) -> dict[str, Any]:
        out = accounting.resources(start, end, usage, transactions, rss)
        if hasattr(rss, "pss_end"):  # a process tree's, sampled with its RSS
            return out | {"pss_end_bytes": rss.pss_end, "pss_peak_bytes": rss.pss_peak}
        return out | {"pss_end_bytes": self.runner.kind.pss_bytes(self.server)}

    def alloc_span(self) -> tuple[float, float] | None:
        return self.tracer.span if self.tracer is not None else None

    def observed(self, measured: dict[str, Any], covered: Any) -> None:
        if self.tracer is not None:  # summed over every process of the server (PostgreSQL's backends)
            alloc_fields(self.runner.results, self.cell.order, self.tracer, self.server.pid, measured, covered)


class ServerThere:
    """A server on its host as the window reads it (run/window.py's ServerEnd): its /proc there, its
    RSS stamped with the host's clock, perf and pmp there, its status over TCP as the run's login,
    [observe] alloc's counter there."""

    def __init__(self, runner: Runner, cell: Cell, server: Managed) -> None:
        self.runner, self.cell, self.server = runner, cell, server
        self.tracer: AllocTracer | None = server.alloc  # [observe] alloc's counter there (None: off)
        self.place = runner.server_host.place
        self.client_address: str | None = server.bind_address
        self.link = runner.server_host.link
        self.clock: Any = None

    def read(self, pid: int) -> ProcCounters:
        return self.runner.kind.process_counters(self.place, pid, True)

    def memory(self) -> Any:
        sampler = Spanning.over(self.runner.kind.memory_sampler(self.place, self.server.pid), self.tracer, self.server.pid)
        self.clock = getattr(sampler, "clock", None)  # the host's clock over the window
        return sampler

    def observers(self, cell: Cell, client_end: Any, clock: Any) -> tuple[Any, Any]:
        """perf and pmp of the server there, the client's beside them; the canary and the I/O there."""
        runner, server = self.runner, self.server
        observe = runner.exp.file.observe
        place, tree = runner.server_host, runner.kind.profiles_tree
        there = f"{place.rundir.path}/profile-{cell.order:04d}"
        mine = on_host(observe, "server", server.pid, server.rundir, place.rundir, there, clock, tree)
        theirs = client_end.profilers(runner, cell, server)
        return Paired(mine, theirs), beside.on_host(runner.exp.file.observe, place, runner.kind, server, clock)

    def status(self, password: str | None) -> Any:
        if not self.runner.exp.file.observe.status:
            return None
        return self.runner.kind.status(self.server, password).connect()

    def connected(self, cell: Cell, child: Any) -> dict[str, Any]:
        return {}  # the backends' maps are the host's

    def end_mark(self, rss: Any) -> None:
        pass

    def resources(self, start: Any, end: Any, usage: Any, transactions: float, rss: Any) -> dict[str, Any]:
        """This machine's `other_cpu_cores` counts none of the server's CPU (it is the host's), and the
        server's figures are the host's."""
        here = dataclasses.replace(end, server=ProcCounters.zero())
        mine = accounting.resources(start, here, usage, transactions, rss)
        return {**mine, **accounting.server_resources(end.server, transactions, rss), "pss_end_bytes": None}

    def alloc_span(self) -> tuple[float, float] | None:
        return self.tracer.aligned_span(self.clock) if self.tracer is not None else None

    def observed(self, measured: dict[str, Any], covered: Any) -> None:
        measured["covered"] = covered  # popped by HostStage.observed: [observe] alloc's, stored there
        measured["host_clock"] = self.clock.record() if self.clock is not None else None


class ClientHere:
    """The client on this machine: pinned to the run's client CPUs, in its variant's environment,
    its libraries proven mapped, its CPU from its rusage."""

    here = True
    link = None

    def __init__(self, runner: Runner, cell: Cell) -> None:
        self.runner, self.cell = runner, cell
        self.wl = workloads.of(runner.exp.file)
        host = runner.server_host
        self.password: str | None = host.password if host is not None else None

    def command(
        self, runner: Runner, cell: Cell, server: Managed, seconds: int | None = None
    ) -> tuple[list[str], dict[str, str] | None]:
        """Its argv and environment for `seconds` (an interleaved seat's whole run; None: the warm-up,
        the window and the tool's tail)."""
        spec = runner.exp.file
        warmup, window = client.window_seconds(spec)
        seconds = seconds or warmup + window + self.wl.tail_s
        env = client_variant.environment(cell, server.rundir)  # its variant's preload, library, env
        if self.password is not None:  # the server on its host: the run's login, never on a command line
            login = runner.kind.remote_login(server, self.password)
            argv, more = self.wl.login_command(spec, cell, server, login, seconds)
            return argv, {**env, **(more or {})}
        jobs = len(runner.client_cpus or []) or None  # pgbench's own threads, on the client's CPUs
        return self.wl.run_argv(spec, cell, server, seconds, warmup or None, jobs), env

    def start(self, argv: list[str], env: dict[str, str] | None, out: Path) -> Any:
        return client.start(argv, out, self.runner.client_cpus, env, stamped=self.wl.stamps_lines)

    def profilers(self, runner: Runner, cell: Cell, server: Managed) -> Any:
        """Beside a server on its host: the client's here, as a local cell's (system-wide perf here)."""
        observe = runner.exp.file.observe
        return alone(observe, CLIENT, None, server.rundir)

    def launched(self, child: Any, cell: Cell, out: Path, profilers: Any) -> dict[str, Any]:
        """Its libraries mapped (a client variant's proven), then its profilers attached."""
        return client_variant.loaded(child.pid, cell, out, lambda _: profilers.workload_started(child), self.wl)

    def running(self, child: Any, profilers: Any) -> None:
        pass  # attached once launched

    def pid(self, child: Any) -> int | None:
        return child.pid  # its counters here

    def profiled_pid(self, child: Any) -> int | None:
        return child.pid  # perf here folds its samples

    def connections(self, child: Any) -> int:
        return sockets(child.pid)  # pgbench's own (Child runs it, not a wrapper)

    def fetched_log(self, local: Path) -> float:
        return 0.0  # pgbench's log is written here, stamped by this machine's clock

    def recording(self, local: Path) -> Site:
        """Where perf of its clients records (an interleaved group's, observers/seats.py): here."""
        return Site(HERE, local)

    def host_pid(self, child: Any) -> int | None:
        return None  # perflab's own CPU on a host: none here

    def sampler(self, child: Any) -> Any:
        return RssSampler(child.pid)

    def mark(self, child: Any, exited: bool) -> Any:
        return None  # its CPU comes from its rusage

    def end_now(self, child: Any) -> None:
        self.wl.end_now(child)

    def after(self, child: Any, tail: bool) -> None:
        client.drain(child)  # a stamped client's last lines

    def on_its_clock(self, launched: float, marks: tuple[float, float]) -> tuple[float, tuple[float, float]]:
        return launched, marks

    def fields(self, start: Any, child: Any, transactions: float, marks: tuple[Any, Any], rss: Any, tail: bool) -> dict:
        """Its use over the window (not for a client with a tail: its rusage runs past the window)."""
        return {} if tail else accounting.client_resources(start, child.rusage, transactions, rss)

    # a seat's client (the interleaved design, run/seat.py): the same, and its turns here

    binary: str | None = None  # sysbench here

    def turn_clock(self, rundir: Path, threads: int) -> TurnClock:
        return TurnClock.create(rundir / "turns", threads)

    def turns_test(self, test: str) -> tuple[str, str]:
        """(turns.lua, the test it loads) as the client reads them."""
        return str(WRAPPER), test

    def config_file(self, server: Managed, login: dict[str, str], order: int) -> str:
        return str(sysbench.login_file(server.rundir, login))

    def seat_env(self, cell: Cell, server: Managed, turns: dict[str, str]) -> dict[str, str]:
        return {**client_variant.environment(cell, server.rundir), **turns}

    def seat_start(self, argv: list[str], env: dict[str, str] | None, out: Path) -> Any:
        return client.start(argv, out, None, env)

    def versions(self, fields: dict[str, Any]) -> dict[str, Any]:
        """`fields` with the packages of its preload and library (after the window: dpkg takes seconds)."""
        return client_variant.versions(fields)

    def seat_started(self, child: Any, cell: Cell, out: Path) -> dict[str, Any]:
        """Its libraries mapped: the row's `client` fields (a client variant's proven); a client that
        links no client library (pgbench: PostgreSQL takes no client variant), its variant's fields."""
        if not self.wl.links_client_library:
            return client_variant.configured(cell)
        client_variant.wait_loaded(child.pid, cell, out)
        return client_variant.prove(child.pid, cell)

    def turns(self, child: Any, clock: TurnClock | None) -> Turns:
        return Turns(child, clock)

    def counters(self, child: Any) -> ProcCounters:
        """Its CPU, faults and context switches now (FileNotFoundError, ProcessLookupError: gone)."""
        return ProcCounters.read(child.pid)


class Turns:
    """A seat's client here stopped and resumed (SIGSTOP, SIGCONT to its process group), the turn's
    start written into its TurnClock just before each SIGCONT."""

    def __init__(self, child: Any, clock: TurnClock | None) -> None:
        self.child, self.clock = child, clock

    def pause(self) -> None:
        self.child.signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        if self.clock is not None:  # before SIGCONT: an event in flight since the last pause is "spanned"
            self.clock.advance()
        self.child.signal_group(signal.SIGCONT)
