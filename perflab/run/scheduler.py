"""Runs the cells of an experiment in randomized blocks; resumes; adaptive rounds.

The scheduler decides which cells run and in what order (repeats outermost: each round runs
every variant once, in the order the experiment's seed draws for it, spec/matrix.py), keeps the
dataset snapshots (one per on-disk format: run/datasets.py) in the results directory until the
run completes (so `perflab run --resume` continues on the same data), and with repeats = "auto"
runs rounds until every group's CI is tight. Each cell is run and committed by a
`CellRunner` (run/cell.py); everything lives in one work directory on tmpfs (run/workdir.py).

    Scheduler(exp, results, listener).run(resume=False)  -> the rows, in run order
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perflab.errors import PerflabError, ResourceError
from perflab.run import interleave
from perflab.servers import dataset
from perflab.run.adaptive import AdaptiveRounds
from perflab.builds import Build, BuildError
from perflab.cache import cache_root, writable_cache
from perflab.run.cell import CellRunner, Listener
from perflab.run.datasets import Datasets, kept_dirs
from perflab.run.workdir import space_hint, work_dir
from perflab.spec.matrix import Cell, Experiment
from perflab.spec.hosts import client_hosts, host_axis, host_lanes, longest_lane, server_here, server_hosts
from perflab.spec.loading import cell_estimate
from perflab.store.results import Results
from perflab.units import utc_now


def cell_seconds(exp: Experiment) -> float:
    return cell_estimate(exp.file)


def estimate_seconds(exp: Experiment, cells: int | None = None) -> float:
    """Wall time for `cells` cells (default: all cells known in advance), dataset included; a host axis
    whose hosts run at once takes its busiest host's share of them (spec/hosts.longest_lane)."""
    spec = exp.file
    rows = spec.dataset.tables * spec.dataset.table_size
    prepare = 5 + rows / 100_000 * 1.5
    return prepare + cell_seconds(exp) * (len(exp.cells()) if cells is None else cells) * longest_lane(spec)


class Scheduler(AdaptiveRounds):
    """`runner` runs and commits one cell (default: a CellRunner of `exp`); `listener` hears
    cell_start, cell_end and snapshot_reused (and the runner's prepare_start/prepare_end)."""

    def __init__(
        self, exp: Experiment, results: Results, listener: Listener | None = None, runner: CellRunner | None = None
    ) -> None:
        self.exp = exp
        self.results = results
        self.listen = listener or (lambda event, data: None)
        self.runner = runner or CellRunner(exp, results, self.listen)
        # a host axis's hosts run their rounds at once where they are independent (spec/hosts.py)
        self.lanes = host_lanes(exp.file) if host_axis(exp.file) is not None else None
        self._on_hosts: dict[str, Datasets] = {}  # a host axis's datasets prepared on each host
        self._unprepared: dict[str, str] = {}  # a host axis's host whose dataset failed -> why
        self._heard = threading.Lock()  # the listener hears one event at a time (a host axis's lanes)

    def run(self, resume: bool = False) -> list[dict[str, Any]]:
        """Run the cells not yet in the results (all of them in a new run), in run order.

        The dataset snapshots are kept in the results directory (`dataset/`, `dataset-FORMAT/`)
        until the run completes, so `perflab run --resume` continues on the same data without
        preparing."""
        done = self.results.cells() if resume else []
        try:
            storage = self.runner.storage  # [experiment] storage: the tmpfs or a directory on disk
            with work_dir(Path(storage.path)) as workdir, self._hosts(workdir):
                here = server_here(self.exp.file)  # else the hosts' storage (run_hosts)
                self.results.set_meta(workdir=str(workdir), **({"storage": storage.record()} if here else {}))
                if self.lanes is not None:
                    self.results.set_meta(host_schedule=self.lanes)
                self._run_cells(workdir, resume, done)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise ResourceError(f"no space left: {exc}", space_hint(self.results.dir)) from None
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_FULL:  # locked, I/O error...: not a matter of space
                raise
            raise ResourceError(
                f"no space left: the results database could not be written: {exc}", space_hint(self.results.dir)
            ) from None
        for kept in kept_dirs(self.results.dir):  # complete: not needed any more
            shutil.rmtree(kept, ignore_errors=True)
        return done

    def _hosts(self, workdir: Path) -> contextlib.AbstractContextManager[None]:
        """The remote hosts of client_host and server_host (docs/hosts.md), for the whole run."""
        if not client_hosts(self.exp.file) and not server_hosts(self.exp.file):
            return contextlib.nullcontext()
        from perflab.hosts.server import run_hosts

        return run_hosts(self.runner, workdir)

    def _run_cells(self, workdir: Path, resume: bool, done: list[dict[str, Any]]) -> None:
        datasets = Datasets(self.runner, self.results, workdir, self.listen, resume=resume)
        used = {cell.build for cell in self.exp.cells()}
        if None in used:  # the installed server's dataset first, as before builds existed
            self._prepare_hosts(datasets)
        glibcs = any(cell.glibc for cell in self.exp.cells())
        if self.exp.file.builds or glibcs:  # before the first cell; a failed build fails only its cells
            self.runner.prepare_builds(datasets.get, workdir, writable_cache(cache_root()))
            datasets.prepare_all(self.runner.builds, used)  # one snapshot per on-disk format
            self.results.set_meta(builds=_builds_meta(self.runner.builds))
        if self.exp.file.experiment.adaptive:
            self.run_adaptive(datasets, workdir, done)
            return
        self.run_fixed(datasets, workdir, done)

    def run_fixed(self, datasets: Datasets | None, workdir: Path, done: list[dict[str, Any]]) -> None:
        """repeats = N: N rounds, each followed by its retries (`retries`), as adaptive rounds are,
        so that an unsettled cell does not cost its round's pair: N rounds give N pairs. Cells
        already in `done` (a resumed run) are not run again, nor are their rounds' retries."""
        have = {row["key"] for row in done}
        rounds = range(1, self.exp.file.experiment.planned_repeats + 1)
        total = len(done) + sum(1 for c in self.exp.cells() if c.key not in have)
        for repeat in rounds:
            cells = self._round(repeat, None, have, done)
            done += self._run_some(cells, datasets, workdir, total)
            again = self.retries(repeat, done)
            total += len(again)
            done += self._run_some(again, datasets, workdir, total)

    def retries(self, repeat: int, done: list[dict[str, Any]]) -> list[Cell]:
        """The cells of round `repeat` to measure again, numbered after the last stored one: each
        that did not settle or failed where its variant has run (needs_retry), once: a retry is
        not retried, so a cell that never settles costs one more cell, not a loop (the retry stays
        stored unsettled, and the analysis counts it so). In the interleaved design the whole group
        it ran in, whose cells pair only with each other. A retry has the round of the cell it
        replaces (`retry_of`), and the analysis uses it in that cell's place. None with
        `measure_again = false`."""
        if not self.exp.file.experiment.measure_again:
            return []
        rows = [r for r in done if r["repeat"] == repeat]
        retried = {r.get("retry_of") for r in rows} - {None}
        first = [r for r in rows if r.get("retry_of") is None and r["id"] not in retried]
        # what was known when the round ended (a resume decides as the first run did)
        known = [r for r in done if r["repeat"] <= repeat]
        bad = [r for r in first if needs_retry(r, known)]
        if self.exp.file.experiment.interleaved:
            ids = {i for r in bad for i in (r.get("design") or {}).get("group") or [r["id"]]}
            bad = [r for r in first if r["id"] in ids]
        planned = {c.key: c for c in self.exp.round(repeat)}
        again = [(planned[r["key"]], r["id"]) for r in sorted(bad, key=lambda r: r["id"]) if r["key"] in planned]
        start = max((row["id"] for row in done), default=-1) + 1
        return [dataclasses.replace(c, order=start + i, retry_of=old) for i, (c, old) in enumerate(again)]

    def _run_some(
        self, cells: list[Cell], datasets: Datasets | None, workdir: Path, total: int
    ) -> list[dict[str, Any]]:
        """`cells` in run order: one at a time, or (design = "interleaved") each round's cells
        of one thread count together (run/interleave.py), or (a host axis whose hosts are
        independent) each host's cells one at a time, the hosts at once (`_run_lanes`); their rows
        in that order."""
        if not self.exp.file.experiment.interleaved:
            rows = []
            for lanes in self._lanes_of(cells):
                if len(lanes) > 1:
                    rows += self._run_lanes(lanes, datasets, workdir, total)
                else:
                    rows += [self._run_one(cell, self._snapshot(cell, datasets), workdir, total) for cell in lanes[0]]
            return rows
        rows = []
        for group in interleave_groups(cells):
            for cell in group:
                self._heard_event("cell_start", {"cell": cell, "total": total, "group": group})
            snapshots = [self._snapshot(cell, datasets) for cell in group]
            for cell, row in zip(group, interleave.run_group(self.runner, group, snapshots, workdir), strict=True):
                self._heard_event("cell_end", {"cell": cell, "row": row})
                rows.append(row)
        return rows

    def _lanes_of(self, cells: list[Cell]) -> list[list[list[Cell]]]:
        """`cells` as the lanes that run at once, round by round: each round's cells of each server host,
        in run order, when the host axis's hosts are independent (meta `host_schedule`), so the hosts
        keep in step and a comparison across them pairs cells measured at the same time; else one lane."""
        if self.lanes is None or not self.lanes["concurrent"]:
            return [[cells]]
        rounds: dict[int, dict[str | None, list[Cell]]] = {}
        for cell in cells:
            rounds.setdefault(cell.repeat, {}).setdefault(cell.server_host, []).append(cell)
        return [list(lanes.values()) for lanes in rounds.values()]

    def _run_lanes(
        self, lanes: list[list[Cell]], datasets: Datasets | None, workdir: Path, total: int
    ) -> list[dict[str, Any]]:
        """Each lane's cells one at a time on a thread of its own, the lanes at once; the rows in
        run order. A lane that raises stops the others after their cell in flight, and is raised
        here; an interrupt (Ctrl-C, SIGTERM: the main thread's) commits no cell from then on
        (Results.abandon: the cells in flight ran partly), and the hosts' exit stops their processes."""
        snapshots = {cell.order: self._snapshot(cell, datasets) for lane in lanes for cell in lane}  # prepared here
        rows: dict[int, dict[str, Any]] = {}
        stop = threading.Event()  # a lane raised, or the run was interrupted: the others take no more cells

        def run(lane: list[Cell]) -> None:
            for cell in lane:
                if stop.is_set():
                    return
                rows[cell.order] = self._run_one(cell, snapshots[cell.order], workdir, total)

        def interrupted() -> None:  # before the lanes are let end: no cell of theirs is stored from now on
            self.results.abandon()
            stop.set()

        _at_once({f"lane-{lane[0].server_host}": functools.partial(run, lane) for lane in lanes}, stop, interrupted)
        return [rows[order] for order in sorted(snapshots)]

    def _heard_event(self, event: str, data: dict[str, Any]) -> None:
        with self._heard:
            self.listen(event, data)

    def _run_one(self, cell: Cell, snapshot: dataset.Snapshot | None, workdir: Path, total: int) -> dict[str, Any]:
        self._heard_event("cell_start", {"cell": cell, "total": total})
        why = self._unprepared.get(cell.server_host or "")
        row = self._failed(cell, why) if why else self.runner.at(cell).run(cell, snapshot, workdir)
        self._heard_event("cell_end", {"cell": cell, "row": row})
        return row

    def _failed(self, cell: Cell, why: str) -> dict[str, Any]:
        """A cell of a host whose dataset could not be prepared: failed, committed, nothing run."""
        row = self.runner.new_row(cell)
        row.update(error=f"host {cell.server_host}: its dataset could not be prepared: {why}", ended_at=utc_now())
        self.results.commit_cell(row, [], [])
        return row

    def _snapshot(self, cell: Cell, datasets: Datasets | None) -> dataset.Snapshot | None:
        """The snapshot of the cell's build's format (None for a failed build, or a host whose dataset
        could not be prepared: nothing runs)."""
        if datasets is None or cell.server_host in self._unprepared:
            return None
        build = self.runner.build_for(cell)
        return self._datasets_on(cell.server_host, datasets).get(build) if isinstance(build, Build) else None

    def _prepare_hosts(self, datasets: Datasets) -> None:
        """The installed server's dataset on each server host (with a host axis; else the run's one): at
        once where the hosts run their rounds at once and each prepares its own (prepare_on = "host")."""
        hosts = list(dict.fromkeys(cell.server_host for cell in self.exp.cells()))
        concurrent = self.lanes is not None and self.lanes["concurrent"] and None not in hosts
        if not concurrent or self.exp.file.experiment.prepare_on == "here":
            for host in hosts:
                self._prepare_on(host, datasets)
            return
        self.runner.installed  # noqa: B018 - described once, before the threads share it
        for host in hosts:
            self._datasets_on(host, datasets)
        _at_once({f"prepare-{host}": functools.partial(self._prepare_on, host, datasets) for host in hosts})

    def _prepare_on(self, host: str | None, datasets: Datasets) -> None:
        """The installed server's dataset on `host`. With a host axis, a host whose dataset cannot be
        prepared (it dropped off, its disk is full) fails its own cells, with the cause; the others run."""
        try:
            self._datasets_on(host, datasets).get(self.runner.installed)
        except PerflabError as exc:
            if host is None or host_axis(self.exp.file) is None:
                raise
            self._unprepared[host] = exc.message

    def _datasets_on(self, host: str | None, datasets: Datasets) -> Datasets:
        """The datasets of `host`'s cells, that host made the runner's server host (hosts/server.py):
        the run's own, or with a host axis and prepare_on = "host" (docs/hosts.md) one prepared on each host."""
        if host is None or host_axis(self.exp.file) is None or self.exp.file.experiment.prepare_on == "here":
            self.runner.server_host = self.runner.server_hosts.get(host) if host is not None else None
            return datasets
        if host not in self._on_hosts:  # prepared by a runner placed on the host (CellRunner.at), its own
            placed = self.runner.at(Cell(0, {}, 0, 0, None, {}, {}, server_host=host))
            self._on_hosts[host] = Datasets(placed, self.results, datasets.workdir, self._heard_event, host=host)
        return self._on_hosts[host]


HALT_WAIT_S = 15.0  # how long an interrupted run waits for its lanes to end before it cleans the hosts up


def _at_once(jobs: dict[str, Callable[[], None]], stop: threading.Event | None = None, interrupted: Any = None) -> None:
    """Each of `jobs` (a name -> its work) on a thread of its own, all at once; the first exception one
    raises is raised here once all have ended (`stop` set as it is raised, for the others to end early).
    On an interrupt (Ctrl-C, SIGTERM: the main thread's), `interrupted()` first, then their remote calls
    fail from then on (transport.halt_others) and they get HALT_WAIT_S to end, so none starts a process on
    a host after the run's hosts are cleaned up (hosts/server.run_hosts)."""
    raised: list[BaseException] = []

    def job(work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - raised in the main thread
            raised.append(exc)
            if stop is not None:
                stop.set()

    threads = [
        threading.Thread(target=job, args=(work,), name=f"perflab-{name}", daemon=True) for name, work in jobs.items()
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.5)
    except BaseException:
        from perflab.hosts import transport  # (asyncssh: imported only where it is needed)

        if interrupted is not None:
            interrupted()
        transport.halt_others()
        deadline = time.monotonic() + HALT_WAIT_S
        for thread in threads:
            if thread.ident is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        if not any(thread.is_alive() for thread in threads):
            transport.resume_others()
        raise
    if raised:
        raise raised[0]


def needs_retry(row: dict[str, Any], done: list[dict[str, Any]] = ()) -> bool:  # type: ignore[assignment]
    """A stored cell to measure again: one that ran but did not settle (its window caught a
    warm-up or a host's stall that another window need not), or one that failed where the same
    variant at the same thread count has run well in this run (`done`): then the failure is not
    one every run of it meets (a time-out, a client that lost its server, a host's hiccup). A
    variant that has never run well fails deterministically as far as the run can tell (a build,
    an allocator that is not mapped, a crash the variant causes) and would fail twice."""
    if row.get("status") == "ok":
        return row.get("settled") in (False, 0)
    return any(
        r.get("status") == "ok" and r["variant"] == row["variant"] and r["threads"] == row["threads"]
        for r in done
        if r["id"] != row["id"]
    )


def interleave_groups(cells: list[Cell]) -> list[list[Cell]]:
    """The interleaved design's groups: each round's cells of one thread count, in run order
    (the round's drawn order is the order of the turns)."""
    groups: dict[tuple[int, int], list[Cell]] = {}
    for cell in cells:
        groups.setdefault((cell.repeat, cell.threads), []).append(cell)
    return list(groups.values())


def _builds_meta(builds: dict[str | None, Build | BuildError]) -> dict[str, Any]:
    """meta.builds: each named build's record, or its error."""
    return {
        name: build.record() if isinstance(build, Build) else {"name": name, "error": build.message}
        for name, build in builds.items()
        if name is not None
    }
