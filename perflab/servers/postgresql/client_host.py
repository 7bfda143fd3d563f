"""pgbench on the client host (`[experiment] client_host`, docs/hosts.md), against a PostgreSQL served
from this machine (listening only on the address the host reaches us by, Kind.listen_on) or from a
server host (servers/postgresql/remote.py). The run's `perflab` role logs in over TCP with the run's
password, which goes into a passfile only its owner reads on the host (PGPASSFILE), never onto a
command line. pgbench runs there with the options it has here (workloads/pgbench.py), inside the
run directory's wrapper (run/remote_client.RemoteChild): its -P 1 progress streams back into the
cell's `pgbench.txt`, and it logs every transaction into the host's `client-NNNN/` directory. As on
this machine (cell.py), it runs past the window; perflab marks the window's end and ends it then
(SIGALRM to pgbench alone). Its log is then fetched back into the cell's directory here, and the
window's figures are cut from it at perflab's marks, put on the host's clock: the host's clock is
read before pgbench starts and after it ends (hosts/clock.WindowClock), and a cell whose clock cannot
be aligned within 50 ms fails (its figures could not be cut). With [observe] perf and pmp, the
server's profiles (the postmaster's tree) are made over pgbench's phases: here as a local pgbench
cell's (observers/profilers.py), or on the server host (observers/remote_profilers.py,
reading that host's clock themselves).

Recorded in `client`, as a remote sysbench's: the host, the server's address, the host's interface
toward it, its bytes per transaction, the round trip; pgbench's CPU there over the window (its
/proc stat at both marks: it still runs at the end mark); and `clock`, the two readings and the
shift applied. With [observe] host_speed and io, the canary and the server's I/O run where the server
runs (observers/remote_io.of_window: here, or on the server host), over pgbench's run, and their
window is the marks'.

    intervals, rss, fields = measure(runner, cell, server, logs)   # from run/remote_client.measure
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perflab.errors import HostLostError, ServerCrashedError
from perflab.hosts.clock import Alignment, WindowClock
from perflab import workloads
from perflab.workloads import client
from perflab.run import accounting, remote_server
from perflab.observers import remote_io, remote_profilers
from perflab.observers.alloc import remote as remote_alloc
from perflab.observers.alloc.remote import Spanning
from perflab.observers.host_overhead import Overheads
from perflab.observers.profilers import alloc_fields
from perflab.observers.resources import StealSampler
from perflab.run.remote_client import RemoteChild, RemoteClient, cpu_fields, local_profilers
from perflab.workloads import pgbench, rate
from perflab.spec import Cell

LOG = "pgbench_log"  # its per-transaction log's prefix, there and in the cell's directory here


def host_argv(runner: Any, cell: Cell, login: dict[str, str], remote: RemoteClient) -> tuple[list[str], str | None]:
    """The cell's pgbench on the host, its passfile in its environment: (argv, the script's path there
    when the test is a local script, else None). `login`: the kind's remote_login (the address, port
    and role the host reaches the server by, and the password)."""
    spec = runner.exp.file
    warmup, seconds = client.window_seconds(spec)
    there = cell_dir(remote, cell)
    address, port, user = login["pgsql-host"], login["pgsql-port"], login["pgsql-user"]
    passfile = remote.write_private(
        f"{Path(there).name}/pgpass", f"{address}:{port}:*:{user}:{login['pgsql-password']}\n"
    )
    test = spec.workload.test
    script = None if test in pgbench.BUILTINS else remote.copy(Path(test))
    argv = pgbench.argv(
        script or test,
        socket_dir=address,
        port=int(port),
        user=user,
        clients=cell.threads,
        jobs=cell.threads,  # no pinning on a client host
        seconds=warmup + seconds + pgbench.TAIL_S,
        log_prefix=f"{there}/{LOG}",  # type: ignore[arg-type]  # a path on the host
        options=rate.options(spec, cell),
        binary=remote.binary,
    )
    return ["env", f"PGPASSFILE={passfile}", *argv], script


def cell_dir(remote: RemoteClient, cell: Cell) -> str:
    """The cell's directory in the host's run directory (not `cell-NNNN`: a server host's, when both are one)."""
    return f"{remote.rundir.path}/client-{cell.order:04d}"


@dataclass
class _Window:
    """The window's readings with pgbench on its host (times: this machine's monotonic, and epoch marks)."""

    started: float
    origin: float  # the window's start (this machine's CLOCK_MONOTONIC, as `started`)
    ended: float  # its end mark
    launched: float  # time.time() at pgbench's launch
    marks: tuple[float, float]  # the window's (start, end), time.time()
    code: int
    start: accounting.WindowStart
    end: accounting.WindowEnd
    rss: Any
    net: tuple[int | None, int | None]  # the host's interface at the window's start and end
    cpu: tuple[float | None, float | None]  # pgbench's CPU then
    perflab_cpu: dict[str, Any]  # perflab's own on each host (resources.perflab_host_cpu)
    backends: int | None  # the backends whose allocator was checked (a server here), else None

    def extra(self) -> dict[str, Any]:
        """The `resources` fields of this measurement alone: a server here's PSS and allocator check."""
        if self.backends is None:
            return {"perflab_host_cpu": self.perflab_cpu}
        pss = {"pss_end_bytes": self.rss.pss_end, "pss_peak_bytes": self.rss.pss_peak}
        return {"perflab_host_cpu": self.perflab_cpu, **pss, "preload_verified_backends": self.backends}


def measure(runner: Any, cell: Cell, server: Any, logs: Path, tracer: Any = None) -> tuple[list, list, dict[str, Any]]:
    """`tracer`: [observe] alloc of a server here (a server host's is the server's own, in its reads)."""
    spec, wl = runner.exp.file, workloads.of(runner.exp.file)
    remote: RemoteClient = runner.remote
    warmup = client.window_seconds(spec)[0]
    login = runner.kind.remote_login(server, remote.password)  # the role, on this cell's datadir
    argv, script = host_argv(runner, cell, login, remote)
    out = logs / wl.output_name
    clock = WindowClock(remote.rundir.link)
    profilers = _profilers(runner, cell, server)  # the server's perf and pmp: here, or on its host
    # [observe] host_speed, io where the server runs; a server host's clock read when they start and stop
    observers = remote_io.of_window(runner, server, None)
    armed = tracer.armed(server.pid, server.rundir) if tracer is not None else contextlib.nullcontext()
    try:
        with observers, StealSampler() as steal, profilers, armed:
            clock.begin()  # before pgbench starts, and again once it has ended: its log's times lie between
            w = _run(runner, cell, server, argv, out, profilers, tracer)
            alignment = clock.require()  # ClockAlignmentError: the window cannot be cut from the host's log
        if not server.alive():
            raise ServerCrashedError(f"{server.death()} during the run:\n{server.error_lines()}")
        fetch_log(remote, cell, server.rundir)
    finally:
        with contextlib.suppress(HostLostError):
            remote.rundir.link.run(["rm", "-rf", "--one-file-system", cell_dir(remote, cell)])
    launched, window = on_host_clock(alignment, w.launched, w.marks)
    summary, intervals = wl.window_output(spec, out, w.code, warmup, server, launched, window, cell.rate)
    # the profiles' phases on this machine's clock: from pgbench's launch, its window from the start mark
    window = (w.started, w.started, w.ended, w.origin - w.started)
    remote_profilers.store(runner, cell, profilers, window, intervals, summary)
    resources = remote_server.window_resources(runner, w.start, w.end, None, summary.transactions, w.rss)
    fields = remote.fields(*w.net, summary.transactions) | {"script": script} | cpu_fields(*w.cpu, summary.transactions)
    tracer_span = tracer.span if tracer is not None else remote_alloc.alloc_span(server)

    def covered(n: float) -> float:  # [observe] alloc's transactions: its counts' own span, at the window's rate
        return accounting.share(n, (w.origin, w.ended), tracer_span, runs_on=True)  # pgbench's tail

    measured = {
        "steal": lambda a, b: steal.cores(w.started + a, w.started + b),
        "summary": summary.to_dict(),
        "resources": resources | w.extra(),
        "sysbench_options": wl.effective_options(runner, argv[2:]),
        "client": fields | {"clock": clock.record()},
        **observers.fields(runner, window, intervals, summary),  # host_speed; io (popped by the cell)
    }
    server_clock = getattr(w.rss, "clock", None)  # a server host's, over the window: its tree's RSS aligned
    if isinstance(profilers, remote_profilers.RemoteProfilers):  # the server host's clock, read by its profilers
        measured["host_clock"] = profilers.clock.record()
    elif runner.server_host is not None and server_clock is not None:
        measured["host_clock"] = server_clock.record()
    if tracer is not None:  # a server here: summed over the postmaster and every process it forked
        alloc_fields(runner.results, cell.order, tracer, server.pid, measured, covered)
    elif runner.server_host is not None:
        measured["covered"] = covered  # popped by remote_server: its host's alloc
    return intervals, w.rss.samples, measured


def _profilers(runner: Any, cell: Cell, server: Any) -> Any:
    """[observe] perf and pmp of the postmaster's tree: on the server host (its clock read by them when
    pgbench starts and when they stop), or here as a local pgbench cell's."""
    if runner.server_host is not None:
        return remote_profilers.of_cell(runner, cell, server, None)
    return local_profilers(server, runner.exp.file.observe, runner.kind.profiles_tree)


def on_host_clock(
    alignment: Alignment, launched: float, marks: tuple[float, float]
) -> tuple[float, tuple[float, float]]:
    """This machine's launch and window marks (time.time()) on the host's wall clock, where pgbench
    stamped its log: less the shift that puts the host's times on this machine's clock."""
    return launched - alignment.shift_s, (marks[0] - alignment.shift_s, marks[1] - alignment.shift_s)


def _reads(runner: Any, server: Any) -> tuple[Any, Any]:
    """The server's counters and memory: the postmaster's tree here (every backend), or on its host."""
    if runner.server_host is not None:
        return remote_server.server_reads(runner, server)
    from perflab.places.proctree import TreeSampler, tree_counters

    return tree_counters, TreeSampler(server.pid)


def _run(
    runner: Any, cell: Cell, server: Any, argv: list[str], out: Path, profilers: Any, tracer: Any = None
) -> _Window:
    """pgbench on its host from its launch to its end: the window's marks, the server's counters and
    the host's interface and pgbench's CPU at both, perflab's own CPU on each host over it; the
    server's profilers over their phases."""
    from perflab.servers.postgresql.cell import _verified

    remote: RemoteClient = runner.remote
    warmup, seconds = client.window_seconds(runner.exp.file)
    margin = runner.exp.file.experiment.timeout_margin
    read, sampler = _reads(runner, server)
    if tracer is not None:  # a server here: alloc's counts over the sampler's span, as on a server host
        sampler = Spanning(sampler, tracer, server.pid, server.rundir)
    profilers.workload_starting()
    started, launched = time.monotonic(), time.time()
    with RemoteChild(remote.rundir, argv, out, "pgbench") as child:
        profilers.workload_started()  # the server's warm-up samplers (pmp: every backend as it connects)
        if warmup:
            client.sleep_until(started + warmup, child)
        start, begun, origin = accounting.WindowStart.take(server.pid, None, read), time.time(), time.monotonic()
        net_before, cpu_before = remote.net_bytes(), child.cpu_s()
        with sampler as rss:
            profilers.window_started()
            overheads = Overheads.of_cell(runner, server.pid, child.pid).begin()  # perflab's own CPU on each host
            local = runner.server_host is None  # its backends' allocator checked here, its PSS read
            backends = _verified(server, cell, child, pgbench.DATABASE) if local else None
            client.sleep_until(started + warmup + seconds, child)
            if local:
                rss.sample()  # the backends' PSS at the end mark
            end = accounting.WindowEnd.take(start, server.pid, read)  # the backends still live
            marks, ended = (begun, time.time()), time.monotonic()
            remote_alloc.end_mark(sampler)  # [observe] alloc's counts end here too (pgbench runs on)
            cpu_after, net_after = child.cpu_s(), remote.net_bytes()
            perflab_cpu = overheads.finish()
            child.signal_client("ALRM")  # as -T would: each client finishes its transaction, the logs flushed
            code = client.wait(child, warmup + seconds + pgbench.TAIL_S, margin, "pgbench")
        cpu_after = cpu_after if cpu_after is not None else child.cpu_at_exit_s()  # it ended inside the window
    if child.lost:
        raise HostLostError(child.lost, "the host's cells fail; `perflab doctor --clean` once it is back")
    net, cpu = (net_before, net_after), (cpu_before, cpu_after)
    return _Window(started, origin, ended, launched, marks, code, start, end, rss, net, cpu, perflab_cpu, backends)


# $0: the cell's directory on the host: its per-transaction logs, one a line
_LOGS = 'for f in "$0"/' + LOG + '.*; do [ -f "$f" ] && echo "$f"; done; true'


def fetch_log(remote: RemoteClient, cell: Cell, local: Path) -> list[Path]:
    """pgbench's per-transaction logs (`pgbench_log.PID[.THREAD]`), copied from the host into `local`."""
    link = remote.rundir.link
    fetched = []
    for path in link.run(["sh", "-c", _LOGS, cell_dir(remote, cell)]).stdout.split():
        target = local / Path(path).name
        link.get(path, target)
        fetched.append(target)
    return fetched
