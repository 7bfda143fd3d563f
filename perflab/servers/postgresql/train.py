"""PGO training of an instrumented PostgreSQL build (run/cell.CellRunner.train calls it through the kind).

The instrumented postgres (built with -fprofile-generate -fprofile-update=atomic) runs as the
`postgres` user when perflab is root, and libgcov writes each object's counts to the object's
absolute path in the build tree: perflab's cache, which that user cannot write. So the server
runs with GCOV_PREFIX=RUN/gcov (GCOV_PREFIX_STRIP=0): every backend adds its counts there when
it exits, the postmaster and its auxiliary processes at the fast shutdown (SIGINT, waited for).
The files are then moved to where the objects are, RUN/gcov/ABS/PATH.gcda -> /ABS/PATH.gcda,
where pgo.py collects them, as it does a MariaDB training's.

The workload is the experiment's own: pgbench (the installed one: its own counts are not the
server's, and it runs as root) or sysbench's pgsql driver, at the largest client count, for
`train_duration`, on a copy of the experiment's dataset.

    log = train(exp_file, build, spec, snapshot, workdir / "pgo-train")
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.servers import dataset
from perflab.servers.kind import Tool
from perflab.places.proc import call, clean_env
from perflab.servers.postgresql.server import PostgreSQL
from perflab.spec.builds import BuildSpec

if TYPE_CHECKING:
    from perflab.builds import Build
    from perflab.spec.schema import ExperimentFile

GCOV = "gcov"


def train(
    exp: ExperimentFile, build: Build, spec: BuildSpec, snapshot: dataset.Snapshot, rundir: Path, tool: Tool
) -> str:
    """Run the workload of `exp` (the experiment file; `tool`: its workload: pgbench, or sysbench's
    pgsql driver) on the instrumented server, stop it cleanly, put its .gcda files in the tree."""
    gcov = rundir / GCOV
    gcov.mkdir(parents=True, exist_ok=True)  # given to the server's user with the run directory
    env = {"GCOV_PREFIX": str(gcov), "GCOV_PREFIX_STRIP": "0"}
    options = {"shared_buffers": snapshot.shared_buffers, **exp.server_options}
    server = PostgreSQL(rundir, rundir / "data", options, env=env, build=build)
    try:
        dataset.restore(snapshot, rundir / "data")
        with server:
            argv = tool.training_argv(exp, server, round(spec.train_duration))
            out = call(argv, what="PGO training run", env=clean_env(), timeout=spec.train_duration + 600)
            server.stop(clean=True)  # the postmaster's and the last backends' counts are written at exit
    finally:
        server.stop()
    moved = collect(gcov)
    return f"$ {' '.join(argv)}\n{out}\n{moved} .gcda files written by the server\n"


def collect(gcov: Path) -> int:
    """RUN/gcov/ABS/PATH.gcda -> /ABS/PATH.gcda (the object's own directory in the build tree)."""
    moved = 0
    for data in sorted(gcov.rglob("*.gcda")):
        target = Path("/") / data.relative_to(gcov)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(data, target)
        moved += 1
    return moved
