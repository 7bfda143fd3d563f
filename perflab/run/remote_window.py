"""A cell's window with the client here against the server on the server host (run/remote_server.py):
sysbench here with the run's login, the server's resources read on its host (its RSS on the host's
clock, aligned), perf and pmp there ([observe] perf, pmp: observers/remote_profilers.py; of the
client here: remote_client_profilers.ClientHereProfilers), the
host-speed canary and the server's I/O there ([observe] host_speed, io: observers/remote_io.py), and
with [observe] status the server's counters once a second over TCP, as the client reaches it.

    intervals, rss_samples, measured = measure(runner, cell, server, logs)
"""

from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perflab import workloads
from perflab.workloads import client
from perflab.run import accounting
from perflab.observers import remote_client_profilers, remote_io, remote_profilers
from perflab.observers.alloc import remote as remote_alloc
from perflab.observers.host_overhead import Overheads
from perflab.observers.resources import RssSampler, StealSampler
from perflab.observers.status import StatusSampler
from perflab.run.remote_server import _login_file, server_reads, window_resources
from perflab.spec import Cell


@dataclass
class Window:
    """What the window's run gives: its client's times on this machine's CLOCK_MONOTONIC, and its readings."""

    started: float  # the client started
    origin: float  # its threads started
    ended: float  # its window's end as seen here
    code: int
    child: Any
    start: Any
    end: Any
    rss: Any
    client_rss: Any
    counters: StatusSampler | None
    perflab_cpu: dict[str, Any]  # perflab's own CPU on the server host over the window


def status_sampler(runner: Any, server: Any, password: str) -> StatusSampler | None:
    """[observe] status over TCP as the run's `perflab` login (the kind's remote_status), connected now."""
    if not runner.exp.file.observe.status:
        return None
    return runner.kind.remote_status(server, password).connect()


def measure(runner: Any, cell: Cell, server: Any, logs: Path) -> tuple[list[dict[str, Any]], list, dict[str, Any]]:
    spec = runner.exp.file
    warmup, seconds = client.window_seconds(spec)
    workload = workloads.of(spec)
    login = runner.kind.remote_login(server, runner.server_host.password)
    connect = [f"--db-driver={runner.kind.sysbench_driver}", f"--config-file={_login_file(runner, server, login)}"]
    command = client.argv(spec, cell, Path(server.socket), connect=connect)
    read, sampler = server_reads(runner, server)
    clock = getattr(sampler, "clock", None)  # the host's clock over the window (the server's RSS sampler's)
    # perf and pmp of the server on its host; of the client (targets naming it) here
    profilers = remote_client_profilers.beside_server_host(runner, cell, server, clock)
    observers = remote_io.of_cell(runner, server, clock)  # [observe] host_speed, io: on the host
    counters = status_sampler(runner, server, runner.server_host.password)  # before the workload loads it
    status = contextlib.closing(counters) if counters else contextlib.nullcontext()
    with observers, profilers, status, StealSampler() as steal:
        w = _run(runner, server, command, logs / workload.output_name, profilers, read, sampler, counters)
    summary, intervals = workload.read_output(logs / workload.output_name, w.code, warmup)
    fields = accounting.client_resources(w.start, w.child.rusage, summary.transactions, w.client_rss)
    window = (w.started, w.origin, min(w.ended, w.origin + warmup + seconds), warmup)
    remote_profilers.store(runner, cell, profilers, window, intervals, summary)
    extra = observers.fields(runner, window, intervals, summary)  # host_speed; io (popped by remote_server)
    measured = {
        "steal": lambda a, b: steal.cores(w.origin + a, w.origin + b),
        # popped by remote_server: [observe] alloc's transactions, over its counts' own span
        "covered": functools.partial(
            accounting.share, window=(w.origin + warmup, window[2]), span=remote_alloc.alloc_span(server)
        ),
        "summary": summary.to_dict(),
        "resources": window_resources(runner, w.start, w.end, w.child.rusage, summary.transactions, w.rss)
        | {"perflab_host_cpu": w.perflab_cpu},
        "sysbench_options": workload.effective_options(runner, command),
        "client": {**fields, "address": server.bind_address},
        "host_clock": clock.record() if clock is not None else None,
        **extra,
    }
    if w.counters is not None:
        measured["server_status"] = w.counters.figures(summary.transactions, summary.queries, summary.total_time_s)
        measured["status_samples"] = w.counters.samples
    return intervals, w.rss.samples, measured


def _run(
    runner: Any, server: Any, command: list[str], out: Path, profilers: Any, read: Any, sampler: Any, counters: Any
) -> Window:
    """The client from its start to its end, the observers over their phases."""
    spec = runner.exp.file
    warmup, seconds = client.window_seconds(spec)
    margin, name = spec.experiment.timeout_margin, workloads.of(spec).name
    profilers.workload_starting()
    started = time.monotonic()
    with client.start(command, out, None) as child:
        origin = client.StartWatch(out, child, margin).wait()
        profilers.workload_started(child)  # the server's warm-up samplers there; the client's here, of its pid
        if warmup:
            client.sleep_until(origin + warmup, child)
        start = accounting.WindowStart.take(server.pid, child.pid, read, window=(origin + warmup, seconds))
        status = counters or contextlib.nullcontext()
        with sampler as rss, RssSampler(child.pid) as client_rss, status:
            profilers.window_started()
            overheads = Overheads.of_cell(runner, server.pid).begin()  # with its loops and profilers running
            code = client.wait(child, warmup + seconds, margin, name)
            ended = time.monotonic()
            perflab_cpu = overheads.finish()
        end = accounting.WindowEnd.take(start, server.pid, read)
    client.drain(child)
    return Window(started, origin, ended, code, child, start, end, rss, client_rss, counters, perflab_cpu)
