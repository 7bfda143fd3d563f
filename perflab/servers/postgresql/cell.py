"""The measured window of a PostgreSQL cell: pgbench (or sysbench's pgsql driver) against a
started `PostgreSQL`, with the whole process tree accounted (servers/postgresql/accounting.py).

Like a MariaDB cell (CellRunner.measure): the client runs warm-up + window seconds; at the
window's start perflab marks the counters, checks that every backend maps the variant's
allocator (`preload_verified_backends`), then samples memory until the client ends. pgbench
cannot reset its statistics mid-run, so its window figures come from its per-transaction log,
cut at the window's start (run/workloads/pgbench.py).

    intervals, rss, fields = measure(runner, cell, server, logs)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from perflab.errors import ServerCrashedError, WorkloadError
from perflab.run import accounting, client
from perflab.run.observers.phases import Spans
from perflab.run.observers.profilers import Profilers
from perflab.run.observers.resources import StealSampler
from perflab.run.proctree import TreeSampler, children, tree_counters
from perflab.run.workloads import pgbench, sysbench, sysbench_output
from perflab.servers.postgresql.accounting import verify_backends
from perflab.servers.postgresql.server import PostgreSQL
from perflab.spec import Cell

BACKENDS_DEADLINE_S = 10.0  # for the clients' connections, when the window starts at once
# pgbench's -T reaches this far past the window, and perflab ends it as -T would (SIGALRM: each
# client finishes its transaction) once the window's end mark is taken: every backend still runs
# then, however late a busy or paused machine takes the mark, so their context switches and PSS
# are read live (an exited one's are lost; with a 1 s tail, a mark 1 s late read a negative sum)
TAIL_S = 60


def command(runner: Any, cell: Cell, server: PostgreSQL) -> list[str]:
    spec = runner.exp.file
    if spec.workload.tool != "pgbench":
        return client.argv(spec, cell, server.socket)
    warmup, seconds = client.window_seconds(spec)
    jobs = len(runner.client_cpus or []) or cell.threads
    return pgbench.cell_argv(spec, cell, server, warmup + seconds + TAIL_S, jobs)


def measure(runner: Any, cell: Cell, server: PostgreSQL, logs: Path) -> tuple[list, list, dict[str, Any]]:
    spec = runner.exp.file
    warmup, seconds = client.window_seconds(spec)
    argv = command(runner, cell, server)
    pgbench_tool = spec.workload.tool == "pgbench"
    out = logs / f"{spec.workload.tool}.txt"
    # the profilers follow the postmaster's tree: perf starts (not recording) before the client
    io = runner.io_observer(server)  # [observe] io
    with Profilers(spec.observe, server.pid, server.rundir, tree=True, io=io) as profilers, StealSampler() as steal:
        profilers.workload_starting()
        auxiliary = len(children(server.pid))  # checkpointer, walwriter, ...: before any client
        started, launched = time.monotonic(), time.time()
        child = client.start(argv, out, runner.client_cpus)
        with child:
            profilers.workload_started()  # the server's warm-up samplers (pmp: every backend as it connects)
            if warmup:
                client.sleep_until(started + warmup, child)
            window = _Window(server, cell, child, profilers, pgbench_tool, auxiliary)
            code = window.run(started + warmup + seconds, warmup + seconds, spec.experiment.timeout_margin)
            window_end = min(time.monotonic(), started + warmup + seconds)
    if not server.alive():
        raise ServerCrashedError(f"{server.death()} during the run:\n{server.error_lines()}")
    if pgbench_tool:
        summary, intervals = _pgbench_output(spec.workload.test, out, code, server, launched, window.epochs, warmup)
        options = sysbench.effective_options({}, argv)
    else:
        summary, intervals = client.read_output(out, code, warmup)
        options = sysbench.effective_options(runner.sysbench_defaults, argv)
    memory = window.memory
    resources = accounting.resources(window.start, window.end, child.rusage, summary.transactions, memory)
    resources.update(pss_end_bytes=memory.pss_end, pss_peak_bytes=memory.pss_peak,
                     preload_verified_backends=window.backends)  # fmt: skip
    if not pgbench_tool:  # sysbench's connections close inside the window: their switches are lost
        for key in ("voluntary_ctx_switches", "involuntary_ctx_switches", "ctx_switches_per_txn"):
            resources[key] = None
    # the window's profiles cover it from its start (a profiler that began later: its share of it)
    spans = Spans.of_cell(0.0, started, window_end, window.begun - started, [], intervals, summary.transactions)
    profilers.store(runner.results, cell.order, spans)
    # "steal": the machine's steal over seconds of the workload, a stall's (popped by cell.py)
    fields = {"summary": summary.to_dict(), "resources": resources, "sysbench_options": options,
              **profilers.fields(spans), "steal": lambda a, b: steal.cores(started + a, started + b)}  # fmt: skip
    return intervals, memory.samples, fields


class _Window:
    """The measured window of a running client: the counters at both ends, the backends'
    allocator check, memory sampled over the tree, the profilers' window."""

    def __init__(
        self, server: PostgreSQL, cell: Cell, child: Any, profilers: Profilers, pgbench_tool: bool, auxiliary: int
    ) -> None:
        self.server, self.child, self.pgbench_tool = server, child, pgbench_tool
        self.start = accounting.WindowStart.take(server.pid, child.pid, read=tree_counters)
        self.begun = time.monotonic()
        self.epochs = (time.time(), 0.0)  # pgbench's log is cut at these (epoch seconds)
        self.backends = _verified(server, cell, child, auxiliary)
        self.memory = TreeSampler(server.pid)
        self.profilers = profilers
        self.end: accounting.WindowEnd | None = None

    def run(self, ends_at: float, client_seconds: float, margin: float) -> int:
        """Until the client exits; returns its exit code."""
        with self.memory:
            self.profilers.window_started()  # the window's profiles
            if self.pgbench_tool:  # the window ends now, the backends still live (TAIL_S)
                client.sleep_until(ends_at, self.child)
                self.memory.sample()
                self.end = accounting.WindowEnd.take(
                    self.start, self.server.pid, read=tree_counters, client_pid=self.child.pid
                )  # pgbench runs on past it: its CPU counts to here, not to its exit
                self.epochs = (self.epochs[0], time.time())
                pgbench.end_now(self.child)
            code = client.wait(self.child, client_seconds + TAIL_S * self.pgbench_tool, margin)
        if not self.pgbench_tool:
            self.end = accounting.WindowEnd.take(self.start, self.server.pid, read=tree_counters)
        return code


def _verified(server: PostgreSQL, cell: Cell, child: Any, auxiliary: int) -> int:
    """The allocator check of every backend, once the clients have connected: the postmaster's
    children are then its `auxiliary` processes (counted before the client started) and one
    backend a client. Counting the clients' backends alone would be met by the auxiliary
    processes before any client connected (with no warm-up, the check could miss them)."""
    deadline = time.monotonic() + BACKENDS_DEADLINE_S
    need = auxiliary + cell.threads
    while len(children(server.pid)) < need and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    return verify_backends(server.pid, cell.preload, server.preload, cell.env)


def _pgbench_output(
    test: str, out: Path, code: int, server: PostgreSQL, launched: float, window: tuple[float, float], warmup: int
) -> tuple[sysbench_output.Summary, list[dict[str, Any]]]:
    text = out.read_text(encoding="utf-8", errors="replace")
    log = pgbench.load_log(server.rundir / "pgbench_log")
    per_txn = pgbench.statements(test)
    summary = pgbench.window_summary(log, window, per_txn)
    if code != 0 or summary is None:
        tail = "\n".join(text.strip().splitlines()[-10:])
        raise WorkloadError(f"pgbench exited with code {code}:\n{tail}", f"full output: {out}")
    return summary, pgbench.intervals(pgbench.parse_progress(text), log, launched, per_txn, warmup)
