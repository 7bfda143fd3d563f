"""The dataset prepared on the server host (`[experiment] prepare_on = "host"`, the default with
`server_host`; docs/hosts.md): a new datadir made there by the host's own tool (mariadb-install-db,
initdb: Kind.remote_init), its server started on it as a cell's is (Kind.remote_server), the run's
login created, the workload's loader run here against it over TCP (sysbench prepare, pgbench -i:
Workload.remote_prepare_argv, the password in a file only its owner reads), then a clean shutdown.
The stopped datadir stays in the host's run directory, and every cell restores its own copy from it
there (ServerHost.restore): nothing is packed or sent over SFTP, and the host's server version need
not be this machine's. The run's local work directory holds only an empty placeholder
(Snapshot.datadir; Snapshot.on_host is the path there), and the results directory keeps no copy:
`--resume` prepares it again.

    snapshot = prepare(runner, workdir, log, "snapshot")   # CellRunner.prepare, with a server host
"""

from __future__ import annotations

import contextlib
import shutil
import time
from pathlib import Path

from perflab.errors import HostLostError
from perflab import workloads
from perflab.servers import dataset
from perflab.run.context import Runner
from perflab.places.proc import call


def prepare(runner: Runner, workdir: Path, log: Path, name: str) -> dataset.Snapshot:
    """The snapshot on the server host, at `<its run directory>/<name>`; the loader's output in
    `log`, the server's log beside it (`-error.log`)."""
    place, kind, spec = runner.server_host, runner.kind, runner.exp.file
    workload = workloads.of(spec)
    started = time.monotonic()
    remote = f"{place.datadirs}/{name}"  # the run directory, or its directory on the host's disk
    local = workdir / f"prepare-{name}"  # the server's local files: its option file, its log fetched back
    local.mkdir()
    init = kind.remote_init(place, remote)
    server = kind.remote_server(place, remote, dict(spec.server_options), local=local)
    try:
        with server:
            server.sql(f"CREATE DATABASE {workload.database}")
            login = kind.remote_login(server, place.password)
            argv, env = workload.remote_prepare_argv(spec, server, login, place.password)
            log.write_text(call(argv, what=f"{workload.name} prepare", env=env, timeout=3600), encoding="utf-8")
            data_bytes = server.data_bytes(workload.database)
            server.stop(clean=True)  # a checkpoint: the snapshot needs no recovery
    finally:
        with contextlib.suppress(OSError):
            shutil.copy2(server.error_log, log.with_name(log.stem + "-error.log"))
        with contextlib.suppress(HostLostError):
            server.remove()  # the server's own directory there; the datadir stays, for the cells
        shutil.rmtree(local, ignore_errors=True)
    placeholder = workdir / name
    placeholder.mkdir()
    return dataset.Snapshot(
        placeholder, data_bytes, time.monotonic() - started, "", f"{init} on host {place.name}", on_host=remote
    )
