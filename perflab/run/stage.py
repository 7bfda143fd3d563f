"""Where a cell's server runs, and what running it there takes: the stage of one cell lifecycle.

`CellRunner.run` (run/cell.py) is written once against a `Stage`: check the room, make the server
(its options, preload, [observe] alloc counter), restore its datadir, drop the caches, start it,
prove what it mapped, measure the window, stop it and keep its logs. `Here` runs it on this
machine; a server host's stage (hosts/server.HostStage) runs it there over SSH. Only the
stage knows where; the lifecycle, its row and its failures are the same.

    stage = runner.stage()                     # here, or the placement's server host
    server = stage.server(cell, snapshot, rundir, build, stage.tracer(rundir, workdir))
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any, Protocol

from perflab import allocators, workloads
from perflab.builds import Build
from perflab.observers.alloc.tracer import AllocTracer
from perflab.places import Site
from perflab.places.here import HERE
from perflab.run import allocator_proof
from perflab.servers import dataset
from perflab.run.server_logs import keep_logs
from perflab.run.storage import drop_caches_s
from perflab.servers.managed import LOOPBACK, Managed
from perflab.run.context import Measured, Runner
from perflab.spec.matrix import Cell



class Stage(Protocol):
    """What one cell lifecycle asks of the place its server runs."""

    def check(self, snapshot: dataset.Snapshot, workdir: Path) -> None:
        """Room for one more datadir there, else stop the run (the stored cells are intact)."""

    def tracer(self, rundir: Path, workdir: Path) -> Any:
        """[observe] alloc: the cell's counter there, None when it is off."""

    def server(self, cell: Cell, snapshot: dataset.Snapshot, rundir: Path, build: Build, tracer: Any) -> Managed:
        """The cell's server, not yet started: its options over the snapshot's buffer pool, env, preload."""

    def build_record(self, build: Build, server: Managed) -> dict[str, Any]:
        """The row's `build`: what binary runs, and where."""

    def restore(self, snapshot: dataset.Snapshot, server: Managed, workdir: Path) -> tuple[float, str]:
        """The snapshot into the server's datadir: (seconds, method)."""

    def drop_caches(self) -> float | None:
        """[experiment] drop_caches there: seconds it took, None when off."""

    def prove(self, server: Managed, cell: Cell, build: Build, row: dict[str, Any], tracer: Any) -> None:
        """The started server maps the allocator its cell asked for (else AllocatorNotMappedError),
        its counter is loaded: the row's allocator, libc and pinning fields."""

    def armed(self, server: Managed) -> contextlib.AbstractContextManager[Any]:
        """Around the window: what must start before it ([observe] alloc's perf there)."""

    def measure(self, cell: Cell, server: Managed, logs: Path, tracer: Any) -> Measured:
        """The window: (intervals, RSS samples, the row's measured fields)."""

    def observed(self, cell: Cell, server: Managed, measured: dict[str, Any]) -> None:
        """After the window, while the server runs: what is read there ([observe] alloc's stacks)."""

    def pss_bytes(self, server: Managed) -> int | None:
        """The server's proportional set size now (None where it is not read)."""

    def pid(self, server: Managed) -> int | None:
        """The server's pid on this machine, whose CPU `other_cpu_cores` leaves out (None: it runs elsewhere)."""

    def turn_counters(self, server: Managed, clock: Any, lean: bool, password: str | None) -> Any:
        """A seat's counters at every turn's end (the kind's turn_counters): of a server here on its
        socket, of one on its host over TCP as the run's login (`password`)."""

    def clients_connected(self, server: Managed, cell: Cell) -> dict[str, Any]:
        """A seat's checks once its clients have connected (the kind's clients_connected), as resources fields."""

    def client_address(self, server: Managed) -> str | None:
        """The address its clients reach the server at (a row's `client.address`); None: its socket here."""

    def recording(self, local: Path) -> Site:
        """Where a recording of the servers (an interleaved group's perf) is made: the place, the
        directory there for `local` (a directory of this machine's work directory)."""

    def finish(self, server: Managed | None, rundir: Path, logs: Path) -> None:
        """The server stopped, its logs kept in `logs`, its run directory removed."""


class Here:
    """This machine: the datadir on the run's storage, the server a child of perflab."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def check(self, snapshot: dataset.Snapshot, workdir: Path) -> None:
        self.runner.check_space(snapshot, workdir)

    def tracer(self, rundir: Path, workdir: Path) -> AllocTracer | None:
        spec = self.runner.exp.file.observe.alloc
        tree = self.runner.kind.profiles_tree  # PostgreSQL: every backend counts, and makes syscalls
        return AllocTracer(spec, rundir, workdir / "alloc-build", tree) if spec is not None else None

    def server(
        self, cell: Cell, snapshot: dataset.Snapshot, rundir: Path, build: Build, tracer: AllocTracer | None
    ) -> Managed:
        runner = self.runner
        options = {**runner.kind.pool_options(snapshot), **runner.kind.cell_options(cell), **cell.server_options}
        env = {**cell.env, **tracer.env()} if tracer else cell.env
        server = runner.kind.server(
            rundir,
            rundir / "data",
            options,
            env=env,
            preload=allocators.resolve(cell.preload) if cell.preload else None,
            tracer=tracer.shim if tracer else None,
            cpus=runner.server_cpus,
            build=build,
            durable=runner.storage.on_disk,  # on disk, the server's own durability defaults (docs/storage.md)
        )
        server.aslr = cell.aslr
        if runner.remote is not None:  # the server listens where the client host reaches it, only there
            runner.kind.listen_on(server, runner.remote.address)
        elif workloads.of(runner.exp.file).tcp_on(runner.kind):  # else on no address (its socket only)
            runner.kind.listen_on(server, LOOPBACK)
        return server

    def build_record(self, build: Build, server: Managed) -> dict[str, Any]:
        return build.record()

    def restore(self, snapshot: dataset.Snapshot, server: Managed, workdir: Path) -> tuple[float, str]:
        return dataset.restore_with_method(snapshot, Path(server.datadir), in_memory=not self.runner.storage.on_disk)

    def drop_caches(self) -> float | None:
        return drop_caches_s(self.runner.exp.file.experiment.drop_caches)

    def prove(
        self, server: Managed, cell: Cell, build: Build, row: dict[str, Any], tracer: AllocTracer | None
    ) -> None:
        proof = allocator_proof.prove(
            server.pid, cell.preload, server.preload, server.program, allocator_proof.glibc_of(build)
        )
        row["build"]["libc"] = proof.pop("libc")  # the C library it mapped, as that library says
        row.update(proof)
        if tracer is not None:
            tracer.check_started(server.pid)
        row["pinning"]["server_cpus_allowed"] = cpus_allowed(server.pid)

    def armed(self, server: Managed) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()  # the window arms [observe] alloc here (ServerHere.observers)

    def measure(self, cell: Cell, server: Managed, logs: Path, tracer: AllocTracer | None) -> Measured:
        from perflab.run import window
        from perflab.run.ends import ServerHere

        client_end = self.runner.client_end(cell)
        end = ServerHere(self.runner, cell, server, tracer)
        return window.measure(self.runner, end, cell, server, logs, client_end)

    def observed(self, cell: Cell, server: Managed, measured: dict[str, Any]) -> None:
        pass  # the window stores [observe] alloc's stacks (ServerHere.observed)

    def pss_bytes(self, server: Managed) -> int | None:
        return self.runner.kind.pss_bytes(server)

    def pid(self, server: Managed) -> int | None:
        return server.pid

    def turn_counters(self, server: Managed, clock: Any, lean: bool, password: str | None) -> Any:
        return self.runner.kind.turn_counters(server, clock, lean)  # its socket: a client host's login is not needed

    def clients_connected(self, server: Managed, cell: Cell) -> dict[str, Any]:
        return self.runner.kind.clients_connected(server, cell)  # PostgreSQL's backends' maps, here

    def client_address(self, server: Managed) -> str | None:
        return None

    def recording(self, local: Path) -> Site:
        return Site(HERE, local)

    def finish(self, server: Managed | None, rundir: Path, logs: Path) -> None:
        if server is not None:
            server.stop()
            keep_logs(server, rundir, logs)
        shutil.rmtree(rundir, ignore_errors=True)


def cpus_allowed(pid: int) -> str | None:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    return None

