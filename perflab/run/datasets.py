"""One dataset snapshot per on-disk format, kept in the results directory until the run completes.

Builds that open the same datadirs (`Build.format`: server kind and major.minor, such as
"mariadb-10.11") share one snapshot. The installed server's format is prepared by the
installed server, as it always was (`RESULTS/dataset/`, meta `dataset`); a build of another
format (another major version, MySQL, Percona Server) gets its own, initialised, served and
shut down by its own binary (`RESULTS/dataset-FORMAT/`). Meta `datasets` holds every format's
record: where it is kept, its size and buffer pool (PostgreSQL: shared_buffers), which binary prepared it and how it was
initialised, and which builds ran on it (the report says which variants had their own).

    datasets = Datasets(runner, results, workdir, listen, resume=False)
    snapshot = datasets.get(build)                       # prepared once per format, or restored
    datasets.prepare_all(runner.builds, used)            # a build whose own dataset fails: its cells fail
"""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from perflab import servers
from perflab.errors import PerflabError, ResourceError, UsageError
from perflab.places.copy import copy_tree
from perflab.servers import dataset
from perflab.builds import Build, BuildError
from perflab.run.cell import CellRunner, Listener
from perflab.store.results import Results

_HOSTS_SAVED = threading.Lock()  # meta host_datasets is read, then written: by one host's Datasets at a time
KEPT = "dataset"  # RESULTS/dataset (the installed server's format), RESULTS/dataset-FORMAT (others)


def kept_dirs(results_dir: Path) -> list[Path]:
    """Every snapshot a run keeps for --resume, removed when it completes."""
    return [results_dir / KEPT, *sorted(results_dir.glob(f"{KEPT}-*"))]


class Datasets:
    """The run's snapshots by format; `keep` copies each into the results directory for --resume."""

    def __init__(
        self,
        runner: CellRunner,
        results: Results,
        workdir: Path,
        listener: Listener | None = None,
        *,
        resume: bool = False,
        keep: bool = True,
        host: str | None = None,
    ) -> None:
        self.runner = runner
        self.host = host  # prepared on this server host (a host axis with prepare_on = "host"): not kept
        self.results = results
        self.workdir = workdir
        self.listen = listener or (lambda event, data: None)
        self.resume = resume
        self.keep = keep
        # the installed server, whose format's dataset is RESULTS/dataset; None for a kind without
        # one (MySQL: every variant names a build, each format has a dataset of its own)
        self.installed = None if runner.kind.installed_refusal else runner.installed
        self.snapshots: dict[str, dataset.Snapshot] = {}
        self.failed: dict[str, tuple[Path | None, str]] = {}  # format -> (log, reason)
        self.records: dict[str, dict[str, Any]] = {}
        self.previous = results.meta() if resume else {}  # the interrupted run's, read before any change

    def own(self, fmt: str) -> bool:
        """Is `fmt` another format than the installed server's (its own, separately prepared dataset)?"""
        return self.installed is None or fmt != self.installed.format

    def dirname(self, fmt: str) -> str:
        return f"{KEPT}-{fmt}" if self.own(fmt) else KEPT

    def get(self, build: Build) -> dataset.Snapshot:
        """The snapshot `build` opens: restored from the results directory on --resume, else
        prepared now (by the installed server for its format, else by `build` itself)."""
        fmt = build.format
        if fmt not in self.snapshots:
            kept = self._kept(fmt) if self.host is None else None  # one on a host is prepared again
            self.snapshots[fmt] = kept or self._prepare(fmt, build)
        return self.snapshots[fmt]

    def prepare_all(self, builds: dict[str | None, Build | BuildError], used: set[str | None]) -> None:
        """The snapshot of every format the cells need, before the first cell. A build whose own
        dataset cannot be prepared is replaced by its error (step "dataset"): its cells fail, the
        others run. The installed format's failing, or a full disk, stops the run as before."""
        users: dict[str, list[str | None]] = {}
        for name in sorted(used, key=lambda n: (n is not None, n or "")):
            build = builds.get(name)
            if not isinstance(build, Build):
                continue
            users.setdefault(build.format, []).append(name)
            if build.format not in self.failed:
                self._try(build)
            if build.format in self.failed:
                log, reason = self.failed[build.format]
                builds[name] = BuildError(str(name), "dataset", log, reason)
        for fmt, names in users.items():
            self.records.setdefault(fmt, {}).update(builds=names)
        self._save()

    def _try(self, build: Build) -> None:
        try:
            self.get(build)
        except ResourceError:
            raise
        except PerflabError as exc:
            if not self.own(build.format):
                raise
            self.failed[build.format] = self._failure(build, exc)

    def _kept(self, fmt: str) -> dataset.Snapshot | None:
        """The snapshot of an interrupted run of these results (--resume), copied back to tmpfs."""
        kept = self.results.dir / self.dirname(fmt)
        meta = self.previous
        known = (meta.get("datasets") or {}).get(fmt) or ({} if self.own(fmt) else meta.get("dataset") or {})
        if not (self.resume and kept.is_dir() and known.get("data_bytes")):
            if self.resume:
                self.results.set_meta(dataset_reprepared=True)  # different random rows than the first cells had
            return None
        _same_kind(kept, fmt)
        started = time.monotonic()
        target = self.workdir / self._workname(fmt)
        copy_tree(kept, target, in_memory=not self.runner.storage.on_disk)  # the work directory's medium
        self.listen("snapshot_reused", {"path": kept, "seconds": time.monotonic() - started, "format": fmt})
        self.records[fmt] = {k: v for k, v in known.items() if k != "builds"}
        return dataset.Snapshot(target, known["data_bytes"], known.get("prepare_s") or 0.0, fmt)

    def _prepare(self, fmt: str, build: Build) -> dataset.Snapshot:
        by = build if self.own(fmt) else None
        snapshot = replace(self.runner.prepare(self.workdir, build=by, name=self._workname(fmt)), format=fmt)
        prepared_by = by or self.installed
        assert prepared_by is not None  # own(fmt) whenever there is no installed server
        record = {
            "dir": self.dirname(fmt) if snapshot.on_host is None else None,  # on a server host: not kept
            "own": self.own(fmt),
            "data_bytes": snapshot.data_bytes,
            "prepare_s": snapshot.prepare_s,
            **self._cache_size(snapshot),
            "prepared_by": {
                "name": prepared_by.name,
                "version": prepared_by.version,
                "binary": str(prepared_by.binary),
            },
            "init": snapshot.init,
        }
        self.records[fmt] = record
        if not self.own(fmt) and self.host is None:  # as before: the report's dataset size, and --resume
            self.results.set_meta(
                dataset={
                    k: record[k] for k in ("data_bytes", "prepare_s", "buffer_pool", "shared_buffers") if k in record
                },
            )
        self._save()
        if self.keep and snapshot.on_host is None:  # one on the server host is prepared again by --resume
            self._keep(snapshot, self.results.dir / self.dirname(fmt))
        return snapshot

    def _cache_size(self, snapshot: dataset.Snapshot) -> dict[str, str]:
        """The server's data cache the dataset stage sized to hold it: InnoDB's buffer pool, or
        PostgreSQL's shared_buffers (a PostgreSQL experiment has no buffer pool)."""
        return self.runner.kind.cache_size(snapshot)

    def _workname(self, fmt: str) -> str:
        name = f"snapshot-{fmt}" if self.own(fmt) else "snapshot"
        return name if self.host is None else f"{name}-on-{self.host}"

    def _keep(self, snapshot: dataset.Snapshot, kept: Path) -> None:
        shutil.rmtree(kept, ignore_errors=True)
        try:
            copy_tree(snapshot.datadir, kept, sparse=True)  # InnoDB's redo log: mostly zeros
        except OSError:
            shutil.rmtree(kept, ignore_errors=True)  # a partial snapshot must never be resumed from
            raise

    def _failure(self, build: Build, exc: PerflabError) -> tuple[Path | None, str]:
        """(the log to read, the reason) of a format whose own dataset could not be prepared."""
        shutil.rmtree(self.workdir / self._workname(build.format), ignore_errors=True)
        logs = [self.results.dir / "logs" / f"prepare-{build.format}{end}" for end in ("-init.txt", "-error.log")]
        found = [p for p in logs if p.is_file()]
        log = max(found, key=lambda p: p.stat().st_mtime_ns) if found else None  # the step that failed last
        self.records[build.format] = {"dir": None, "own": True, "error": exc.message}
        reason = f"{build.version} opens {build.format} datadirs; its own dataset could not be prepared: {exc.message}"
        return log, reason

    def _save(self) -> None:
        if self.host is None:
            self.results.set_meta(datasets=self.records)
        else:  # a host axis's dataset prepared on each host: meta `host_datasets`, by host (hosts at once: one by one)
            with _HOSTS_SAVED:
                on_hosts = self.results.meta().get("host_datasets") or {}
                self.results.set_meta(host_datasets={**on_hosts, self.host: self.records})


def _same_kind(kept: Path, fmt: str) -> None:
    """A kept datadir that another kind of server made (or another PostgreSQL major version)
    than the binary that would open it: exit 2, before any server starts on it. It happens when
    the binary changed between a run and its --resume (PERFLAB_PG_BIN, a replaced package)."""
    found = servers.datadir_format(kept)
    if found is None:
        return
    if not servers.opens(fmt, found):  # Percona Server opens MySQL's datadirs
        raise UsageError(
            f"{kept} holds a {found} datadir, and this run's server opens {fmt} ones",
            "resume with the server the run began with (the binary changed since), or start a new run",
        )
