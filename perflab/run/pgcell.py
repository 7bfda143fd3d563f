"""The measured window of a PostgreSQL cell: pgbench (or sysbench's pgsql driver) against a
started `PostgreSQL`, with the whole process tree accounted (run/pgaccounting.py).

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
from perflab.run.pgaccounting import TreeSampler, children, tree_counters, verify_backends
from perflab.run.servers.postgres import PORT, SUPERUSER, PostgreSQL, pg_binary
from perflab.run.workloads import pgbench, sysbench
from perflab.spec import Cell

BACKENDS_DEADLINE_S = 10.0  # for the clients' connections, when the window starts at once
# pgbench runs this long past the window: its end is perflab's mark, taken while every backend
# still runs, so their context switches and PSS are read live (an exited one's are lost)
TAIL_S = 1


def command(runner: Any, cell: Cell, server: PostgreSQL) -> list[str]:
    spec = runner.exp.file
    if spec.workload.tool != "pgbench":
        return client.argv(spec, cell, server.socket)
    warmup, seconds = client.window_seconds(spec)
    return pgbench.argv(
        spec.workload.test,
        socket_dir=server.rundir,
        port=PORT,
        user=SUPERUSER,
        clients=cell.threads,
        jobs=len(runner.client_cpus or []) or cell.threads,
        seconds=warmup + seconds + TAIL_S,
        log_prefix=server.rundir / "pgbench_log",
        options={**spec.workload.options, **cell.workload_options},
        binary=pg_binary("pgbench", server.bindir),  # the build's own pgbench when it has one
    )


def measure(runner: Any, cell: Cell, server: PostgreSQL, logs: Path) -> tuple[list, list, dict[str, Any]]:
    spec = runner.exp.file
    warmup, seconds = client.window_seconds(spec)
    argv = command(runner, cell, server)
    pgbench_tool = spec.workload.tool == "pgbench"
    out = logs / f"{spec.workload.tool}.txt"
    started, launched = time.monotonic(), time.time()
    child = client.start(argv, out, runner.client_cpus)
    with child:
        if warmup:
            client.sleep_until(started + warmup, child)
        start = accounting.WindowStart.take(server.pid, child.pid, read=tree_counters)
        window = (time.time(), 0.0)
        backends = _verified(server, cell, child)
        with TreeSampler(server.pid) as memory, Profilers(spec.observe, server.pid, server.rundir) as profilers:
            profilers.window_started()  # the window's profiles only (targets and phases: MariaDB cells)
            window_at = time.monotonic()
            if pgbench_tool:  # the window ends now, the backends still live (TAIL_S)
                client.sleep_until(started + warmup + seconds, child)
                memory.sample()
                end = accounting.WindowEnd.take(start, server.pid, read=tree_counters)
                window = (window[0], time.time())
            code = client.wait(child, warmup + seconds + TAIL_S * pgbench_tool, spec.experiment.timeout_margin)
            window_end = min(time.monotonic(), window_at + seconds)
        if not pgbench_tool:
            end = accounting.WindowEnd.take(start, server.pid, read=tree_counters)
    if not server.alive():
        raise ServerCrashedError(f"{server.death()} during the run:\n{server.error_lines()}")
    if pgbench_tool:
        summary, intervals = _pgbench_output(spec.workload.test, out, code, server, launched, window, warmup)
        options = sysbench.effective_options({}, argv)
    else:
        summary, intervals = client.read_output(out, code, warmup)
        options = sysbench.effective_options(runner.sysbench_defaults, argv)
    resources = accounting.resources(start, end, child.rusage, summary.transactions, memory)
    resources.update(pss_end_bytes=memory.pss_end, pss_peak_bytes=memory.pss_peak, preload_verified_backends=backends)
    if not pgbench_tool:  # sysbench's connections close inside the window: their switches are lost
        for key in ("voluntary_ctx_switches", "involuntary_ctx_switches", "ctx_switches_per_txn"):
            resources[key] = None
    spans = Spans(workload=window_at, window=window_at, end=window_end, window_transactions=summary.transactions)
    profilers.store(runner.results, cell.order, spans)
    fields = {"summary": summary.to_dict(), "resources": resources, "sysbench_options": options}
    return intervals, memory.samples, fields


def _verified(server: PostgreSQL, cell: Cell, child: Any) -> int:
    """The allocator check of every backend, once the clients have connected."""
    deadline = time.monotonic() + BACKENDS_DEADLINE_S
    while len(children(server.pid)) < cell.threads and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    return verify_backends(server.pid, cell.preload, server.preload, cell.env)


def _pgbench_output(
    test: str, out: Path, code: int, server: PostgreSQL, launched: float, window: tuple[float, float], warmup: int
) -> tuple[sysbench.Summary, list[dict[str, Any]]]:
    text = out.read_text(encoding="utf-8", errors="replace")
    log = pgbench.load_log(server.rundir / "pgbench_log")
    per_txn = pgbench.statements(test)
    summary = pgbench.window_summary(log, window, per_txn)
    if code != 0 or summary is None:
        tail = "\n".join(text.strip().splitlines()[-10:])
        raise WorkloadError(f"pgbench exited with code {code}:\n{tail}", f"full output: {out}")
    return summary, pgbench.intervals(pgbench.parse_progress(text), log, launched, per_txn, warmup)
