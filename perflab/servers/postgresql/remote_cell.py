"""The measured window of a PostgreSQL cell whose server runs on another host (servers/postgresql/
remote.py), with pgbench here: it reaches the server at the host's address as the run's `perflab`
role, its password in a passfile only its owner reads (PGPASSFILE: never on a command line), and
logs every transaction into the cell's local directory. As on this machine (cell.py), pgbench runs
past the window, perflab marks the window's end and ends it then, and the window's figures are cut
from its log at the marks. The server's CPU is its postmaster's tree on the host, its memory the
tree's RSS there (Kind.remote_reads); with [observe] perf or pmp, the tree's profiles are made there
(observers/remote_profilers.py), and with [observe] host_speed and io the canary and the server's
I/O run there (observers/remote_io.py), cut at the marks; the backends' allocator check and PSS
are this machine's only.
sysbench's cells take the common path (run/remote_server.py).

    intervals, rss, fields = measure(runner, cell, server, logs)
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from perflab.errors import ServerCrashedError
from perflab.hosts.clock import WindowClock
from perflab import workloads
from perflab.workloads import client
from perflab.run import accounting, remote_server
from perflab.observers import remote_io, remote_profilers
from perflab.observers.alloc import remote as remote_alloc
from perflab.observers.host_overhead import Overheads
from perflab.places.procfs import RssSampler
from perflab.observers.resources import StealSampler
from perflab.places.proc import clean_env
from perflab.servers.postgresql import cell as pgcell
from perflab.spec import Cell


def passfile(server: Any, password: str) -> Path:
    """libpq's passfile for the run's role at the server's address, mode 600 (PGPASSFILE)."""
    address, port, user = server.client_target
    path = server.rundir / "pgpass"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"{address}:{port}:*:{user}:{password}\n")
    return path


def prepare_argv(spec: Any, server: Any, password: str) -> tuple[list[str], dict[str, str]]:
    """`pgbench -i -s SCALE` here against the server there (run/remote_dataset.py), as the run's role."""
    from perflab.workloads.pgbench import init_argv
    from perflab.servers.postgresql.server import pg_binary

    host, port, user = server.client_target
    argv = init_argv(spec.dataset.scale or 1, socket_dir=host, port=port, user=user, binary=pg_binary("pgbench"))
    return argv, {**clean_env(), "PGPASSFILE": str(passfile(server, password))}


def measure(runner: Any, cell: Cell, server: Any, logs: Path) -> tuple[list, list, dict[str, Any]]:
    spec, wl = runner.exp.file, workloads.of(runner.exp.file)
    warmup, seconds = client.window_seconds(spec)
    password = runner.server_host.password
    runner.kind.remote_login(server, password)  # the role, on this cell's datadir
    argv = pgcell.command(runner, cell, server)
    env = {**clean_env(), "PGPASSFILE": str(passfile(server, password))}
    out, margin = logs / wl.output_name, spec.experiment.timeout_margin
    read, sampler = remote_server.server_reads(runner, server)
    # perf and pmp of the postmaster's tree on the host (remote_profilers.py), their samples and the tree's
    # RSS put on this machine's clock with the host's read at the window's start and end (the sampler's)
    clock = getattr(sampler, "clock", None) or WindowClock(runner.server_host.link)
    profilers = remote_profilers.of_cell(runner, cell, server, clock)
    observers = remote_io.of_cell(runner, server, clock)  # [observe] host_speed, io: on the host
    with StealSampler() as steal, observers, profilers:
        profilers.workload_starting()
        started, launched = time.monotonic(), time.time()
        with client.start(argv, out, None, env=env) as child:  # no pin with server_host
            profilers.workload_started()
            if warmup:
                client.sleep_until(started + warmup, child)
            clock.begin()
            start, begun, origin = (
                accounting.WindowStart.take(server.pid, child.pid, read),
                time.time(),
                time.monotonic(),
            )
            with sampler as rss, RssSampler(child.pid) as client_rss:
                profilers.window_started()
                overheads = Overheads.of_cell(runner, server.pid).begin()  # perflab's own CPU on the host
                client.sleep_until(started + warmup + seconds, child)
                end = accounting.WindowEnd.take(start, server.pid, read, client_pid=child.pid)
                perflab_cpu = overheads.finish()
                window, ended = (begun, time.time()), time.monotonic()
                remote_alloc.end_mark(sampler)  # [observe] alloc's counts end here too (pgbench runs on)
                wl.end_now(child)
                code = client.wait(child, warmup + seconds + wl.tail_s, margin, wl.name)
            clock.finish()
    if not server.alive():
        raise ServerCrashedError(f"{server.death()} during the run:\n{server.error_lines()}")
    summary, intervals = wl.window_output(spec, out, code, warmup, server, launched, window, cell.rate)
    marks = (started, started, ended, origin - started)  # the client started, its threads, the window's end, warm-up
    remote_profilers.store(runner, cell, profilers, marks, intervals, summary)
    resources = remote_server.window_resources(runner, start, end, child.rusage, summary.transactions, rss)
    fields = accounting.client_resources(start, child.rusage, summary.transactions, client_rss)
    return (
        intervals,
        rss.samples,
        {
            "steal": lambda a, b: steal.cores(started + a, started + b),
            # [observe] alloc's transactions (popped by remote_server): its counts' own span, at the window's rate
            "covered": lambda n: accounting.share(n, (origin, ended), remote_alloc.alloc_span(server), runs_on=True),
            "summary": summary.to_dict(),
            "resources": resources | {"perflab_host_cpu": perflab_cpu},
            "sysbench_options": wl.effective_options(runner, argv),
            "client": {**fields, "address": server.bind_address},
            "host_clock": clock.record(),
            **observers.fields(runner, marks, intervals, summary),  # host_speed; io (popped by remote_server)
        },
    )
