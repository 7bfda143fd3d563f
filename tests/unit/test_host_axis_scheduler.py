"""The scheduler of a host axis (docs/hosts.md, "A host axis"): each host's dataset prepared on it,
each cell run with its own host as the runner's server host, and a host whose dataset cannot be
prepared failing its own cells with the cause while the other host's run (a fake runner: no host)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from perflab import spec
from perflab.errors import HostLostError
from perflab.run import scheduler
from perflab.servers import dataset
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


LANES = SPEC.replace(
    '[variants.host]\na = { server_host = "db" }\nb = { server_host = "db2" }\n',
    '[hosts.l1]\nssh = "root@10.77.3.2"\n[hosts.l2]\nssh = "root@10.77.4.2"\n'
    '[variants.host]\na = { server_host = "db", client_host = "l1" }\nb = { server_host = "db2", client_host = "l2" }\n',
)


class Timed(Runner):
    """Cells that take `cell_s` each and record when and on which thread they ran; `on_cell` is called
    in each cell (to fail one, or to interrupt the run)."""

    def __init__(self, exp: spec.Experiment, results: Results, cell_s: float, on_cell: Any = None) -> None:
        super().__init__(exp, results, set())
        self.cell_s, self.on_cell, self.spans = cell_s, on_cell, []

    def run(self, cell: Cell, snapshot: Any, workdir: Path) -> dict[str, Any]:
        import threading
        import time

        started = time.monotonic()
        if self.on_cell is not None:
            self.on_cell(cell)
        time.sleep(self.cell_s)
        self.spans.append((cell.server_host, self.server_host.name, threading.current_thread().name, started))
        return super().run(cell, snapshot, workdir)


def _lanes(tmp_path: Path, cell_s: float, on_cell: Any = None) -> tuple[Timed, Results, list[dict[str, Any]]]:
    exp = spec.parse(LANES)
    results = Results(tmp_path / "r", create=True)
    runner = Timed(exp, results, cell_s, on_cell)
    rows = scheduler.Scheduler(exp, results, runner=runner).run()
    return runner, results, rows


def test_independent_hosts_run_their_rounds_at_once(tmp_path: Path, monkeypatch: Any) -> None:
    import contextlib

    monkeypatch.setattr(scheduler.Scheduler, "_hosts", lambda self, workdir: contextlib.nullcontext())
    runner, results, rows = _lanes(tmp_path, 0.4)
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows) == [c["id"] for c in results.cells()]
    assert all(host == placed for host, placed, _, _ in runner.spans)  # each cell on its own host's runner
    threads = {host: {t for h, _, t, _ in runner.spans if h == host} for host in ("db", "db2")}
    assert threads["db"] != threads["db2"]  # a lane each
    # each round's two cells start together (one at a time: 0.4 s apart), the second round after the first
    spans = sorted(runner.spans, key=lambda s: s[3])
    first, second = spans[:2], spans[2:]
    assert {s[0] for s in first} == {s[0] for s in second} == {"db", "db2"}
    assert abs(first[0][3] - first[1][3]) < 0.3 and second[0][3] - first[0][3] >= 0.4
    assert results.meta()["host_schedule"]["concurrent"] is True
    results.close()


def test_a_lane_that_raises_stops_the_others_after_their_cell(tmp_path: Path, monkeypatch: Any) -> None:
    import contextlib

    monkeypatch.setattr(scheduler.Scheduler, "_hosts", lambda self, workdir: contextlib.nullcontext())

    def fail(cell: Cell) -> None:
        if cell.server_host == "db2":
            raise OSError("disk on fire")

    with pytest.raises(OSError, match="disk on fire"):
        _lanes(tmp_path, 0.3, fail)
    with Results(tmp_path / "r") as results:
        stored = results.cells()
    assert [c["variant"]["host"] for c in stored] == ["a"]  # db's cell in flight completed; no more


def test_an_interrupt_commits_no_cell_in_flight(tmp_path: Path, monkeypatch: Any) -> None:
    import contextlib
    import signal
    import threading
    import time

    monkeypatch.setattr(scheduler.Scheduler, "_hosts", lambda self, workdir: contextlib.nullcontext())

    def interrupt(cell: Cell) -> None:  # Ctrl-C, as the terminal sends it: to the main thread
        if cell.server_host == "db2":
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        _lanes(tmp_path, 1.0, interrupt)
    time.sleep(2.5)  # the lanes' cells in flight end, and try to commit
    with Results(tmp_path / "r") as results:
        stored = results.cells()
    # db2's cell was in flight when interrupted: not stored; db's may have ended first (a VM pause), no other
    assert [c["variant"]["host"] for c in stored] in ([], ["a"]), stored


def test_independent_hosts_prepare_their_datasets_at_once(tmp_path: Path) -> None:
    import threading
    import time

    class Slow(Runner):
        def prepare(self, workdir: Path, build: Any = None, name: str = "snapshot") -> dataset.Snapshot:
            started = time.monotonic()
            time.sleep(0.6)
            snapshot = super().prepare(workdir, build, name)
            self.spans.append((self.server_host.name, threading.current_thread().name, started, time.monotonic()))
            return snapshot

    exp = spec.parse(LANES)
    with Results(tmp_path / "r", create=True) as results:
        runner = Slow(exp, results, set())
        runner.spans = []
        scheduler.Scheduler(exp, results, runner=runner)._run_cells(tmp_path, False, [])
        meta = results.meta()
    assert sorted(runner.prepared) == [("db", "snapshot-on-db"), ("db2", "snapshot-on-db2")]
    assert set(meta["host_datasets"]) == {"db", "db2"}  # both saved: neither overwrote the other
    (a, *_), (b, *_) = runner.spans
    assert {a, b} == {"db", "db2"} and runner.spans[0][1] != runner.spans[1][1]
    assert max(s[2] for s in runner.spans) < min(s[3] for s in runner.spans)  # they overlapped


def test_an_interrupted_runs_lanes_start_nothing_more_on_a_host() -> None:
    """While an interrupted run stops (transport.halt_others), a remote call from a lane's thread fails
    at once, so no lane starts a server after the hosts are cleaned up; the main thread's still run."""
    import threading

    from perflab.hosts import transport
    from perflab.hosts.target import SshTarget

    link = transport.Connection("db", SshTarget("root", "10.77.1.2", None), None)  # type: ignore[arg-type]

    async def answer() -> int:
        return 42

    failed: list[BaseException] = []
    transport.halt_others()
    try:

        def lane() -> None:
            try:
                link.call(answer(), 5)
            except HostLostError as exc:
                failed.append(exc)

        thread = threading.Thread(target=lane)
        thread.start()
        thread.join(10)
        assert link.call(answer(), 5) == 42  # the main thread cleans up through the same links
    finally:
        transport.resume_others()
    assert len(failed) == 1 and "the run is stopping" in failed[0].message
    done: list[int] = []
    after = threading.Thread(target=lambda: done.append(link.call(answer(), 5)))
    after.start()
    after.join(10)
    assert done == [42]
