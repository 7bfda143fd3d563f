"""A cell's client on another host (`[experiment] client_host`, docs/hosts.md): sysbench or pgbench
runs there over SSH against the server (this machine's, listening only on the address the host reaches
us by, or a server host's), with a login whose password is made for the run. Its output is streamed
back line by line into the cell's local output file, so the start watch, the deadline and the parsers
are a local client's (workloads/client.py). The connection options (password included) go to a file
only root reads in the host's run directory (sysbench's `--config-file`, pgbench's PGPASSFILE), never
on a command line.

Recorded per cell (`client` fields): the host, the bytes its network interface toward the server
moved per transaction over the window, the round trip to the host, its CPU there over the window,
and `clock`, the host's clock read before the client started and after it ended (a client cut at
perflab's marks, pgbench, has them put on that clock: hosts/clock.py). With [observe] perf / pmp
targets naming the client, it is profiled on its host (observers/paired.on_host).

    remote = RemoteClient.open(hosts, "load", workloads.of(spec))   # hosts/server.run_hosts, for the whole run
    client_end = ClientOnHost(runner, remote, cell)                 # the window's client (run/window.py)
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab import workloads
from perflab import allocators
from perflab.errors import HostLostError, ToolMissingError, WorkloadError
from perflab.hosts import libraries
from perflab.hosts.child import RemoteChild
from perflab.hosts.clock import Alignment, WindowClock
from perflab.hosts.rundir import RunDir
from perflab.hosts.session import Hosts
from perflab.hosts.place import read_counters
from perflab.hosts.target import WHICH, install_hint
from perflab.hosts.turns import AGENT, SIGNALS, GroupTurns, HostTurns, TurnAgent
from perflab.observers.paired import CLIENT, host_site, on_host
from perflab.places import Site
from perflab.places.procfs import ProcCounters
from perflab.workloads.turn_latency import WRAPPER
from perflab.workloads import client_variant, sysbench
from perflab.run import accounting
from perflab.run.context import Runner
from perflab.spec.matrix import Cell
from perflab.spec.schema import ExperimentFile

if TYPE_CHECKING:
    from perflab.servers.managed import Managed


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
    _agent: TurnAgent | None = None  # the interleaved design's turns there (hosts/turns.py), once started
    _signals: TurnAgent | None = None  # its signals-only agent (pgbench's seats), once started

    @classmethod
    def open(cls, hosts: Hosts, name: str, workload: Any, address: str | None = None) -> RemoteClient:
        """ToolMissingError (exit 3) naming the package when the host lacks the workload's client
        (`workload.client_packages`, looked for in `client_dirs` first). `address`: the server's (on a
        server host, hosts/server.py); else this machine's as the host reaches it."""
        link = hosts.link(name)
        address = address or link.local_address()
        tool, package = next(iter(workload.client_packages.items()))
        found = link.run(["sh", "-c", WHICH, tool, *workload.client_dirs]).stdout.strip()
        if not found:
            raise ToolMissingError(f"host {name} has no {tool}", install_hint(package, link.target))
        route = link.run(["ip", "-o", "route", "get", address]).stdout.split()
        interface = route[route.index("dev") + 1] if "dev" in route[:-1] else None
        version = workload.host_version(link, found)
        return cls(hosts, name, address, secrets.token_hex(16), found, interface, version)

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

    def turn_agent(self) -> TurnAgent:
        """The host's turn agent (hosts/turns.py), started with the first seat there."""
        if self._agent is None:
            self._agent = TurnAgent.start(self.rundir, [self.binary, self.copy(AGENT)])
        return self._agent

    def signal_agent(self) -> TurnAgent:
        """The host's signals-only agent (hosts/turns.SIGNALS), started with the first seat there that needs it."""
        if self._signals is None:
            self._signals = TurnAgent.start(self.rundir, ["sh", "-c", SIGNALS])
        return self._signals

    def command(
        self, spec: ExperimentFile, cell: Cell, socket: Path, connect: list[str]
    ) -> tuple[list[str], str | None]:
        """sysbench's argv on the host, and the path there of the workload's script when it is a local file."""
        command = sysbench.cell_argv(spec, cell, socket, connect=connect, binary=self.binary)
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


class ClientOnHost:
    """The client on its host as the window drives it (run/window.py's ClientEnd): its command there
    (the workload's host_command), its output streamed back, the host's clock read before it starts
    and after it ends (a client cut at perflab's marks has them put on the host's clock), its CPU and
    the host's interface read at the window's marks; pgbench's log fetched back."""

    here = False

    def __init__(self, runner: Runner, remote: RemoteClient, cell: Cell) -> None:
        self.runner, self.remote, self.cell = runner, remote, cell
        self.wl = workloads.of(runner.exp.file)
        self.password: str | None = remote.password
        self.link = remote.rundir.link
        self.clock = WindowClock(self.link)
        self.alignment: Alignment | None = None
        self.script: str | None = None
        self.local: Path | None = None  # the cell's local directory, where its log is fetched
        self.preload: str | None = None  # the client variant's preload and library there (variant_env)
        self.library: str | None = None

    def command(
        self, runner: Runner, cell: Cell, server: Managed, seconds: int | None = None
    ) -> tuple[list[str], dict[str, str] | None]:
        login = runner.kind.remote_login(server, self.remote.password)
        argv, env, self.script = self.wl.host_command(runner.exp.file, cell, server, login, self.remote, seconds)
        self.local = server.rundir
        return argv, {**(env or {}), **self.variant_env(cell)}

    def variant_env(self, cell: Cell) -> dict[str, str]:
        """The client variant's environment there: its client_env, its preload (LD_PRELOAD: the host's
        allocator, or a file here copied there) and its client library (LD_LIBRARY_PATH: a directory
        there holding a copy under the soname sysbench links), as a local client's
        (workloads/client_variant.py)."""
        rundir, extra = self.remote.rundir, dict(cell.client_env)
        preload = cell.client_preload if cell.client_preload != allocators.GLIBC else None
        self.preload = libraries.library(rundir, preload) if preload else None
        if self.preload:
            extra["LD_PRELOAD"] = self.preload
        self.library = libraries.library(rundir, cell.client_library) if cell.client_library else None
        if self.library:
            directory = f"{rundir.path}/client-lib-{cell.order:04d}"
            ln = 'mkdir -p "$0" && ln -sfn "$1" "$0/$2"'
            rundir.link.run(["sh", "-c", ln, directory, self.library, client_variant.SONAME])
            extra["LD_LIBRARY_PATH"] = directory
        return extra

    def prove(self, child: Any, cell: Cell) -> dict[str, Any]:
        """The row's client variant fields, once ld.so has mapped its libraries there (as a local
        client's: client_variant.proven); none without a variant."""
        fields = client_variant.configured(cell)
        if not (cell.client_preload or cell.client_library) or not self.wl.links_client_library:
            return fields if any(fields.values()) else {}
        deadline, who = time.monotonic() + client_variant.EXEC_DEADLINE_S, f"{self.wl.name} on host {self.remote.name}"
        pid = None  # the client's, read once: env(1) execs it in the same process
        while True:
            pid = pid or child.client_pid()
            mapped = libraries.mapped(self.link, pid) if pid else set()
            found = client_variant.client_libraries(mapped, self.library)
            if found:
                return client_variant.proven(cell, mapped, found, self.preload, self.library, f"{who} (pid {pid})")
            if child.poll() is not None or time.monotonic() > deadline:
                raise WorkloadError(f"{who} did not map its client library within {client_variant.EXEC_DEADLINE_S:.0f}s",
                                    "its output is in the cell's logs/")  # fmt: skip
            time.sleep(0.05)

    def versions(self, fields: dict[str, Any]) -> dict[str, Any]:
        """`fields` with the packages that ship the client's preload and library there."""
        for path, key in (("preload_library", "preload_version"), ("library_mapped", "library_version")):
            if fields.get(path):
                fields[key] = libraries.package_of(self.remote.rundir, fields[path])
        return fields

    def profilers(self, runner: Runner, cell: Any, server: Managed) -> Any:
        """The client's perf and pmp on its host, in its `client-profile-NNNN/` there."""
        rundir = self.remote.rundir
        there = f"{rundir.path}/client-profile-{cell.order:04d}"
        return on_host(runner.exp.file.observe, CLIENT, None, server.rundir, rundir, there, None)

    def start(self, argv: list[str], env: dict[str, str] | None, out: Path) -> RemoteChild:
        self.clock.begin()  # before it starts, and again once it has ended: its times lie between
        return self.seat_start(argv, env, out)

    def launched(self, child: Any, cell: Cell, out: Path, profilers: Any) -> dict[str, Any]:
        return self.prove(child, cell)

    def running(self, child: Any, profilers: Any) -> None:
        profilers.workload_started(child.client_pid() if child is not None else None)  # its pid there, its threads started

    def pid(self, child: Any) -> int | None:
        return None  # none of this machine's CPU

    def profiled_pid(self, child: Any) -> int | None:
        return child.client_pid()  # sysbench's own there (the wrapper's child), which perf there folds

    def connections(self, child: Any) -> int:
        return child.sockets()  # the client's own there (the wrapper's child)

    def recording(self, local: Path) -> Site:
        """Where perf of its clients records (an interleaved group's, observers/seats.py): on its host,
        in a directory of the run's there named as `local`, removed once stored."""
        rundir = self.remote.rundir
        return host_site(rundir, f"{rundir.path}/{local.name}", WindowClock(rundir.link), local.parent)

    def host_pid(self, child: Any) -> int | None:
        return child.pid  # perflab's own CPU there leaves the client's out

    def sampler(self, child: Any) -> Any:
        return None

    def mark(self, child: Any, exited: bool) -> tuple[int | None, float | None]:
        """(the host's interface bytes, the client's CPU) now; its CPU at exit once it has ended."""
        net = self.remote.net_bytes()
        cpu = None if exited else child.cpu_s()
        if cpu is None and child.poll() is not None and not child.lost:
            cpu = child.cpu_at_exit_s()
        return net, cpu

    def end_now(self, child: Any) -> None:
        self.wl.end_now(child)

    def after(self, child: Any, tail: bool) -> None:
        if child.lost:
            raise HostLostError(child.lost, "the host's cells fail; `perflab doctor --clean` once it is back")
        if tail:  # its figures are cut from its log at the marks: on the host's clock, the log here
            self.alignment = self.clock.require()  # ClockAlignmentError: the window cannot be cut
            assert self.local is not None
            self.wl.fetch_log(self.remote, self.cell, self.local)
        else:
            self.clock.finish()

    def on_its_clock(self, launched: float, marks: tuple[float, float]) -> tuple[float, tuple[float, float]]:
        if self.alignment is None:
            return launched, marks
        shift = self.alignment.shift_s  # this machine's epochs on the host's wall clock, where it stamped its log
        return launched - shift, (marks[0] - shift, marks[1] - shift)

    def fields(self, start: Any, child: Any, transactions: float, marks: tuple[Any, Any], rss: Any, tail: bool) -> dict:
        (net_before, cpu_before), (net_after, cpu_after) = marks
        covered = start.covered(transactions)
        return (
            self.remote.fields(net_before, net_after, covered)
            | {"script": self.script}
            | cpu_fields(cpu_before, cpu_after, covered)
            | {"clock": self.clock.record()}
        )

    # a seat's client (the interleaved design, run/seat.py): on its host, its turns taken by the
    # host's turn agent (hosts/turns.py)

    @property
    def binary(self) -> str:
        return self.remote.binary

    def turn_clock(self, rundir: Path, threads: int) -> HostTurns:
        return self.remote.turn_agent().turns(self.remote.rundir.path, threads)

    def turns_test(self, test: str) -> tuple[str, str]:
        """(turns.lua, the test it loads) copied into the host's run directory (a sysbench test by name stays)."""
        self.script = self.remote.script(test)
        return self.remote.copy(WRAPPER), self.script or test

    def config_file(self, server: Managed, login: dict[str, str], order: int) -> str:
        return self.remote.write_config({k: v for k, v in login.items() if k != "db-driver"}, order)

    def seat_env(self, cell: Cell, server: Managed, turns: dict[str, str]) -> dict[str, str]:
        return {**self.variant_env(cell), **turns}

    def seat_start(self, argv: list[str], env: dict[str, str] | None, out: Path) -> RemoteChild:
        """Started there in `env` (through env(1)), its output streamed back into `out`."""
        prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        return RemoteChild(self.remote.rundir, [*prefix, *argv], out, self.wl.name, self.wl.stamps_lines)

    def seat_started(self, child: Any, cell: Cell, out: Path) -> dict[str, Any]:
        """The row's `client` fields: where it ran, and its version there."""
        r = self.remote
        return {"host": r.name, "address": r.address, "version": r.version, "script": self.script} | self.prove(
            child, cell
        )

    def turns(self, child: Any, clock: Any) -> HostTurns | GroupTurns:
        if clock is None:  # a client that counts its own turns (pgbench's log): its pauses and resumes only
            return GroupTurns(self.remote.signal_agent(), child.pid)
        clock.bind(child.pid)  # its process group there
        return clock

    def fetched_log(self, local: Path) -> float:
        """pgbench's per-transaction log, ended, copied from the host into `local`; the shift from this
        machine's epochs to the host's, which stamped it (ClockAlignmentError: the turns cannot be cut)."""
        alignment = self.clock.require()
        self.wl.fetch_log(self.remote, self.cell, local)
        return alignment.shift_s

    def counters(self, child: Any) -> ProcCounters:
        """Its CPU, faults and context switches on its host now (ProcessLookupError: gone)."""
        pid = child.client_pid()
        if pid is None:
            raise ProcessLookupError(f"{self.wl.name} on {self.remote.name} has exited")
        return read_counters(self.link, pid)


def cpu_fields(before: float | None, after: float | None, transactions: float) -> dict[str, Any]:
    """The client's CPU over the window, on its host: at exit less at the window's start."""
    used = after - before if before is not None and after is not None else None
    per = accounting.per_txn(transactions)
    return {
        "cpu_s": round(used, 3) if used is not None else None,
        "cpu_us_per_txn": per(used * 1e6) if used is not None else None,
    }
