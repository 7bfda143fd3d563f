"""A cell's server on another host (`[experiment] server_host`, docs/hosts.md).

The dataset is prepared here, by this machine's installed server, as for a local server; its
snapshot is copied into the host's run directory over SFTP once per run (a compressed tar: hosts/trees.py), and each
cell restores its datadir from that copy on the host. The host's own installed server runs the
cell (Kind.remote_server: its option file written here and copied there), listening only on the
host's address as this machine reaches it, with a login whose password is made for the run. The
client runs here, or on the client host (hosts/client.py), against that address. The server's
CPU, faults and context switches are read from the host's /proc at the window's start and end, its
RSS once a second there (hosts/place.py); with [observe] alloc, its allocation
counter is preloaded there and read over the window that RSS sampler spans (observers/alloc/
remote.py); with [observe] host_speed and io, the canary and the server's I/O are observed there too
(observers/beside.py). Each cell records where its server ran in `build.host`: the host's name, ssh target,
address, port and fingerprint.

    with run_hosts(runner, workdir):        # run/scheduler.py, for the whole run
        row = runner.run(cell, snapshot, workdir)   # the server's steps on the host: HostStage
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab import allocators, hostinfo
from perflab.errors import AllocatorNotMappedError, HostLostError, ToolMissingError
from perflab.hosts import libraries
from perflab.servers import identity
from perflab.hosts.clock import WindowClock
from perflab.hosts.place import HostPlace
from perflab.hosts.preflight import client_observer_packages, observer_packages
from perflab.hosts.rundir import RunDir
from perflab.hosts.session import Hosts, RemoteProbe
from perflab.hosts.target import WHICH, parse_target
from perflab.hosts.transport import Connection
from perflab.hosts.trees import put_tree, shipped
from perflab.builds import Build
from perflab import workloads
from perflab.run import storage
from perflab.servers import dataset
from perflab.observers.alloc.profile import alloc_fields
from perflab.observers.alloc.tracer import AllocTracer
from perflab.observers.host_binaries import HostStarts, HostSymbolizer
from perflab.observers.paired import host_site
from perflab.places import Site
from perflab.run.allocator_proof import linked_allocator
from perflab.run.server_logs import keep_logs
from perflab.run.storage import Storage
from perflab.run.context import Runner
from perflab.spec.matrix import Cell
from perflab.spec.hosts import client_hosts, server_here, server_hosts

if TYPE_CHECKING:
    from perflab.servers.managed import Managed

# A cell's datadir from the snapshot there, as a restore here makes it (places/copy.clone_file): the
# snapshot keeps its holes there (tar --sparse). On tmpfs, `cp -a` copies them as holes and each file
# whose blocks are fewer than its length is then fallocated (here: places/copy._data_copy); on a disk,
# `--sparse=never` writes them as zeros, as a byte copy here does (cp clones first where the filesystem
# shares extents, as here). The server's first writes then allocate nothing on either place (InnoDB's
# 256 MiB redo log is mostly holes).
_RESTORE = 'mkdir -p "$0" && cp -a "$1" "$2"'
_ALLOCATE = """ && find "$2" -type f -printf '%s %b %p\\n' | while read -r size blocks path; do
  if [ $((blocks * 512)) -lt "$size" ]; then fallocate -l "$size" "$path" || exit 1; fi
done"""
_RESTORE_ON_DISK = 'mkdir -p "$0" && cp -a --sparse=never "$1" "$2"'
# the ports listening on the host: /proc/net/tcp{,6}, state 0A (LISTEN), local port in hex
_LISTENING = "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null"


@dataclass
class ServerHost:
    """The run's server host: its run directory, its address, its server's binaries and version."""

    hosts: Hosts
    name: str
    address: str  # the host's address as this machine reaches it: the server listens there only
    password: str  # the run's login (hex), never on a command line nor in a result
    binaries: dict[str, str]  # tool -> its path on the host
    version: str  # the host's server, as `mariadbd --version` says it
    sha256: str  # of the host's server binary ("" when sha256sum is not there)
    datadirs: str = ""  # where the datadirs and the snapshots are there: the run directory, or one on disk
    storage: Storage | None = None  # what `datadirs` is on there (run/storage.describe_on): its device for io
    _snapshots: dict[Path, str] = field(default_factory=dict)  # a local snapshot -> its copy on the host
    _trees: dict[Path, str] = field(default_factory=dict)  # a build's local directory -> its copy there

    @classmethod
    def open(cls, hosts: Hosts, name: str, kind: Any) -> ServerHost:
        """ToolMissingError (exit 3) naming the package when the host lacks the server or its client."""
        link = hosts.link(name)
        binaries = {}
        for tool, package in kind.server_packages.items():
            found = link.run(["sh", "-c", WHICH, tool, *kind.server_dirs]).stdout.strip()
            if not found:
                raise ToolMissingError(
                    f"host {name} has no {tool}", f"install it there: `apt-get install {package}` on {link.target}"
                )
            binaries[tool] = found
        server = next(iter(binaries.values()))
        version = link.run([server, "--version"]).stdout.strip()
        sha256 = link.run(["sha256sum", server]).stdout.split()[:1]
        return cls(hosts, name, link.peer_address(), secrets.token_hex(16), binaries, version,
                   "".join(sha256), hosts.rundir(name).path)  # fmt: skip

    @property
    def link(self) -> Connection:
        return self.hosts.link(self.name)

    @property
    def place(self) -> HostPlace:
        """The host as a place: its processes' counters and memory read there."""
        return HostPlace(self.name, self.rundir)

    @property
    def rundir(self) -> RunDir:
        return self.hosts.rundir(self.name)

    def stage(self, runner: Runner) -> HostStage:
        """Where a cell's server runs on this host (run/stage.py)."""
        return HostStage(runner, self)

    def free_port(self) -> int:
        """A port nothing listens on at the host now (random, so two cells rarely meet one's TIME_WAIT)."""
        taken = set()
        for line in self.link.run(["sh", "-c", _LISTENING]).stdout.splitlines()[1:]:
            parts = line.split()
            if len(parts) > 3 and parts[3] == "0A" and ":" in parts[1]:
                taken.add(int(parts[1].rsplit(":", 1)[1], 16))
        while (port := 20000 + secrets.randbelow(40000)) in taken:
            pass
        return port

    def preload(self, value: str) -> str | None:
        """The library a variant's `preload` puts in the server there (hosts/libraries.py); None for "glibc"."""
        return None if value == allocators.GLIBC else libraries.library(self.rundir, value)

    def package_of(self, path: str) -> str | None:
        return libraries.package_of(self.rundir, path)

    def check_format(self, kind: Any, snapshot: dataset.Snapshot, build: Build | None = None) -> None:
        """The server a cell runs there opens its snapshot's format, or exit 3: the host's installed
        server (`build` None or of the installed kind: a glibc variant), or a build copied there."""
        flavor = identity.flavor_of(self.version)
        installed = identity.format_of(flavor, self.version, "") if flavor in kind.flavors else self.version
        made = installed if snapshot.on_host is not None else snapshot.format  # there by its installed server
        if build is not None and build.kind != "installed":
            if made and build.format != made:
                raise ToolMissingError(
                    f"build {build.name} opens {build.format}; its dataset was prepared on host {self.name} "
                    f"in {made}",
                    'prepare_on = "here" (each format\'s dataset prepared by its own server, then copied)',
                )
            return
        if made and installed != made:
            raise ToolMissingError(
                f"host {self.name} runs {self.version!r} ({installed}); the dataset is prepared here in {made}",
                f"install the same server version on {self.link.target} as on this machine (`perflab docs hosts`)",
            )

    def restore(self, snapshot: dataset.Snapshot, datadir: str, workdir: Path) -> float:
        """The snapshot into `datadir` on the host (its copy there made first, once per run); seconds."""
        if snapshot.on_host is not None:
            self._snapshots[snapshot.datadir] = snapshot.on_host  # prepared there (hosts/dataset.py)
        if snapshot.datadir not in self._snapshots:
            self._snapshots[snapshot.datadir] = self._copy(snapshot.datadir, workdir)
        started = time.monotonic()
        parent = os.path.dirname(datadir)
        in_memory = self.storage is None or not self.storage.on_disk
        script = _RESTORE + _ALLOCATE if in_memory else _RESTORE_ON_DISK
        done = self.link.run(["sh", "-c", script, parent, self._snapshots[snapshot.datadir], datadir], timeout=600)
        if done.status != 0:
            raise HostLostError(
                f"host {self.name}: restoring the dataset failed: {done.stderr.strip()[-300:]}",
                f"free space in {self.rundir.path} on {self.name}",
            )
        return time.monotonic() - started

    def _copy(self, local: Path, workdir: Path) -> str:
        """`local` (a datadir) as a compressed tar over SFTP, unpacked in the host's datadirs directory."""
        return put_tree(self.link, local, f"{self.datadirs}/dataset-{len(self._snapshots)}", workdir)

    def ship(self, build: Build, workdir: Path) -> Build:
        """`build` as it runs there (hosts/trees.py): its private root and its own tree copied into
        the run directory once per run; the installed kind's binary the host's own."""

        def put(local: Path) -> str:
            if local not in self._trees:
                self._trees[local] = put_tree(self.link, local, f"{self.rundir.path}/tree-{len(self._trees)}", workdir)
            return self._trees[local]

        return shipped(build, put, self.program)

    @property
    def program(self) -> str:
        """The host's installed server binary (mariadbd, postgres): the first of the kind's tools."""
        return next(iter(self.binaries.values()))

    def record(self, port: int | None) -> dict[str, Any]:
        """Where a cell's server ran: the row's `build.host`, with the host's fingerprint taken now
        (a governor or THP changed mid-run shows between cells)."""
        return {
            "name": self.name,
            "ssh": str(self.link.target),
            "address": self.address,
            "port": port,
            "dir": self.rundir.path,
            "fingerprint": hostinfo.fingerprint(RemoteProbe(self.link)),
        }


@contextlib.contextmanager
def run_hosts(runner: Runner, workdir: Path) -> Iterator[None]:
    """The run's remote hosts (client hosts, server_host, a host axis's), connected for the whole run
    (run/scheduler.py): `runner.server_hosts` (name -> ServerHost), `runner.remotes` ((client host,
    server host) -> RemoteClient: a client host per variant reaches its own server), and
    `runner.server_host` and `runner.remote` ([experiment]'s; a cell's are CellRunner.at's) are set
    inside; the hosts' clocks and fingerprints go to the run's meta `hosts` at the start and the end."""
    from perflab.hosts.client import RemoteClient

    spec = runner.exp.file
    e = spec.experiment
    servers = server_hosts(spec)  # [experiment] server_host, a host axis's
    names = list(dict.fromkeys((*servers, *client_hosts(spec))))
    with Hosts({name: parse_target(spec.hosts[name].ssh) for name in names}, workdir) as hosts:
        for name in servers:
            place = runner.server_hosts[name] = ServerHost.open(hosts, name, runner.kind)
            hosts.require(name, observer_packages(spec))  # perf, eu-stack: exit 3 naming the package
            if e.storage != "tmpfs":  # the datadirs on the host's disk; the rest stays on its tmpfs
                place.datadirs = place.rundir.on_disk(e.storage)
            described = place.storage = storage.describe_on(place.link, place.datadirs)
            hosts.hosts[name].storage = {**described.record(), "path": e.storage, "dir": place.datadirs}
        if servers and not server_here(spec):  # no server here: the hosts'
            first = hosts.hosts[servers[0]].storage or {}  # set above for every server host
            runner.results.set_meta(storage={**first, "host": servers[0]})
        runner.server_host = runner.server_hosts.get(e.server_host) if e.server_host else None
        pairs = dict.fromkeys((c.client_host, c.server_host) for c in runner.exp.cells() if c.client_host)
        for client_name, server_name in pairs:  # with a server host, the client reaches it at its address
            address = runner.server_hosts[server_name].address if server_name is not None else None
            runner.remotes[client_name, server_name] = RemoteClient.open(
                hosts, client_name, workloads.of(spec), address
            )
            hosts.require(client_name, client_observer_packages(spec))  # the client's perf, eu-stack there
        runner.remote = runner.remotes.get((e.client_host, e.server_host)) if e.client_host else None
        runner.results.set_meta(hosts=hosts.meta())
        try:
            yield
        finally:
            runner.forget_hosts()
            hosts.measure_end()
            runner.results.set_meta(hosts=hosts.meta())


class HostStage:
    """A cell's server on its server host (run/stage.py's `Stage`): the datadir restored from the
    snapshot's copy there, the host's installed server started by its wrapper, proven from its maps
    there; [observe] alloc's counter preloaded there and read over the window (its place's: hosts/place.py)."""

    def __init__(self, runner: Runner, place: ServerHost) -> None:
        self.runner = runner
        self.place = place
        self.record: dict[str, Any] = {}  # the row's build.host (build_record), its clock added (observed)

    def check(self, snapshot: dataset.Snapshot, workdir: Path) -> None:
        pass  # the host's room: a restore that does not fit fails its cell with the host's words

    def tracer(self, rundir: Path, workdir: Path) -> AllocTracer | None:
        """[observe] alloc's counter of the cell's server there: built here (once per run), copied
        there; its counter file in the cell's directory there; its stacks named from the server's maps
        there and the host's binaries (the same files here, or the run's copies: HostStarts)."""
        spec, link = self.runner.exp.file.observe.alloc, self.place.link
        if spec is None:
            return None

        def naming(pid: int) -> HostSymbolizer:
            maps = link.run(["cat", f"/proc/{pid}/maps"], timeout=60).stdout
            return HostSymbolizer(maps, HostStarts(link, workdir / "host-binaries"), {tracer.there: str(tracer.shim)})

        there = f"{self.place.rundir.path}/{rundir.name}"
        tracer = AllocTracer(spec, rundir, workdir / "alloc-build", self.runner.kind.profiles_tree,
                             place=self.place.place, there=there, naming=naming)  # fmt: skip
        return tracer

    def server(self, cell: Cell, snapshot: dataset.Snapshot, rundir: Path, build: Build, tracer: Any) -> Any:
        runner, place = self.runner, self.place
        place.check_format(runner.kind, snapshot, build)
        options = {**runner.kind.pool_options(snapshot), **runner.kind.cell_options(cell), **cell.server_options}
        preload = place.preload(cell.preload) if cell.preload else None  # an allocator there, or copied there
        there = place.ship(build, rundir.parent) if build.kind != "installed" or build.launcher else None
        server = runner.kind.remote_server(place, f"{place.datadirs}/{rundir.name}/data", options, local=rundir,
                                           env=cell.env, alloc=tracer, preload=preload, build=there)  # fmt: skip
        server.aslr = cell.aslr
        return server

    def build_record(self, build: Build, server: Managed) -> dict[str, Any]:
        """What ran there: the host's installed server (through a root copied there: a glibc
        variant), or a build copied there (hosts/trees.py); `host`: where."""
        self.record = self.place.record(server.port)
        there = server.build
        if there is None or there.kind == "installed":
            extra = {k: v for k, v in (there.extra if there else {}).items() if k in ("root", "glibc")}
            return {"name": build.name, "kind": "installed", "binary": str(server.program),
                    "version": self.place.version, "sha256": self.place.sha256, **extra, "host": self.record}  # fmt: skip
        return {**there.record(), "host": self.record}

    def restore(self, snapshot: dataset.Snapshot, server: Managed, workdir: Path) -> tuple[float, str]:
        return self.place.restore(snapshot, str(server.datadir), workdir), "copy"

    def drop_caches(self) -> float | None:
        if not self.runner.exp.file.experiment.drop_caches:
            return None
        return storage.drop_caches_on(self.place.link, self.place.name)

    def prove(self, server: Managed, cell: Cell, build: Build, row: dict[str, Any], tracer: Any) -> None:
        row.update(_allocator(server, self.place, cell, row["build"]))
        if tracer is not None:
            tracer.check_started(server.pid)  # loaded there, once, and counting

    def armed(self, server: Managed) -> contextlib.AbstractContextManager[Any]:
        tracer: AllocTracer | None = server.alloc  # [observe] alloc: its perf started there before the window
        return tracer.armed(server.pid) if tracer is not None else contextlib.nullcontext()

    def measure(self, cell: Cell, server: Managed, logs: Path, tracer: Any) -> tuple[list, list, dict[str, Any]]:
        from perflab.run import window
        from perflab.run.ends import ServerThere

        return window.measure(self.runner, ServerThere(self.runner, cell, server), cell, server, logs,
                              self.runner.client_end(cell))  # fmt: skip

    def observed(self, cell: Cell, server: Managed, measured: dict[str, Any]) -> None:
        self.record["clock"] = measured.pop("host_clock", None)  # the host's clock over the window (hosts/clock.py)
        covered = measured.pop("covered", None)  # the window's transactions its counters cover (accounting.py)
        if server.alloc is not None:  # its stacks named while it runs there
            alloc_fields(self.runner.results, cell.order, server.alloc, server.pid, measured, covered)

    def pss_bytes(self, server: Managed) -> int | None:
        return None  # not read on a host (docs/hosts.md: pss_end_bytes null)

    def pid(self, server: Managed) -> int | None:
        return None  # it uses the host's CPU, not this machine's

    def turn_counters(self, server: Managed, clock: Any, lean: bool, password: str | None) -> Any:
        return self.runner.kind.turn_counters(server, clock, lean, password)  # over TCP from here

    def clients_connected(self, server: Managed, cell: Cell) -> dict[str, Any]:
        return {}  # the backends' maps are the host's, not read (as a sequential cell's: run/ends.ServerThere)

    def client_address(self, server: Managed) -> str | None:
        return server.bind_address

    def recording(self, local: Path) -> Site:
        """perf of the servers there, in the run's directory there, its times aligned by the host's
        clock read over the window, the frames of the host's binaries named from them (HostStarts)."""
        rundir = self.place.rundir
        return host_site(rundir, f"{rundir.path}/{local.name}", WindowClock(self.place.link), local.parent)

    def finish(self, server: Managed, rundir: Path, logs: Path) -> None:
        if server is not None:
            with contextlib.suppress(HostLostError):
                server.stop()
                server.remove()
            keep_logs(server, rundir, logs)
        shutil.rmtree(rundir, ignore_errors=True)


def _allocator(server: Managed, place: ServerHost, cell: Cell, record: dict[str, Any]) -> dict[str, Any]:
    """The allocator fields of a server on a host: its preload, proven mapped there (else
    AllocatorNotMappedError: the cell fails), with the package that ships it there; without one, its
    C library's malloc. `record` (the row's build) gains `libc`: the C library it mapped there."""
    mapped = server.mapped()
    libc = allocators.glibc_library(mapped)
    root = record.get("root")  # a private root's C library (a glibc variant, a sid package), else the host's
    glibc = f"glibc {root['glibc_version']}" if root else place.hosts.hosts[place.name].fingerprint.get("glibc")
    record["libc"] = {"library": libc, "version": glibc.split()[-1] if glibc else None, "build": None}
    if server.preload is not None:
        if server.preload not in mapped:
            raise AllocatorNotMappedError(
                f"{server.preload} ({cell.preload}) is not mapped into the server on host {place.name} "
                f"(pid {server.pid})",
                "the library failed to load there: see the server's log",
            )
        return {"allocator_library": server.preload, "allocator_version": place.package_of(server.preload)}
    there = server.build
    local = there.extra.get("shipped_from") if there is not None else None  # the binary copied there, here
    own = linked_allocator(mapped, Path(local) if local else None, place.package_of)  # sid's mysqld: tcmalloc
    return own or {"allocator_library": libc, "allocator_version": glibc}  # "glibc 2.36", as getconf says it
