"""The measured window of a PostgreSQL cell: pgbench (or sysbench's pgsql driver, or go-tpc's
postgres driver) against a started `PostgreSQL`, with the whole process tree accounted
(servers/postgresql/accounting.py).

Like a MariaDB cell (CellRunner.measure): the client runs warm-up + window seconds; at the
window's start perflab marks the counters, checks that every backend maps the variant's
allocator (`preload_verified_backends`), then samples memory until the client ends. pgbench
cannot reset its statistics mid-run, so its window figures come from its per-transaction log,
cut at the window's start (workloads/pgbench.py).

    intervals, rss, fields = measure(runner, cell, server, logs)
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from perflab.errors import ServerCrashedError
from perflab import workloads
from perflab.workloads import client
from perflab.run import accounting
from perflab.observers.alloc.tracer import AllocTracer
from perflab.observers.phases import Spans
from perflab.observers.profilers import Profilers, alloc_fields
from perflab.observers.resources import StealSampler
from perflab.places.procfs import RssSampler
from perflab.places.proctree import TreeSampler, tree_counters
from perflab.workloads import Workload
from perflab.servers.postgresql.accounting import client_backends, verify_backends
from perflab.servers.postgresql.server import PostgreSQL
from perflab.spec import Cell

BACKENDS_DEADLINE_S = 10.0  # for the clients' connections, when the window starts at once


def command(runner: Any, cell: Cell, server: PostgreSQL) -> list[str]:
    """The cell's client: warm-up + window seconds, and the workload's tail past them (pgbench's:
    perflab ends it at the window's end mark)."""
    spec, wl = runner.exp.file, workloads.of(runner.exp.file)
    warmup, seconds = client.window_seconds(spec)
    jobs = len(runner.client_cpus or []) or cell.threads
    return wl.run_argv(spec, cell, server, warmup + seconds + wl.tail_s, warmup or None, jobs)


def measure(
    runner: Any, cell: Cell, server: PostgreSQL, logs: Path, tracer: AllocTracer | None = None
) -> tuple[list, list, dict[str, Any]]:
    spec, wl = runner.exp.file, workloads.of(runner.exp.file)
    warmup, seconds = client.window_seconds(spec)
    argv = command(runner, cell, server)
    out = logs / wl.output_name
    # the profilers follow the postmaster's tree: perf starts (not recording) before the client
    io = runner.io_observer(server)  # [observe] io
    # [observe] alloc: its syscalls' perf started before the workload (the counter counts in every backend)
    armed = tracer.armed(server.pid, server.rundir) if tracer is not None else contextlib.nullcontext()
    with (
        Profilers(spec.observe, server.pid, server.rundir, tree=True, io=io) as profilers,
        StealSampler() as steal,
        armed,
    ):
        profilers.workload_starting()
        started, launched = time.monotonic(), time.time()
        child = client.start(argv, out, runner.client_cpus, stamped=wl.stamps_lines)  # go-tpc's: stamped
        with child:
            profilers.workload_started()  # the server's warm-up samplers (pmp: every backend as it connects)
            if warmup:
                client.sleep_until(started + warmup, child)
            window = _Window(server, cell, child, profilers, wl, tracer)
            code = window.run(started + warmup + seconds, warmup + seconds, spec.experiment.timeout_margin)
            window_end = min(time.monotonic(), started + warmup + seconds)
        client.drain(child)  # a stamped client's last lines
    if not server.alive():
        raise ServerCrashedError(f"{server.death()} during the run:\n{server.error_lines()}")
    summary, intervals = wl.window_output(spec, out, code, warmup, server, launched, window.epochs, cell.rate)
    options = wl.effective_options(runner, argv)
    memory = window.memory
    resources = accounting.resources(window.start, window.end, child.rusage, summary.transactions, memory)
    resources.update(pss_end_bytes=memory.pss_end, pss_peak_bytes=memory.pss_peak,
                     preload_verified_backends=window.backends)  # fmt: skip
    if not wl.tail_s:  # connections that close inside the window (sysbench's): their switches are lost
        for key in ("voluntary_ctx_switches", "involuntary_ctx_switches", "ctx_switches_per_txn"):
            resources[key] = None
    # the window's profiles cover it from its start (a profiler that began later: its share of it)
    spans = Spans.of_cell(0.0, started, window_end, window.begun - started, [], intervals, summary.transactions)
    profilers.store(runner.results, cell.order, spans)
    # "steal": the machine's steal over seconds of the workload, a stall's (popped by cell.py)
    fields = {"summary": summary.to_dict(), "resources": resources, "sysbench_options": options,
              **profilers.fields(spans), "steal": lambda a, b: steal.cores(started + a, started + b)}  # fmt: skip
    if not wl.tail_s:  # the client's own use over the window (go-tpc's CPU per transaction); pgbench's runs past it
        used = accounting.client_resources(window.start, child.rusage, summary.transactions, window.client_rss)
        fields["client"] = used
    if tracer is not None:  # summed over the postmaster and every process it forked
        alloc_fields(runner.results, cell.order, tracer, server.pid, fields)
    return intervals, memory.samples, fields


class _Window:
    """The measured window of a running client: the counters at both ends, the backends'
    allocator check, memory sampled over the tree, the profilers' window, [observe] alloc's counts
    (from the start readings to the end mark: the clients' disconnections left out)."""

    def __init__(
        self, server: PostgreSQL, cell: Cell, child: Any, profilers: Profilers, wl: Workload, tracer: Any = None
    ) -> None:
        self.server, self.child, self.wl = server, child, wl
        self.start = accounting.WindowStart.take(server.pid, child.pid, read=tree_counters)
        self.begun = time.monotonic()
        self.epochs = (time.time(), 0.0)  # a logging client's figures are cut at these (epoch seconds)
        self.traced = contextlib.ExitStack()
        if tracer is not None:
            self.traced.enter_context(tracer.window(server.pid, server.rundir))
        try:
            self.backends = _verified(server, cell, child, wl.database)
        except BaseException:
            self.traced.close()
            raise
        self.memory = TreeSampler(server.pid)
        self.client_rss = RssSampler(child.pid)
        self.profilers = profilers
        self.end: accounting.WindowEnd | None = None

    def run(self, ends_at: float, client_seconds: float, margin: float) -> int:
        """Until the client exits; returns its exit code."""
        with self.traced, self.memory, self.client_rss:
            self.profilers.window_started()  # the window's profiles
            if self.wl.tail_s:  # the window ends now, the backends still live
                client.sleep_until(ends_at, self.child)
                self.memory.sample()
                self.end = accounting.WindowEnd.take(
                    self.start, self.server.pid, read=tree_counters, client_pid=self.child.pid
                )  # the client runs on past it: its CPU counts to here, not to its exit
                self.epochs = (self.epochs[0], time.time())
                self.traced.close()  # alloc's counts end at the mark too
                self.wl.end_now(self.child)
            code = self.wl.wait(self.child, client_seconds + self.wl.tail_s, margin)
        if not self.wl.tail_s:
            self.end = accounting.WindowEnd.take(self.start, self.server.pid, read=tree_counters)
        return code


def _verified(server: PostgreSQL, cell: Cell, child: Any, database: str) -> int:
    """The allocator check of every backend, once the clients have connected: a backend on the
    client's `database` for each of its connections (its title names the database). Counted by
    title, not as the children beyond those before the client started: that count took in a
    process about to exit (perflab's own connection's backend, on a busy machine), so the wait
    for one more child ran to its deadline, and the check ran after the clients had gone. Met on
    two looks 50 ms apart: pgbench's first connection (it reads the scale) is on the database too,
    and goes before its clients connect."""
    deadline, met = time.monotonic() + BACKENDS_DEADLINE_S, 0
    while time.monotonic() < deadline and child.poll() is None:
        met = met + 1 if client_backends(server.pid, database) >= cell.threads else 0
        if met == 2:
            break
        time.sleep(0.05)
    return verify_backends(server.pid, cell.preload, server.preload, cell.env)
