"""Runs the cells of an experiment, in interleaved order, and commits each as it ends.

Per cell: restore the dataset snapshot, start mariadbd with the variant's options, env and
preload, check the allocator is really mapped, run the warm-up, then the measured window
with the observers, stop the server. A failed cell is stored with its error and log tail,
and the matrix goes on. Everything lives in one temporary directory on /dev/shm, removed
at the end whatever happens.
"""

from __future__ import annotations

import dataclasses
import errno
import datetime as dt
import os
import resource
import shutil
import signal
import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from perflab import allocators, preflight
from perflab.analyze import steady
from perflab.analyze.summary import adaptive_targets
from perflab.errors import (
    AllocatorNotMappedError,
    PerflabError,
    ResourceError,
    ServerCrashedError,
    ServerStartError,
    WorkloadError,
)
from perflab.run import dataset
from perflab.run.observers.profilers import Profilers
from perflab.run.observers.resources import ProcCounters, RssSampler, machine_busy_s, process_cpu_s
from perflab.run.proc import Child, clean_env, recording_pids
from perflab.run.servers.mariadb import MariaDB
from perflab.run.workloads import sysbench
from perflab.spec import Cell, Experiment
from perflab.store.results import Results

TMPFS = Path(preflight.TMPFS)
SPACE_MARGIN = 64 << 20  # tmp tables, logs, the server's own files beside a cell's datadir
SNAPSHOT_DIR = "dataset"  # in the results directory, kept until the run completes
CELL_OVERHEAD_S = 3.0  # restore + start + stop, measured here at about 1-2 s
Listener = Callable[[str, dict[str, Any]], None]


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def cell_seconds(exp: Experiment) -> float:
    spec = exp.file.experiment
    return spec.window_start + spec.duration + CELL_OVERHEAD_S


def estimate_seconds(exp: Experiment, cells: int | None = None) -> float:
    """Wall time for `cells` cells (default: all cells known in advance), dataset included."""
    spec = exp.file
    rows = spec.dataset.tables * spec.dataset.table_size
    prepare = 5 + rows / 100_000 * 1.5
    return prepare + cell_seconds(exp) * (len(exp.cells()) if cells is None else cells)


def cpu_plan(pin: bool) -> tuple[list[int] | None, list[int] | None]:
    """(server CPUs, client CPUs): the first allowed CPU for the server, the rest for sysbench."""
    if not pin:
        return None, None
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[:1], allowed[1:]


def stale_workdirs(base: Path) -> list[tuple[Path, list[int]]]:
    """Work directories whose perflab is gone, with the live processes it started there: a
    pid from the run's `pids` file counts only if its command line still names that work
    directory (a recycled pid belongs to someone else and is never touched)."""
    out = []
    for path in sorted(base.glob("perflab-*")):
        try:
            owner = int((path / "owner.pid").read_text(encoding="ascii"))
        except (OSError, ValueError):
            continue
        if not Path(f"/proc/{owner}").exists():
            out.append((path, [pid for pid in _logged_pids(path) if _started_in(pid, path)]))
    return out


def remove_stale_workdirs(base: Path) -> list[tuple[Path, list[int]]]:
    """Delete work directories left by a perflab that died without cleaning up (SIGKILL):
    first stop any process it started that still runs (pdeathsig makes that rare), then
    remove its files. Returns what was removed: (work directory, pids killed)."""
    removed = []
    for path, pids in stale_workdirs(base):
        killed = [pid for pid in pids if _kill(pid)]
        shutil.rmtree(path, ignore_errors=True)
        removed.append((path, killed))
    return removed


def _logged_pids(workdir: Path) -> list[int]:
    try:
        return [int(x) for x in (workdir / "pids").read_text(encoding="ascii").split()]
    except (OSError, ValueError):
        return []


def _started_in(pid: int, workdir: Path) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return str(workdir).encode() in f.read()
    except OSError:
        return False


def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def cpus_allowed(pid: int) -> str | None:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    return None


class Scheduler:
    def __init__(self, exp: Experiment, results: Results, listener: Listener | None = None) -> None:
        self.exp = exp
        self.results = results
        self.listen = listener or (lambda event, data: None)
        self.server_cpus, self.client_cpus = cpu_plan(exp.file.experiment.pin)
        self.sysbench_defaults: dict[str, str] = {}
        self._snapshot_bytes: dict[Path, int] = {}

    def run(self, resume: bool = False) -> list[dict[str, Any]]:
        """Run the cells not yet in the results (all of them in a new run), in run order.

        The dataset snapshot is kept in the results directory (`dataset/`) until the run
        completes, so `perflab run --resume` continues on the same data without preparing."""
        base = TMPFS if TMPFS.is_dir() else Path(tempfile.gettempdir())
        remove_stale_workdirs(base)
        workdir = Path(tempfile.mkdtemp(prefix="perflab-", dir=base))
        (workdir / "owner.pid").write_text(str(os.getpid()), encoding="ascii")
        self.results.set_meta(workdir=str(workdir))
        done = self.results.cells() if resume else []
        try:
            with recording_pids(workdir / "pids"):
                self._run_cells(workdir, resume, done)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise ResourceError(f"no space left: {exc}", self._space_hint()) from None
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_FULL:  # locked, I/O error...: not a matter of space
                raise
            raise ResourceError(f"no space left: the results database could not be written: {exc}",
                                self._space_hint()) from None  # fmt: skip
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(self.results.dir / SNAPSHOT_DIR, ignore_errors=True)  # complete: not needed any more
        return done

    def _run_cells(self, workdir: Path, resume: bool, done: list[dict[str, Any]]) -> None:
        snapshot = self._snapshot(workdir, resume)
        self.sysbench_defaults = sysbench.known_options(self.exp.file.workload.test)
        if self.exp.file.experiment.adaptive:
            self._run_adaptive(snapshot, workdir, done)
            return
        have = {row["key"] for row in done}
        cells = [cell for cell in self.exp.cells() if cell.key not in have]
        for cell in cells:
            done.append(self._run_one(cell, snapshot, workdir, len(cells)))

    def _snapshot(self, workdir: Path, resume: bool) -> dataset.Snapshot:
        kept = self.results.dir / SNAPSHOT_DIR
        known = self.results.meta().get("dataset") or {}
        if resume and kept.is_dir() and known.get("data_bytes"):
            started = time.monotonic()
            dataset.copy_tree(kept, workdir / "snapshot")
            self.listen("snapshot_reused", {"path": kept, "seconds": time.monotonic() - started})
            return dataset.Snapshot(workdir / "snapshot", known["data_bytes"], known.get("prepare_s") or 0.0)
        if resume:
            self.results.set_meta(dataset_reprepared=True)  # different random rows than the first cells had
        snapshot = self._prepare(workdir)
        self.results.set_meta(dataset={"data_bytes": snapshot.data_bytes, "prepare_s": snapshot.prepare_s,
                                       "buffer_pool": snapshot.buffer_pool})  # fmt: skip
        shutil.rmtree(kept, ignore_errors=True)
        try:
            dataset.copy_tree(snapshot.datadir, kept)
        except OSError:
            shutil.rmtree(kept, ignore_errors=True)  # a partial snapshot must never be resumed from
            raise
        return snapshot

    def _space_hint(self) -> str:
        return (f"free space on {TMPFS} (datadirs) or {self.results.dir} (results), or use a smaller dataset; "
                f"the stored cells are intact: `perflab run --resume {self.results.dir}` continues")

    def _check_space(self, snapshot: dataset.Snapshot, workdir: Path) -> None:
        """Before a cell: room on the tmpfs for one more copy of the dataset, and on the
        results disk for its logs; else stop now, with the stored cells intact."""
        if snapshot.datadir not in self._snapshot_bytes:
            self._snapshot_bytes[snapshot.datadir] = dataset.tree_bytes(snapshot.datadir)
        need = self._snapshot_bytes[snapshot.datadir] + SPACE_MARGIN
        free = shutil.disk_usage(workdir).free
        if free < need:
            raise ResourceError(f"{TMPFS} has {free >> 20} MiB free; a cell needs {need >> 20} MiB (a copy of the "
                                "dataset and room beside it)", self._space_hint())  # fmt: skip
        if shutil.disk_usage(self.results.dir).free < 16 << 20:
            raise ResourceError(f"{self.results.dir} has less than 16 MiB free", self._space_hint())

    def _run_one(self, cell: Cell, snapshot: dataset.Snapshot, workdir: Path, total: int) -> dict[str, Any]:
        self.listen("cell_start", {"cell": cell, "total": total})
        row = self._run_cell(cell, snapshot, workdir)
        self.listen("cell_end", {"cell": cell, "row": row})
        return row

    def _run_adaptive(self, snapshot: dataset.Snapshot, workdir: Path, done: list[dict[str, Any]]) -> None:
        """repeats = "auto": interleaved rounds; after min_repeats rounds, a round repeats
        only the (variant, threads) groups whose 95% CI is still wider than target_ci, until
        all are tight, max_repeats is reached or the next round would overrun time_budget
        (counted from this invocation's start). Cells already in `done` (a resumed run) are
        not run again; the rounds they belong to are replayed from the stored results."""
        spec = self.exp.file.experiment
        started, ran = time.monotonic(), 0
        have = {row["key"] for row in done}
        pending: set[tuple[str, int]] | None = None  # None: every group
        stop = "all targets met"
        repeat = 0
        while pending is None or pending:
            if repeat == spec.max_repeats:
                stop = f"max_repeats ({spec.max_repeats}) reached"
                break
            start = max((row["id"] for row in done), default=-1) + 1
            cells = [c for c in self.exp.round(repeat + 1, only=pending) if c.key not in have]
            cells = [dataclasses.replace(c, order=start + i) for i, c in enumerate(cells)]
            spent = time.monotonic() - started
            per_cell = spent / ran if ran else cell_seconds(self.exp)
            if spec.time_budget and repeat >= spec.min_repeats and spent + per_cell * len(cells) > spec.time_budget:
                stop = f"time_budget ({spec.time_budget:.0f} s) would be exceeded by the next round"
                break
            repeat += 1
            planned = len(done) + len(cells)
            for cell in cells:
                done.append(self._run_one(cell, snapshot, workdir, planned))
                ran += 1
            if repeat >= spec.min_repeats:
                targets = adaptive_targets(done, spec.target_ci)
                pending = {key for key, target in targets.items() if not target["met"]}
                self.results.set_meta(adaptive=_adaptive_meta(spec, repeat, None, targets))
        self.results.set_meta(adaptive=_adaptive_meta(spec, repeat, stop, adaptive_targets(done, spec.target_ci)))

    def _prepare(self, workdir: Path) -> dataset.Snapshot:
        spec = self.exp.file
        self.listen("prepare_start", {})
        snapshot = dataset.prepare(
            workdir,
            test=spec.workload.test,
            tables=spec.dataset.tables,
            table_size=spec.dataset.table_size,
            options=spec.workload.options,
            server_options=spec.server_options,
            log=self.results.dir / "logs" / "prepare.txt",
        )
        self.listen("prepare_end", {"snapshot": snapshot})
        return snapshot

    def _run_cell(self, cell: Cell, snapshot: dataset.Snapshot, workdir: Path) -> dict[str, Any]:
        self._check_space(snapshot, workdir)
        logs = self.results.log_dir(cell.order)
        rundir = workdir / f"cell-{cell.order:04d}"
        rundir.mkdir()
        row: dict[str, Any] = {
            "id": cell.order, "key": cell.key, "variant": cell.variant, "threads": cell.threads,
            "repeat": cell.repeat, "status": "failed", "error": None, "log_tail": None,
            "started_at": now(), "ended_at": None, "preload": cell.preload, "env": cell.env,
            "server_options": cell.server_options, "window_start_s": self.exp.file.experiment.window_start,
            "pinning": {"server_cpus": self.server_cpus, "client_cpus": self.client_cpus},
        }  # fmt: skip
        intervals: list[dict[str, Any]] = []
        rss: list[tuple[float, int]] = []
        options = {"innodb_buffer_pool_size": snapshot.buffer_pool, **cell.server_options}
        preload = allocators.resolve(cell.preload) if cell.preload else None
        server = MariaDB(rundir, rundir / "data", options, env=cell.env, preload=preload, cpus=self.server_cpus)
        try:
            restore_s = dataset.restore(snapshot, rundir / "data")
            with server:
                row.update(self._check_allocator(server.pid, cell.preload, preload))
                row["pinning"]["server_cpus_allowed"] = cpus_allowed(server.pid)
                intervals, rss, measured = self._workload(cell, server, logs)
                if not server.alive():
                    raise ServerCrashedError(f"{server.death()} during the run:\n{server.error_lines()}")
            row.update(measured, status="ok")
            row.update(self._steady(intervals, measured["summary"]["qps"]))
            row["resources"]["restore_s"] = round(restore_s, 3)
        except PerflabError as exc:
            row["error"] = exc.message
            if (server.crashed or (server.crashed is None and server.child is not None and not server.alive())) \
                    and not isinstance(exc, ServerStartError) and not exc.message.startswith("server"):  # fmt: skip
                row["error"] = f"{server.death()}; {exc.message}"  # the server's death explains the rest
            row["log_tail"] = server.error_lines(30)
            row["backtrace"] = server.backtrace()
        finally:
            server.stop()
            if server.error_log.exists():
                shutil.copy2(server.error_log, logs / "error.log")
            if server.option_file.exists():
                shutil.copy2(server.option_file, logs / "my.cnf")
            console = rundir / "stdout.log"
            if console.exists() and console.stat().st_size:
                shutil.copy2(console, logs / "stdout.log")
            shutil.rmtree(rundir, ignore_errors=True)
        row["ended_at"] = now()
        self.results.commit_cell(row, intervals, rss)
        return row

    def _steady(self, intervals: list[dict[str, Any]], qps: float) -> dict[str, Any]:
        spec = self.exp.file.experiment
        return steady.cell_fields(intervals, spec.window_start, qps, spec.stall_threshold)

    def _check_allocator(self, pid: int, name: str | None, library: Path | None) -> dict[str, Any]:
        """Prove from /proc/PID/maps that the server runs the allocator the cell asked for."""
        mapped = allocators.mapped_libraries(pid)
        if library is not None:
            if not allocators.is_mapped(library, mapped):
                raise AllocatorNotMappedError(
                    f"{library} ({name}) is not mapped into mariadbd (pid {pid})",
                    "the server may be statically linked or the library failed to load",
                )
            real = os.path.realpath(library)
            return {"allocator_library": real, "allocator_version": allocators.package_version(real)}
        foreign = allocators.foreign_allocators(mapped)
        if foreign:
            raise AllocatorNotMappedError(f"glibc malloc requested but {', '.join(foreign)} is mapped")
        libc = allocators.glibc_library(mapped)
        package = allocators.package_version(libc) if libc else None
        version = os.confstr("CS_GNU_LIBC_VERSION") or "glibc"  # "glibc 2.36"
        return {"allocator_library": libc, "allocator_version": f"{version} ({package})" if package else version}

    def _sysbench(self, cell: Cell, server: MariaDB, warmup: int, seconds: int, out: Path) -> tuple[Child, list[str]]:
        spec = self.exp.file
        argv = sysbench.argv(
            spec.workload.test, "run", socket=server.socket, tables=spec.dataset.tables,
            table_size=spec.dataset.table_size, threads=cell.threads, seconds=warmup + seconds,
            checkpoint=warmup or None, options={**spec.workload.options, **cell.workload_options},
        )  # fmt: skip
        with out.open("w", encoding="utf-8") as sink:
            child = Child(argv, env=clean_env(), stdout=sink, cpus=self.client_cpus)
        return child, argv

    def _workload(self, cell: Cell, server: MariaDB, logs: Path):
        """One sysbench run: `warmup` seconds, a checkpoint that resets its statistics, then
        the measured window, which the observers and the /proc counters cover."""
        spec = self.exp.file.experiment
        warmup, seconds = int(round(spec.window_start)), int(round(spec.duration))
        out = logs / "sysbench.txt"
        started = time.monotonic()
        child, argv = self._sysbench(cell, server, warmup, seconds, out)
        with child:
            if warmup:
                _sleep_until(started + warmup, child)
            before = ProcCounters.read(server.pid)
            self_before = resource.getrusage(resource.RUSAGE_SELF)
            children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            busy_before, client_before, window_started = machine_busy_s(), process_cpu_s(child.pid), time.monotonic()
            with RssSampler(server.pid) as rss, Profilers(self.exp.file.observe, server.pid, server.rundir) as profilers:
                code = _wait(child, warmup + seconds, spec.timeout_margin)
            self_after = resource.getrusage(resource.RUSAGE_SELF)
            children_after = resource.getrusage(resource.RUSAGE_CHILDREN)  # sysbench and the profilers, reaped
            used = ProcCounters.read(server.pid).minus(before)
            busy, window = machine_busy_s() - busy_before, time.monotonic() - window_started
        text = out.read_text(encoding="utf-8", errors="replace")
        summary = sysbench.parse_summary(text)
        if code != 0 or summary is None:
            tail = "\n".join(text.strip().splitlines()[-10:])
            how = f"died: signal {-code} ({signal.Signals(-code).name})" if code < 0 else f"exited with code {code}"
            raise WorkloadError(f"sysbench {how}:\n{tail}", f"full output: {out}")
        intervals = [_interval(iv, warmup) for iv in sysbench.parse_intervals(text)]
        usage = child.rusage
        resources = _resources(used, summary.transactions, rss)
        resources["client_cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3) if usage else None
        resources["client_user_s"] = round(usage.ru_utime, 3) if usage else None
        resources["client_sys_s"] = round(usage.ru_stime, 3) if usage else None
        resources["harness_cpu_s"] = round(
            (self_after.ru_utime - self_before.ru_utime) + (self_after.ru_stime - self_before.ru_stime), 4
        )
        # Everything else the machine ran during the window, in cores: a benchmark on a busy
        # machine measures the neighbours too. The client's window CPU is its total less what
        # it had used at the window start (it has exited, so its rusage is final).
        client_window = (usage.ru_utime + usage.ru_stime - client_before) if usage else 0.0
        reaped = (children_after.ru_utime - children_before.ru_utime) + (children_after.ru_stime - children_before.ru_stime)
        resources["profiler_cpu_s"] = round(max(0.0, reaped - (resources["client_cpu_s"] or 0.0)), 3)
        ours = used.user_s + used.sys_s + client_window + resources["harness_cpu_s"] + resources["profiler_cpu_s"]
        resources["other_cpu_cores"] = round(max(0.0, busy - ours) / window, 3) if window > 0 else None
        measured = {
            "summary": summary.to_dict(),
            "resources": resources,
            "sysbench_options": sysbench.effective_options(self.sysbench_defaults, argv),
        }
        profilers.store(self.results, cell.order, summary.transactions, seconds)  # profiles/ + profiles table
        return intervals, rss.samples, measured


def _sleep_until(deadline: float, child: Child) -> None:
    while (left := deadline - time.monotonic()) > 0 and child.poll() is None:
        time.sleep(min(left, 0.5))


def _wait(child: Child, seconds: int, margin: float) -> int:
    """The cell's deadline: a stuck client (or a server that stopped answering) is killed."""
    try:
        return child.wait(timeout=seconds + margin)
    except TimeoutError:
        child.kill()
        raise WorkloadError(
            f"timed out: sysbench did not finish {seconds} s of work in {seconds + margin:.0f} s; killed",
            "a hung server or client; raise experiment.timeout_margin if the machine is just slow",
        ) from None


def _interval(iv: sysbench.Interval, warmup: int) -> dict[str, Any]:
    data = asdict(iv)
    data.pop("threads")
    data["warmup"] = int(iv.t <= warmup)
    return data


def _resources(used: ProcCounters, transactions: int, rss: RssSampler) -> dict[str, Any]:
    per = (lambda n: round(n / transactions, 4)) if transactions else (lambda n: None)
    return {
        "rss_end_bytes": rss.end,
        "rss_peak_bytes": rss.peak,
        "server_cpu_s": round(used.user_s + used.sys_s, 3),
        "server_user_s": round(used.user_s, 3),
        "server_sys_s": round(used.sys_s, 3),
        "minor_faults": used.minor_faults,
        "major_faults": used.major_faults,
        "voluntary_ctx_switches": used.voluntary_ctx,
        "involuntary_ctx_switches": used.involuntary_ctx,
        "minor_faults_per_txn": per(used.minor_faults),
        "major_faults_per_txn": per(used.major_faults),
        "ctx_switches_per_txn": per(used.voluntary_ctx + used.involuntary_ctx),
        "server_cpu_us_per_txn": per((used.user_s + used.sys_s) * 1e6),
    }


def _adaptive_meta(spec: Any, rounds: int, stop: str | None, targets: dict[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    return {
        "target_ci": spec.target_ci, "min_repeats": spec.min_repeats, "max_repeats": spec.max_repeats,
        "time_budget_s": spec.time_budget, "rounds": rounds, "stop_reason": stop,
        "groups": [{"variant": key, "threads": threads, **target} for (key, threads), target in targets.items()],
    }  # fmt: skip
