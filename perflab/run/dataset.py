"""The dataset: prepared once per on-disk format, snapshotted, restored into every cell.

`prepare()` creates a datadir on tmpfs, starts a server on it, runs `sysbench <test>
prepare` (or the workload's own: `go-tpc tpcc prepare`, workloads/), shuts the server down cleanly and keeps the stopped datadir as the snapshot. By
default the installed server does it; `build=` makes a build of another format initialise,
serve and shut down its own (run/datasets.py keeps one snapshot per format).
`restore()` copies the snapshot for one cell (seconds faster than preparing again; see
bench/restore.py). The buffer pool is sized from the prepared data so every cell is in memory.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perflab.builds import Build
from perflab.places.proc import call, clean_env
from perflab.run.storage import clone_file
from perflab.workloads import Workload, sysbench
from perflab.servers.mysql_protocol import initialise
from perflab.servers.managed import LOOPBACK
from perflab.servers.mysqld import Mysqld

MiB = 1 << 20


@dataclass(frozen=True)
class Snapshot:
    datadir: Path
    data_bytes: int  # size of the sbtest schema on disk
    prepare_s: float  # wall time of init + prepare + shutdown
    format: str = ""  # the on-disk format of the servers that open it: "mariadb-10.11"
    init: str = ""  # what initialised the datadir: "mariadb-install-db", "mysqld --initialize-insecure"
    # a snapshot prepared on the server host (run/remote_dataset.py): its datadir's path there (the
    # local `datadir` is then an empty placeholder); None: prepared here
    on_host: str | None = None

    @property
    def buffer_pool(self) -> str:
        """A buffer pool that holds the whole dataset with room to spare (>= 256M)."""
        need = max(256 * MiB, self.data_bytes * 1.5)
        return f"{math.ceil(need / (128 * MiB)) * 128}M"

    @property
    def shared_buffers(self) -> str:
        """PostgreSQL's shared_buffers, sized like the buffer pool: the dataset with room (>= 128MB)."""
        need = max(128 * MiB, self.data_bytes * 1.5)
        return f"{math.ceil(need / (64 * MiB)) * 64}MB"


def tree_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                continue
    return total


def prepare(
    workdir: Path,
    *,
    test: str,
    tables: int,
    table_size: int,
    options: dict[str, Any],
    server_options: dict[str, Any],
    log: Path,
    build: Build | None = None,
    name: str = "snapshot",
    workload: Workload | None = None,
    spec: Any = None,
) -> Snapshot:
    """Build the snapshot datadir `workdir/name`, initialised and served by `build` (None: the
    installed server); sysbench output goes to `log`, the initialisation's beside it.
    `workload` (workloads/): another tool's database, setup SQL and prepare command (go-tpc's
    warehouses), with `spec`; None: sysbench with `test`, `tables`, `table_size` and `options`."""
    start = time.monotonic()
    rundir = workdir / f"prepare-{name}"
    datadir = workdir / name
    init = initialise(datadir, build, log.with_name(log.stem + "-init.txt"))
    rundir.mkdir(parents=True, exist_ok=True)
    server = Mysqld(rundir, datadir, server_options, build=build)
    if workload and workload.connects_by_tcp:
        server.bind_address = LOOPBACK
    error_log = log.with_name(log.stem + "-error.log")
    try:
        with server:
            database = workload.database if workload else "sbtest"
            server.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
            if workload and workload.setup_sql():
                server.sql(workload.setup_sql())
            argv = (
                workload.prepare_argv(spec, server)
                if workload
                else sysbench.argv(
                    test,
                    "prepare",
                    socket=server.socket,
                    tables=tables,
                    table_size=table_size,
                    threads=min(tables, os.cpu_count() or 1),
                    options=options,
                )
            )
            what = f"{workload.name if workload else 'sysbench'} prepare"
            output = call(argv, what=what, env=clean_env(), timeout=3600)
            log.write_text(output, encoding="utf-8")
            server.stop(clean=True)  # a clean shutdown: the snapshot must need no recovery
    except BaseException:
        with contextlib.suppress(OSError):  # the server's own words on why, kept with the results
            console = rundir / "stdout.log"  # what it printed when it died before its log was open
            shutil.copy2(server.error_log if server.error_log.exists() else console, error_log)
        raise
    shutil.copy2(server.error_log, error_log)
    shutil.rmtree(rundir, ignore_errors=True)
    shutil.rmtree(workdir / f"{name}-files", ignore_errors=True)  # MySQL's secure-file-priv at init
    fmt = build.format if build is not None else ""
    return Snapshot(datadir, tree_bytes(datadir / database), time.monotonic() - start, fmt, init.method)


def restore(snapshot: Snapshot, dest: Path) -> float:
    """Copy the snapshot to `dest` (which must not exist); returns seconds taken."""
    return restore_with_method(snapshot, dest)[0]


def restore_with_method(snapshot: Snapshot, dest: Path) -> tuple[float, str]:
    """Copy the snapshot to `dest`: (seconds taken, "reflink" or "copy": how its files were
    copied; one file that could not be shared makes it "copy")."""
    start = time.monotonic()
    methods = copy_tree(snapshot.datadir, dest)
    return time.monotonic() - start, "reflink" if methods == {"reflink"} else "copy"


def copy_tree(source: Path, dest: Path) -> set[str]:
    """copytree with reflinks where the filesystem has them (run/storage.py clone_file), with a
    full disk reported as one OSError(ENOSPC) instead of shutil.Error's list of every file that
    failed; returns how the files were copied ({"reflink"}, {"copy"} or both)."""
    methods: set[str] = set()

    def clone(src: str, dst: str) -> str:
        methods.add(clone_file(src, dst))
        return dst

    try:
        shutil.copytree(source, dest, symlinks=True, copy_function=clone)
        return methods
    except shutil.Error as exc:
        if any(f"[Errno {errno.ENOSPC}]" in str(why) for _, _, why in exc.args[0]):
            raise OSError(errno.ENOSPC, f"no space left on device while copying the dataset to {dest}") from None
        raise
