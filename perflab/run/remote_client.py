"""A cell's client on another host (`[experiment] client_host`, docs/hosts.md): sysbench runs there
over SSH against this machine's server, which listens only on the address the host reaches us by,
with a login whose password is made for the run. sysbench's output is streamed back line by line
into the cell's local `sysbench.txt`, so the start watch, the deadline and the parsers are the local
client's (workloads/client.py). The connection options (password included) go to a file readable by
root only in the host's run directory (`--config-file`), never on a command line.

Recorded per cell (`client` fields): the host, the bytes its network interface toward the server
moved per transaction over the window, and the round trip to the host (its clock reading, ms).
With [observe] perf / pmp targets naming the client, sysbench is profiled on its host
(observers/remote_client_profilers.py) and `client.clock` records that host's clock readings.
pgbench runs there too, by its server kind's own measurement (Kind.remote_client_measure:
servers/postgresql/client_host.py) on this module's RemoteClient and RemoteChild.

    remote = RemoteClient.open(hosts, "load", workloads.of(spec))   # run/remote_server.run_hosts, for the whole run
    intervals, rss, fields = measure(runner, cell, server, logs)
"""

from __future__ import annotations

import contextlib
import functools
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TextIO

from perflab.errors import HostLostError, ToolMissingError
from perflab.hosts.rundir import RunDir
from perflab.hosts.session import Hosts
from perflab.workloads import client
from perflab.run import accounting, remote_server
from perflab.observers.host_overhead import Overheads
from perflab.observers.resources import StealSampler
from perflab.workloads import sysbench
from perflab.spec import Cell


@dataclass
class RemoteClient:
    hosts: Hosts
    name: str
    address: str  # this machine's address as the host reaches it: the server's bind address
    password: str  # the run's login (hex)
    binary: str  # the workload's client (sysbench, pgbench): its path on the host
    interface: str | None  # the host's interface toward `address`
    version: str | None = None  # the client's `--version` line there (a local client's is meta `host`'s)
    _copied: set[str] = field(default_factory=set)  # files copied into the run directory

    @classmethod
    def open(cls, hosts: Hosts, name: str, workload: Any, address: str | None = None) -> RemoteClient:
        """ToolMissingError (exit 3) naming the package when the host lacks the workload's client
        (`workload.client_packages`, looked for in `client_dirs` first). `address`: the server's (on a
        server host, run/remote_server.py); else this machine's as the host reaches it."""
        link = hosts.link(name)
        address = address or link.local_address()
        tool, package = next(iter(workload.client_packages.items()))
        found = link.run(["sh", "-c", remote_server._WHICH, tool, *workload.client_dirs]).stdout.strip()
        if not found:
            raise ToolMissingError(
                f"host {name} has no {tool}", f"install it there: `apt-get install {package}` on {link.target}"
            )
        route = link.run(["ip", "-o", "route", "get", address]).stdout.split()
        interface = route[route.index("dev") + 1] if "dev" in route[:-1] else None
        return cls(hosts, name, address, secrets.token_hex(16), found, interface, client_version(link, found))

    @property
    def rundir(self) -> RunDir:
        return self.hosts.rundir(self.name)

    def write_private(self, name: str, text: str) -> str:
        """A file only its owner reads (a password in it), in the host's run directory; its path."""
        path = f"{self.rundir.path}/{name}"
        self.hosts.link(self.name).run(["sh", "-c", 'umask 077; mkdir -p "${0%/*}"; cat > "$0"', path], stdin=text)
        return path

    def write_config(self, options: dict[str, str], order: int) -> str:
        """sysbench's connection options in a file only root reads, on the host; its path."""
        return self.write_private(f"sysbench-{order:04d}.conf", "".join(f"{k}={v}\n" for k, v in options.items()))

    def copy(self, local: Path) -> str:
        """A local file copied into the host's run directory (once per run); its path there."""
        remote = f"{self.rundir.path}/{local.name}"
        if remote not in self._copied:
            self.hosts.link(self.name).put(local, remote)
            self._copied.add(remote)
        return remote

    def script(self, test: str) -> str | None:
        """A workload given as a local .lua file, copied into the host's run directory (once); its path there."""
        local = Path(test)
        if not (test.endswith(".lua") and local.is_file()):
            return None  # one of sysbench's own tests, found by the host's sysbench
        return self.copy(local)

    def command(self, spec: Any, cell: Cell, socket: Path, connect: list[str]) -> tuple[list[str], str | None]:
        """sysbench's argv on the host, and the path there of the workload's script when it is a local file."""
        command = client.argv(spec, cell, socket, connect=connect, binary=self.binary)
        script = self.script(spec.workload.test)
        if script is not None:  # argv: [sysbench, test, ...]
            command[1] = script
        return command, script

    def net_bytes(self) -> int | None:
        """Bytes received plus sent by the host's interface toward the server, now."""
        text = self.hosts.link(self.name).run(["cat", "/proc/net/dev"]).stdout
        for line in text.splitlines():
            name, _, counters = line.partition(":")
            if name.strip() == self.interface and counters.split():
                fields = counters.split()
                return int(fields[0]) + int(fields[8])
        return None

    def fields(self, before: int | None, after: int | None, transactions: float) -> dict[str, Any]:
        moved = after - before if before is not None and after is not None else None
        rtt = self.hosts.hosts[self.name].clock_start.rtt_s
        return {
            "host": self.name,
            "address": self.address,
            "interface": self.interface,
            "network_bytes": moved,
            "bytes_per_txn": round(moved / transactions, 1) if moved is not None and transactions else None,
            "rtt_ms": round(rtt * 1000, 3),
            "version": self.version,
        }


def client_version(link: Any, binary: str) -> str | None:
    """The first line of `BINARY --version` on the host ("sysbench 1.0.20", "pgbench (PostgreSQL) 15.14"),
    as this machine's meta `host` records its own client's; None when it says nothing."""
    done = link.run([binary, "--version"])
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if lines else None


# $0: where bash writes `times` (its children's user and system CPU) once sysbench has exited; "$@": sysbench
_CLIENT = '"$@" 2>&1; s=$?; times > "$0"; exit $s'
# $0: the wrapper's pid (bash); its child is sysbench: its /proc stat line, then the clock tick
_CHILD_STAT = "c=$(cat /proc/$0/task/$0/children); cat /proc/${c%% *}/stat; getconf CLK_TCK"
# $0: the wrapper's pid: its child's (the client's) pid
_CHILD_PID = "c=$(cat /proc/$0/task/$0/children) && echo ${c%% *}"
# $0: the wrapper's pid, $1: a signal: sent to its child (the client)
_SIGNAL_CHILD = 'c=$(cat /proc/$0/task/$0/children) && kill -s "$1" ${c%% *}'
_TIMES = re.compile(r"(\d+)m([\d.]+)s\s+(\d+)m([\d.]+)s")


def stat_cpu_s(text: str) -> float | None:
    """user + system CPU seconds from a /proc/PID/stat line followed by CLK_TCK's line."""
    lines = text.strip().splitlines()
    if len(lines) != 2 or ")" not in lines[0] or not lines[1].isdigit():
        return None
    fields = lines[0].rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / int(lines[1]) if len(fields) > 12 else None


def times_cpu_s(text: str) -> float | None:
    """bash's `times`: the second line (its children's) "0m1.234s 0m0.567s" -> 1.801."""
    found = _TIMES.findall(text)
    if len(found) < 2:
        return None
    um, us, sm, ss = found[1]
    return int(um) * 60 + float(us) + int(sm) * 60 + float(ss)


class RemoteChild:
    """The workload's client (`tool`: sysbench, pgbench) on the host, as workloads/client.py drives a local
    Child: poll, wait, kill, `started`; its output (stderr merged) copied into `out` as it comes."""

    def __init__(self, rundir: RunDir, argv: list[str], out: Path, tool: str = "sysbench") -> None:
        self.rundir, self.rusage, self.tool = rundir, None, tool  # no rusage here: its CPU is the host's (cpu_s)
        self.times = f"{rundir.path}/times-{out.parent.name}"  # bash's `times` once sysbench has exited
        self.started = time.monotonic()
        self.lost: str | None = None
        self._code: int | None = None
        self._done = threading.Event()
        sink = out.open("w", encoding="utf-8")  # before the start watch reads it
        try:
            self.proc, self.pid = rundir.start(["bash", "-c", _CLIENT, self.times, *argv], measured=True)
        except BaseException:
            sink.close()
            raise
        self._thread = threading.Thread(target=self._pump, args=(sink,), name="remote-client", daemon=True)
        self._thread.start()

    def _pump(self, sink: TextIO) -> None:
        try:
            with sink:
                for line in self.proc.lines():
                    sink.write(line)
                    sink.flush()
            status = self.proc.wait(timeout=30).status
            if status is None:  # no exit status: the connection ended under it (a host that dropped off)
                self.lost = f"host {self.rundir.link.name}: the connection ended before {self.tool} did"
            self._code = status if status is not None else -9
        except (HostLostError, TimeoutError) as exc:
            self.lost = getattr(exc, "message", None) or f"host {self.rundir.link.name}: {exc}"
            self._code = -9
        finally:
            self._done.set()

    def signal_client(self, name: str) -> None:
        """Send signal `name` to the client alone (not its wrapper, which writes `times` once it exits)."""
        with contextlib.suppress(HostLostError):
            self.rundir.link.run(["sh", "-c", _SIGNAL_CHILD, str(self.pid), name])

    def client_pid(self) -> int | None:
        """The client's own pid on its host (the wrapper's child: bash waits for it); None once it has exited."""
        found = self.rundir.link.run(["sh", "-c", _CHILD_PID, str(self.pid)]).stdout.strip()
        return int(found) if found.isdigit() else None

    def cpu_s(self) -> float | None:
        """The client's CPU so far, on its host (None when it cannot be read: it has exited)."""
        return stat_cpu_s(self.rundir.link.run(["sh", "-c", _CHILD_STAT, str(self.pid)]).stdout)

    def cpu_at_exit_s(self) -> float | None:
        """The client's whole CPU, from bash's `times` after it exited (None: killed, or not written)."""
        done = self.rundir.link.run(["cat", self.times])
        return times_cpu_s(done.stdout) if done.status == 0 else None

    def poll(self) -> int | None:
        return self._code if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise TimeoutError(f"{self.tool} on {self.rundir.link.name} still running after {timeout}s")
        assert self._code is not None
        return self._code

    def kill(self) -> None:
        if not self._done.is_set():
            with contextlib.suppress(HostLostError):
                self.rundir.signal(self.pid, "KILL")
            self._done.wait(10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


@dataclass
class _Window:
    """The window's readings with the client on its host (times on this machine's CLOCK_MONOTONIC)."""

    started: float
    origin: float
    ended: float
    code: int
    start: Any
    end: Any
    net: tuple[int | None, int | None]  # the client host's interface, at the window's start and end
    cpu: tuple[float | None, float | None]  # sysbench's CPU then
    rss: Any
    perflab_cpu: dict[str, Any]


def measure(
    runner: Any, cell: Cell, server: Any, logs: Path, tracer: Any = None
) -> tuple[list[dict[str, Any]], list, dict[str, Any]]:
    """run/cell.py's measure with the client on the remote host: the server's resources as always;
    the client's network per transaction instead of its CPU (which is the other host's). With the
    server on a host too, its profilers and counters as with the client here (run/remote_window.py).
    The canary and the I/O observer run where the server runs (remote_io.of_window); `tracer`: [observe]
    alloc of a server here (AllocTracer), its window the RSS sampler's span, as on a server host."""
    from perflab.run import remote_window
    from perflab.observers import remote_client_profilers, remote_io, remote_profilers, status
    from perflab.observers.alloc import remote as remote_alloc

    own = runner.kind.remote_client_measure(runner, cell, server, logs, tracer)  # pgbench: postgresql/client_host.py
    if own is not None:
        return own
    remote: RemoteClient = runner.remote
    spec = runner.exp.file
    warmup = client.window_seconds(spec)[0]
    login = runner.kind.remote_login(server, remote.password)
    connect = [f"--db-driver={login.pop('db-driver')}", f"--config-file={remote.write_config(login, cell.order)}"]
    command, script = remote.command(spec, cell, server.socket, connect)
    out = logs / "sysbench.txt"
    read, sampler = remote_server.server_reads(runner, server)  # on the server's host when it runs there
    there = runner.server_host is not None
    clock = getattr(sampler, "clock", None)  # the server host's clock over the window (a MariaDB server's)
    observers = remote_io.of_window(runner, server, clock)  # [observe] host_speed, io: where the server runs
    if tracer is not None:  # a server here: the counts over the RSS sampler's span, as on a server host
        sampler = remote_alloc.Spanning(sampler, tracer, server.pid, server.rundir)
    armed = tracer.armed(server.pid, server.rundir) if tracer is not None else contextlib.nullcontext()
    # perf and pmp of the server where it runs: on its host, or here as a local cell's; of the client
    # (targets naming it) on the client host (remote_client_profilers.py); the server's counters over
    # TCP as the run's login, either way
    observe = remote_client_profilers.of_target(spec.observe, "server")
    if there:
        of_server = remote_profilers.of_cell(runner, cell, server, clock, observe)
    else:
        of_server = local_profilers(server, observe, runner.kind.profiles_tree)
    profilers = remote_client_profilers.of_cell(runner, cell, server, of_server)
    if there:
        counters = remote_window.status_sampler(runner, server, remote.password)
    else:  # the server here: over its socket, as a local cell's
        counters = status.of_server(server) if runner.exp.file.observe.status else None
    status_ = contextlib.closing(counters) if counters else contextlib.nullcontext()
    with observers, profilers, status_, StealSampler() as steal, armed:
        w = _run(runner, server, command, out, (read, sampler), profilers, counters)
    summary, intervals = client.read_output(out, w.code, warmup)
    window = (w.started, w.origin, w.ended, warmup)
    remote_profilers.store(runner, cell, profilers, window, intervals, summary)
    measured = {
        "steal": lambda a, b: steal.cores(w.origin + a, w.origin + b),
        # [observe] alloc's transactions over its counts' own span: popped by remote_server (a server host's), or below
        "covered": functools.partial(
            accounting.share,
            window=(w.origin + warmup, w.ended),
            span=(tracer.span if tracer is not None else remote_alloc.alloc_span(server)),
        ),
        "summary": summary.to_dict(),
        "resources": remote_server.window_resources(runner, w.start, w.end, None, summary.transactions, w.rss)
        | ({"pss_end_bytes": runner.kind.pss_bytes(server)} if not there else {})
        | {"perflab_host_cpu": w.perflab_cpu},
        "sysbench_options": sysbench.effective_options(runner.sysbench_defaults, command),
        "client": remote.fields(*w.net, w.start.covered(summary.transactions))
        | {"script": script}
        | cpu_fields(*w.cpu, w.start.covered(summary.transactions)),
    }
    if there:  # the server's host's clock over the window (its RSS aligned with it), its counters
        measured["host_clock"] = clock.record() if clock is not None else None
    if profilers.client is not None:  # the client host's clock, its profiles' samples aligned with it
        measured["client"]["clock"] = profilers.client.clock.record()
    if counters is not None:
        measured["server_status"] = counters.figures(summary.transactions, summary.queries, summary.total_time_s)
        measured["status_samples"] = counters.samples
    measured.update(observers.fields(runner, window, intervals, summary))  # host_speed; io (popped by the cell)
    if tracer is not None:  # a server here: its counts and stacks as a local cell's
        from perflab.observers.profilers import alloc_fields

        alloc_fields(runner.results, cell.order, tracer, server.pid, measured, measured["covered"])
    if not there:
        measured.pop("covered")  # a server here: its cell stores what is left
    return intervals, w.rss.samples, measured


def _run(
    runner: Any, server: Any, command: list[str], out: Path, reads: tuple, profilers: Any, counters: Any
) -> _Window:
    """sysbench on its host from its start to its end, the observers over their phases."""
    remote: RemoteClient = runner.remote
    read, sampler = reads
    warmup, seconds = client.window_seconds(runner.exp.file)
    margin = runner.exp.file.experiment.timeout_margin
    profilers.workload_starting()
    started = time.monotonic()
    with RemoteChild(remote.rundir, command, out) as child:
        origin = client.StartWatch(out, child, margin).wait()
        profilers.workload_started(child)  # the client's profilers: of its pid there, its threads started
        if warmup:
            client.sleep_until(origin + warmup, child)
        start = accounting.WindowStart.take(server.pid, None, read, window=(origin + warmup, seconds))
        before = remote.net_bytes()
        cpu_before = child.cpu_s()
        with sampler as rss, counters or contextlib.nullcontext():
            profilers.window_started()
            overheads = Overheads.of_cell(runner, server.pid, child.pid).begin()  # perflab's own CPU on each host
            code = client.wait(child, warmup + seconds, margin)
            ended, perflab_cpu = min(time.monotonic(), origin + warmup + seconds), overheads.finish()
        end, after = accounting.WindowEnd.take(start, server.pid, read), remote.net_bytes()
        cpu_after = child.cpu_at_exit_s() if not child.lost else None
    if child.lost:
        raise HostLostError(child.lost, "the host's cells fail; `perflab doctor --clean` once it is back")
    return _Window(started, origin, ended, code, start, end, (before, after), (cpu_before, cpu_after), rss, perflab_cpu)


def local_profilers(server: Any, observe: Any, tree: bool = False) -> Any:
    """[observe] perf and pmp of a server here (`observe`: of the server alone), as a local cell's
    (Profilers; `tree`: its process tree, Kind.profiles_tree)."""
    from perflab.observers import remote_profilers
    from perflab.observers.profilers import Profilers

    if observe.perf is None and observe.pmp is None:
        return remote_profilers.NoProfilers()
    alone = observe.model_copy(update={"host_speed": False})  # the canary: remote_io.of_window's, not a second
    return Profilers(alone, server.pid, server.rundir, tree=tree)


def cpu_fields(before: float | None, after: float | None, transactions: float) -> dict[str, Any]:
    """The client's CPU over the window, on its host: at exit less at the window's start."""
    used = after - before if before is not None and after is not None else None
    per = accounting.per_txn(transactions)
    return {
        "cpu_s": round(used, 3) if used is not None else None,
        "cpu_us_per_txn": per(used * 1e6) if used is not None else None,
    }
