"""One cell of the matrix, from a dataset snapshot to a committed row.

Per cell: restore the snapshot, start mariadbd with the variant's options, env and preload,
prove the allocator is really mapped, run the warm-up, then the measured window with the
observers, stop the server, copy its logs, commit the row. A failed cell is stored with its
error and log tail (as asv stores a failed benchmark) and the caller goes on.

    runner = CellRunner(exp, results)
    snapshot = runner.prepare(workdir)                 # once per on-disk format (run/datasets.py)
    row = runner.run(exp.cells()[0], snapshot, workdir)  # {"id": 0, "status": "ok", "summary": ...}

The `Scheduler` decides which cells run and in what order; `bench/` drives the same code
through `prepare`, `run` and `measure` (the window alone, on a server it started itself).
"""

from __future__ import annotations

import copy
import functools
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab.analyze import steady
from perflab.errors import PerflabError, ServerCrashedError
from perflab.servers import dataset
from perflab.builds import Build, BuildError, debroot, glibc, resolve
from perflab.observers.alloc.tracer import AllocTracer
from perflab.observers.host_overhead import CellCpu
from perflab.observers.io import IoObserver, into_row
from perflab.places import Place
from perflab.places.here import HERE
from perflab.run.prewarm import server_switches
from perflab.places.proc import read_tail
from perflab.run.server_logs import failure_fields
from perflab.run.context import Measured
from perflab.run.stage import Here, Stage
from perflab.run.space import SpaceCheck
from perflab.run.storage import Storage, of_experiment
from perflab.run.ends import ClientHere
from perflab import workloads
from perflab.workloads import client_variant
from perflab.servers import kind
from perflab.servers.kind import Kind
from perflab.spec.matrix import Cell, Experiment
from perflab.spec.builds import BuildSpec
from perflab.spec.hosts import server_here
from perflab.store.results import Results
from perflab.units import utc_now

if TYPE_CHECKING:
    from perflab.servers.managed import Managed

Listener = Callable[[str, dict[str, Any]], None]
DatasetFor = Callable[[Build], dataset.Snapshot]  # the snapshot a build opens (run/datasets.py)


def cpu_plan(pin: bool) -> tuple[list[int] | None, list[int] | None]:
    """(server CPUs, client CPUs): the first allowed CPU for the server, the rest for sysbench."""
    if not pin:
        return None, None
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[:1], allowed[1:]


class CellRunner:
    """Runs cells of `exp` and commits each to `results`; `listener` hears prepare_start/end."""

    def __init__(self, exp: Experiment, results: Results, listener: Listener | None = None) -> None:
        self.exp = exp
        self.results = results
        self.listen = listener or (lambda event, data: None)
        self.server_cpus, self.client_cpus = cpu_plan(exp.file.experiment.pin)
        self.check_space = SpaceCheck(results.dir)
        self._storage: Storage | None = None
        # server binaries: None -> the installed one; a [builds] name -> its Build or why it failed
        self.builds: dict[str | None, Build | BuildError] = {}
        self.libcs: dict[str, debroot.Root | BuildError] = {}  # [variants] glibc: suite -> its C library
        self.remote: Any = None  # the client on another host, while a run has one (hosts/client.py)
        self.server_host: Any = None  # the server's host, while a run has one (hosts/server.py)
        self.server_hosts: dict[str, Any] = {}  # every server host of the run, by name (a host axis)
        self.remotes: dict[tuple[str, str | None], Any] = {}  # (client host, server host) -> its RemoteClient
        self._placed: dict[tuple[str | None, str | None], CellRunner] = {}  # at(): one runner a placement

    def at(self, cell: Cell) -> CellRunner:
        """This runner with `cell`'s server host and client host in place (`server_host`, `remote`), one
        per placement for the run, sharing everything else: a host axis's cells run on different
        hosts, its lanes at once (run/scheduler.py). Itself when the run has no remote host."""
        if not self.server_hosts and not self.remotes:
            return self
        key = (cell.server_host, cell.client_host)
        if key not in self._placed:
            placed = copy.copy(self)
            placed._placed = {}
            placed.server_host = self.server_hosts.get(cell.server_host) if cell.server_host else None
            placed.remote = self.remotes.get((cell.client_host, cell.server_host)) if cell.client_host else None
            self._placed[key] = placed
        return self._placed[key]

    def forget_hosts(self) -> None:
        self.remote = self.server_host = None
        self.server_hosts.clear()
        self.remotes.clear()
        self._placed.clear()

    @property
    def storage(self) -> Storage:
        """Where the datadirs live here ([experiment] storage, run/storage.py): the tmpfs when every
        server runs on a server host (the storage is there: hosts/server.py)."""
        if self._storage is None:
            here = server_here(self.exp.file)
            self._storage = of_experiment(self.exp.file.experiment.storage if here else "tmpfs")
        return self._storage

    def io_observer(self, server: Managed) -> IoObserver | None:
        """[observe] io of a cell's started `server` (None when it is off)."""
        if not self.exp.file.observe.io:
            return None
        dev = self.storage.dev if self.storage.block_device else None
        return IoObserver(dev, lambda: self.kind.io_counters(server), server.pid, server.rundir)

    @property
    def server_place(self) -> Place:
        """Where this placement's server runs: here, or its server host (perflab/places/)."""
        return HERE if self.server_host is None else self.server_host.place

    @property
    def kind(self) -> Kind:
        """The experiment's server kind (perflab/servers/)."""
        return kind(self.exp.file.experiment.server)

    @property
    def installed(self) -> Build:
        """The installed server (the build of variants that name none), described once."""
        if None not in self.builds:
            self.builds[None] = resolve.installed(self.exp.file.experiment.server)
        build = self.builds[None]
        assert isinstance(build, Build)
        return build

    def prepare(self, workdir: Path, build: Build | None = None, name: str = "snapshot") -> dataset.Snapshot:
        """The experiment's dataset, prepared in `workdir/name`, to restore into every cell: by
        the installed server, or by `build` (a build of another on-disk format: run/datasets.py)."""
        spec = self.exp.file
        self.listen("prepare_start", {"build": build})
        host = name.partition("-on-")[2]  # a host axis's dataset on each host (run/datasets.py)
        stem = ("prepare" if build is None else f"prepare-{build.format}") + (f"-on-{host}" if host else "")
        log = self.results.dir / "logs" / f"{stem}.txt"
        log.parent.mkdir(parents=True, exist_ok=True)
        # on the server host by its installed server (hosts/dataset.py); a build's own format here
        if self.server_host is not None and spec.experiment.prepare_on == "host" and build is None:
            from perflab.hosts import dataset as on_host

            snapshot = on_host.prepare(self, workdir, log, name)
        else:
            snapshot = self.kind.prepare(workdir, spec=spec, tool=workloads.of(spec), log=log, name=name, build=build)
        self.listen("prepare_end", {"snapshot": snapshot, "build": build})
        return snapshot

    def prepare_builds(self, dataset_for: DatasetFor | None, workdir: Path, cache: Path) -> None:
        """Every build a variant names, from the cache or made now (PGO trained on the dataset
        `dataset_for` gives the instrumented build). A build that fails is kept as its error:
        its cells fail with it, the others run."""
        used = {cell.build for cell in self.exp.cells()} - {None}
        for name, spec in self.exp.file.builds.items():
            if name not in used:
                continue
            training = resolve.training_id(self.exp.file, spec)
            server = self.exp.file.experiment.server
            self.listen("build_start", {"name": name, "status": resolve.status(name, spec, cache, training, server)})
            try:
                self.builds[name] = resolve.resolve(
                    name,
                    spec,
                    cache,
                    self.listen,
                    functools.partial(self.train, spec=spec, dataset_for=dataset_for, workdir=workdir),
                    training,
                    server,
                )
            except BuildError as exc:
                self.builds[name] = exc
            self.listen("build_end", {"name": name, "build": self.builds[name]})
        for suite in sorted({cell.glibc for cell in self.exp.cells() if cell.glibc is not None}):
            self.listen("build_start", {"name": f"glibc-{suite}", "status": f"libc6 from {suite}, in a private root"})
            self.libcs[suite] = glibc.libc_root(suite, cache)
            made = self.libcs[suite]
            said = f"glibc {made.glibc_version} ({made.key})" if isinstance(made, debroot.Root) else ""
            self.listen("build_end", {"name": f"glibc-{suite}", "build": made if said == "" else None, "said": said})

    def train(self, build: Build, spec: BuildSpec, dataset_for: DatasetFor | None, workdir: Path) -> str:
        """PGO training: the experiment's workload (largest thread count) on its dataset for
        `train_duration`, then a clean shutdown so the instrumented server writes its profile."""
        if dataset_for is None:
            raise PerflabError("PGO training needs the experiment's dataset", "prepare it first (run/datasets.py)")
        snapshot = dataset_for(build)
        rundir = workdir / "pgo-train"
        shutil.rmtree(rundir, ignore_errors=True)
        rundir.mkdir()
        return self.kind.train(self.exp.file, build, spec, snapshot, rundir, workloads.of(self.exp.file))

    def build_for(self, cell: Cell) -> Build | BuildError:
        """The server binary `cell` runs (or why its build failed), with its variant's C library."""
        if cell.build is None:
            found: Build | BuildError | None = self.installed  # bench/ drives run() without prepare_builds
        else:
            found = self.builds.get(cell.build)
        if found is None:
            raise PerflabError(f"build {cell.build!r} was not prepared", "CellRunner.prepare_builds first")
        if cell.glibc is None or isinstance(found, BuildError):
            return found
        libc = self.libcs.get(cell.glibc)
        if libc is None:
            raise PerflabError(f"glibc {cell.glibc!r} was not prepared", "CellRunner.prepare_builds first")
        if isinstance(libc, BuildError):
            return libc
        try:
            return glibc.with_glibc(found, libc)
        except BuildError as exc:
            return exc

    def stage(self) -> Stage:
        """Where this placement's cells run their server: here, or on its server host (run/stage.py)."""
        return Here(self) if self.server_host is None else self.server_host.stage(self)

    def run(self, cell: Cell, snapshot: dataset.Snapshot | None, workdir: Path) -> dict[str, Any]:
        """Run `cell` on a copy of `snapshot` (the dataset of its build's format) in `workdir`,
        commit its row (ok or failed), return it. `snapshot` is None only for a failed build.
        The same steps wherever the server runs (the stage: run/stage.py); a host that dropped off
        fails the cell with its cause, and every later cell on it at once; the run goes on."""
        row = self.new_row(cell)
        build = self.build_for(cell)
        if isinstance(build, BuildError):  # nothing to run: the cell fails with its build's error
            row.update(error=build.message, log_tail=read_tail(build.log), ended_at=utc_now())
            self.results.commit_cell(row, [], [])
            return row
        assert snapshot is not None
        stage = self.stage()
        stage.check(snapshot, workdir)
        logs = self.results.log_dir(cell.order)
        rundir = workdir / f"cell-{cell.order:04d}"
        rundir.mkdir()
        intervals: list[dict[str, Any]] = []
        rss: list[tuple[float, int]] = []
        status: list[tuple[float, dict[str, float]]] = []
        server = None
        own = CellCpu.begin(self.remote_dirs())  # perflab's own CPU on the cell's hosts over the whole cell
        try:
            tracer = stage.tracer(rundir, workdir)
            server = stage.server(cell, snapshot, rundir, build, tracer)
            row["build"] = stage.build_record(build, server)
            intervals, rss, status = self._lifetime(stage, cell, (snapshot, build), workdir, server, tracer, row, logs)
        except PerflabError as exc:
            row.update(failure_fields(exc, server) if server is not None else {"error": exc.message})
        finally:
            stage.finish(server, rundir, logs)
        own.record(row)
        row["ended_at"] = utc_now()
        self.results.commit_cell(row, intervals, rss, status)
        return row

    def _lifetime(
        self,
        stage: Stage,
        cell: Cell,
        made: tuple[dataset.Snapshot, Build],
        workdir: Path,
        server: Managed,
        tracer: Any,
        row: dict[str, Any],
        logs: Path,
    ) -> tuple[list[dict[str, Any]], list[tuple[float, int]], list[tuple[float, dict[str, float]]]]:
        """The server's datadir restored, the server started, proven and measured: the row updated
        (status "ok"); its intervals, RSS samples and status samples. `made`: the snapshot and the build."""
        snapshot, build = made
        restore_s, restore_method = stage.restore(snapshot, server, workdir)
        dropped = stage.drop_caches()
        started = time.monotonic()
        with server:
            start_s = time.monotonic() - started  # spawned to accepting connections
            stage.prove(server, cell, build, row, tracer)
            switches = server_switches(cell, server, self.exp.file.workload.tool, self.kind)
            with stage.armed(server):
                intervals, rss, measured = stage.measure(cell, server, logs, tracer)
            stage.observed(cell, server, measured)
            status = measured.pop("status_samples", [])
            io = measured.pop("io", None)
            steal = measured.pop("steal", None)  # cores of steal over seconds of the workload
            if not server.alive():
                raise ServerCrashedError(f"{server.death()} during the run:\n{server.error_lines()}")
        measured["client"] = {**row["client"], **measured.get("client", {})}  # what the window knows of it
        row.update(measured, status="ok")
        row.update(self._steady(intervals, measured["summary"]["qps"], steal))
        restored = {"restore_s": round(restore_s, 3), "restore_method": restore_method, "drop_caches_s": dropped}
        row["resources"].update(restored, server_start_s=round(start_s, 3), **switches)
        return intervals, rss, into_row(row, io, status)  # resources.io, each stall's io, the I/O series

    def new_row(self, cell: Cell) -> dict[str, Any]:
        """A cell's row before it runs: what it is, `status` "failed" until it succeeds."""
        return {
            "id": cell.order,
            "key": cell.key,
            "variant": cell.variant,
            "threads": cell.threads,
            "repeat": cell.repeat,
            "retry_of": cell.retry_of,
            "status": "failed",
            "error": None,
            "log_tail": None,
            "started_at": utc_now(),
            "ended_at": None,
            "preload": cell.preload,
            "env": cell.env,
            "server_options": cell.server_options,
            "window_start_s": self.exp.file.experiment.window_start,
            "pinning": {"server_cpus": self.server_cpus, "client_cpus": self.client_cpus},
            "client": client_variant.configured(cell),
        }

    def _steady(
        self, intervals: list[dict[str, Any]], qps: float, steal: Callable[[float, float], float | None] | None = None
    ) -> dict[str, Any]:
        spec = self.exp.file.experiment
        return steady.cell_fields(intervals, spec.window_start, qps, spec.stall_threshold, steal)

    def remote_dirs(self) -> list[tuple[Any, str]]:
        """This placement's hosts: (the link, the run's directory there) of its server host and client host."""
        hosts = [h.rundir for h in (self.server_host, self.remote) if h is not None]
        return [(rundir.link, rundir.path) for rundir in hosts]

    def client_end(self, cell: Cell) -> Any:
        """Where this placement's client runs, as the window drives it (run/window.py): here, or on its
        client host (hosts/client.ClientOnHost)."""
        if self.remote is not None:
            from perflab.hosts.client import ClientOnHost

            return ClientOnHost(self, self.remote, cell)
        return ClientHere(self, cell)

    def measure(self, cell: Cell, server: Managed, logs: Path, tracer: AllocTracer | None = None) -> Measured:
        """One client run (the workload's tool) against a started `server`: warm-up seconds, then the
        measured window, which the observers and the /proc counters cover (run/window.py). Returns
        (intervals, RSS samples, the row's measured fields); with [observe] status, the fields hold
        its series as `status_samples` (the caller stores it). bench/ drives it alone."""
        return self.stage().measure(cell, server, logs, tracer)
