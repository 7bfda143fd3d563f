"""Runs the cells of an experiment, in interleaved order, and commits each as it ends.

Per cell: restore the dataset snapshot, start mariadbd with the variant's options, env and
preload, check the allocator is really mapped, run the warm-up, then the measured window
with the observers, stop the server. A failed cell is stored with its error and log tail,
and the matrix goes on. Everything lives in one temporary directory on /dev/shm, removed
at the end whatever happens.
"""

from __future__ import annotations

import datetime as dt
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from perflab import allocators
from perflab.errors import AllocatorNotMappedError, PerflabError, ServerCrashedError, WorkloadError
from perflab.run import dataset
from perflab.run.observers.profilers import Profilers
from perflab.run.observers.resources import ProcCounters, RssSampler
from perflab.run.proc import Child, clean_env
from perflab.run.servers.mariadb import MariaDB
from perflab.run.workloads import sysbench
from perflab.spec import Cell, Experiment
from perflab.store.results import Results

TMPFS = Path("/dev/shm")
CELL_OVERHEAD_S = 3.0  # restore + start + stop, measured here at about 1-2 s
Listener = Callable[[str, dict[str, Any]], None]


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def estimate_seconds(exp: Experiment) -> float:
    spec = exp.file
    rows = spec.dataset.tables * spec.dataset.table_size
    prepare = 5 + rows / 100_000 * 1.5
    per_cell = spec.experiment.warmup + spec.experiment.duration + CELL_OVERHEAD_S
    return prepare + per_cell * len(exp.cells())


def cpu_plan(pin: bool) -> tuple[list[int] | None, list[int] | None]:
    """(server CPUs, client CPUs): the first allowed CPU for the server, the rest for sysbench."""
    if not pin:
        return None, None
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[:1], allowed[1:]


def remove_stale_workdirs(base: Path) -> None:
    """Delete work directories left by a perflab that was killed with SIGKILL (its children
    died with it through pdeathsig, but nothing could remove its files)."""
    for path in base.glob("perflab-*"):
        try:
            owner = int((path / "owner.pid").read_text(encoding="ascii"))
        except (OSError, ValueError):
            continue
        if not Path(f"/proc/{owner}").exists():
            shutil.rmtree(path, ignore_errors=True)


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

    def run(self) -> list[dict[str, Any]]:
        cells = self.exp.cells()
        base = TMPFS if TMPFS.is_dir() else Path(tempfile.gettempdir())
        remove_stale_workdirs(base)
        workdir = Path(tempfile.mkdtemp(prefix="perflab-", dir=base))
        (workdir / "owner.pid").write_text(str(os.getpid()), encoding="ascii")
        self.results.set_meta(workdir=str(workdir))
        done = []
        try:
            snapshot = self._prepare(workdir)
            self.results.set_meta(dataset={"data_bytes": snapshot.data_bytes, "prepare_s": snapshot.prepare_s,
                                           "buffer_pool": snapshot.buffer_pool})  # fmt: skip
            self.sysbench_defaults = sysbench.known_options(self.exp.file.workload.test)
            for cell in cells:
                self.listen("cell_start", {"cell": cell, "total": len(cells)})
                row = self._run_cell(cell, snapshot, workdir)
                done.append(row)
                self.listen("cell_end", {"cell": cell, "row": row})
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return done

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
        logs = self.results.log_dir(cell.order)
        rundir = workdir / f"cell-{cell.order:04d}"
        rundir.mkdir()
        row: dict[str, Any] = {
            "id": cell.order, "key": cell.key, "variant": cell.variant, "threads": cell.threads,
            "repeat": cell.repeat, "status": "failed", "error": None, "log_tail": None,
            "started_at": now(), "ended_at": None, "preload": cell.preload, "env": cell.env,
            "server_options": cell.server_options, "warmup_s": self.exp.file.experiment.warmup,
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
                    raise ServerCrashedError(f"mariadbd died during the run:\n{server.error_lines()}")
            row.update(measured, status="ok")
            row["resources"]["restore_s"] = round(restore_s, 3)
        except PerflabError as exc:
            row["error"] = exc.message
            row["log_tail"] = server.error_lines(30)
        finally:
            server.stop()
            if server.error_log.exists():
                shutil.copy2(server.error_log, logs / "error.log")
            if server.option_file.exists():
                shutil.copy2(server.option_file, logs / "my.cnf")
            shutil.rmtree(rundir, ignore_errors=True)
        row["ended_at"] = now()
        self.results.commit_cell(row, intervals, rss)
        return row

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
        warmup, seconds = int(round(spec.warmup)), int(round(spec.duration))
        out = logs / "sysbench.txt"
        started = time.monotonic()
        child, argv = self._sysbench(cell, server, warmup, seconds, out)
        with child:
            if warmup:
                _sleep_until(started + warmup, child)
            before = ProcCounters.read(server.pid)
            self_before = resource.getrusage(resource.RUSAGE_SELF)
            with RssSampler(server.pid) as rss, Profilers(self.exp.file.observe, server.pid, server.rundir) as profilers:
                code = _wait(child, warmup + seconds)
            self_after = resource.getrusage(resource.RUSAGE_SELF)
            used = ProcCounters.read(server.pid).minus(before)
        text = out.read_text(encoding="utf-8", errors="replace")
        summary = sysbench.parse_summary(text)
        if code != 0 or summary is None:
            tail = "\n".join(text.strip().splitlines()[-10:])
            raise WorkloadError(f"sysbench exited with code {code}:\n{tail}", f"full output: {out}")
        intervals = [_interval(iv, warmup) for iv in sysbench.parse_intervals(text)]
        usage = child.rusage
        resources = _resources(used, summary.transactions, rss)
        resources["client_cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3) if usage else None
        resources["client_user_s"] = round(usage.ru_utime, 3) if usage else None
        resources["client_sys_s"] = round(usage.ru_stime, 3) if usage else None
        resources["harness_cpu_s"] = round(
            (self_after.ru_utime - self_before.ru_utime) + (self_after.ru_stime - self_before.ru_stime), 4
        )
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


def _wait(child: Child, seconds: int) -> int:
    try:
        return child.wait(timeout=seconds + 120)
    except TimeoutError:
        child.kill()
        raise WorkloadError(f"sysbench did not finish {seconds}s of work in {seconds + 120}s") from None


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
