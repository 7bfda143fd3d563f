"""What the cell's steps ask of the run they belong to: `Runner`, the protocol that run/cell.CellRunner
meets. The lifecycle's stages (run/stage.py, hosts/server.py), the window and its ends
(run/window.py, hosts/client.py) and the dataset's preparation on a host (hosts/dataset.py)
are written against it, not against CellRunner itself, which imports them.

    def measure(runner: Runner, ...) -> Measured: ...   # runner.exp.file, runner.kind, runner.results
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from perflab.observers.alloc.tracer import AllocTracer
    from perflab.observers.io import IoObserver
    from perflab.run.space import SpaceCheck
    from perflab.run.storage import Storage
    from perflab.servers.kind import Kind
    from perflab.servers.managed import Managed
    from perflab.spec.matrix import Cell, Experiment
    from perflab.store.results import Results

Measured = tuple[list[dict[str, Any]], list[tuple[float, int]], dict[str, Any]]  # intervals, rss, fields


class Runner(Protocol):
    """A run's cell runner in one placement (CellRunner.at): the experiment, its results, its hosts."""

    exp: Experiment
    results: Results
    check_space: SpaceCheck
    server_cpus: list[int] | None
    client_cpus: list[int] | None
    remote: Any  # the client host's RemoteClient, while the placement has one (hosts/client.py)
    server_host: Any  # the server host's ServerHost, while the placement has one (hosts/server.py)
    server_hosts: dict[str, Any]  # every server host of the run, by name
    remotes: dict[tuple[str, str | None], Any]  # (client host, server host) -> its RemoteClient
    listen: Callable[[str, dict[str, Any]], None]

    @property
    def kind(self) -> Kind: ...

    @property
    def storage(self) -> Storage: ...

    def io_observer(self, server: Managed) -> IoObserver | None: ...

    def measure(self, cell: Cell, server: Managed, logs: Path, tracer: AllocTracer | None = None) -> Measured: ...

    def forget_hosts(self) -> None:
        """The run's hosts closed: no placement keeps them (hosts/server.run_hosts)."""
        ...

    def client_end(self, cell: Cell) -> Any: ...

    def stage(self) -> Any: ...

    def _steady(self, intervals: list[dict[str, Any]], qps: float, steal: Any = None) -> dict[str, Any]: ...
