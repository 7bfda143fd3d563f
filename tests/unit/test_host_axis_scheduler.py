"""The scheduler of a host axis (docs/hosts.md, "A host axis"): each host's dataset prepared on it,
each cell run with its own host as the runner's server host, and a host whose dataset cannot be
prepared failing its own cells with the cause while the other host's run (a fake runner: no host)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from perflab import spec
from perflab.errors import HostLostError
from perflab.run import dataset, scheduler
from perflab.run.cell import CellRunner
from perflab.spec import Cell
from perflab.store.results import Results

SPEC = """
[experiment]
name = "axis"
duration = "2s"
repeats = 2
[hosts.db]
ssh = "root@10.77.1.2"
[hosts.db2]
ssh = "root@10.77.2.2"
[dataset]
tables = 1
table_size = 1000
[workload]
test = "oltp_point_select"
threads = [2]
[variants.host]
a = { server_host = "db" }
b = { server_host = "db2" }
"""


class Runner(CellRunner):
    """Datasets "prepared" on each host unless it is in `lost`; cells that return at once."""

    def __init__(self, exp: spec.Experiment, results: Results, lost: set[str]) -> None:
        super().__init__(exp, results)
        self.server_hosts = {name: SimpleNamespace(name=name) for name in ("db", "db2")}
        self.lost, self.prepared, self.ran = lost, [], []

    def prepare(self, workdir: Path, build: Any = None, name: str = "snapshot") -> dataset.Snapshot:
        host = self.server_host.name
        if host in self.lost:
            raise HostLostError(f"host {host} dropped off: connection lost", "perflab doctor --clean once it is back")
        self.prepared.append((host, name))
        return dataset.Snapshot(workdir / name, 1 << 20, 0.5, "", f"init on host {host}", on_host=f"/r/{name}")

    def run(self, cell: Cell, snapshot: Any, workdir: Path) -> dict[str, Any]:
        self.ran.append((cell.server_host, self.server_host.name, snapshot.on_host))
        row = {**self.new_row(cell), "status": "ok", "settled": True, "summary": {"qps": 1.0, "tps": 1.0}}
        self.results.commit_cell(row, [], [])
        return row


def _run(tmp_path: Path, lost: set[str]) -> tuple[Runner, list[dict[str, Any]], dict[str, Any]]:
    exp = spec.parse(SPEC)
    with Results(tmp_path / "r", create=True) as results:
        runner = Runner(exp, results, lost)
        scheduler.Scheduler(exp, results, runner=runner)._run_cells(tmp_path, False, [])
        return runner, results.cells(), results.meta()


def test_each_host_prepares_its_own_dataset_and_runs_its_own_cells(tmp_path: Path) -> None:
    runner, cells, meta = _run(tmp_path, set())
    assert sorted(runner.prepared) == [("db", "snapshot-on-db"), ("db2", "snapshot-on-db2")]
    assert sorted(runner.ran) == sorted(2 * [("db", "db", "/r/snapshot-on-db"), ("db2", "db2", "/r/snapshot-on-db2")])
    assert set(meta["host_datasets"]) == {"db", "db2"} and all(c["status"] == "ok" for c in cells)


def test_a_host_whose_dataset_fails_fails_its_own_cells_and_the_other_host_runs(tmp_path: Path) -> None:
    runner, cells, _ = _run(tmp_path, {"db2"})
    assert [host for host, _, _ in runner.ran] == ["db", "db"]
    failed = [c for c in cells if c["status"] == "failed"]
    assert len(failed) == 2 and all(c["variant"] == {"host": "b"} for c in failed)
    assert all("host db2: its dataset could not be prepared: host db2 dropped off" in c["error"] for c in failed)
