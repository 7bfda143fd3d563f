"""[builds] on server = "postgresql", for real, without building a server (CI never builds one):
a `basedir` made of the installed postgresql-15's binaries, copied into a tree of Debian's
layout (postgres finds share/ and lib/ relative to its own binary), whose pgbench is a wrapper
that records its command line and runs the installed pgbench. The cell of that build must run
the tree's postgres and pgbench and record the build; bad input exits 2 before anything starts."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.archive import bookworm_version
from tests.conftest import perflab
from tests.integration.helpers import pgbench_experiment, processes, runs_tmpfs, write_experiment

INSTALLED = Path("/usr/lib/postgresql/15")
EXPERIMENT = pgbench_experiment(
    "pg-basedir",
    rest="""
[builds.copy]
basedir = "{basedir}"

[variants.build]
installed = {{}}
copy      = {{ build = "copy" }}
""",
)


@pytest.fixture
def basedir() -> Iterator[Path]:
    """ROOT/usr/lib/postgresql/15: copies of postgres and initdb (not links: postgres resolves
    its own path), lib/ and share/ linked to the installed ones, a recording pgbench wrapper.
    Under /tmp, searchable by the postgres user who runs the server."""
    root = Path(tempfile.mkdtemp(prefix="perflab-pgbase-", dir="/tmp"))
    root.chmod(0o755)
    base = root / "usr/lib/postgresql/15"
    (base / "bin").mkdir(parents=True)
    for tool in ("postgres", "initdb", "psql"):
        shutil.copy2(INSTALLED / "bin" / tool, base / "bin" / tool)
    (base / "lib").symlink_to(INSTALLED / "lib")
    (root / "usr/share/postgresql").mkdir(parents=True)
    (root / "usr/share/postgresql/15").symlink_to("/usr/share/postgresql/15")
    wrapper = base / "bin" / "pgbench"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {root}/pgbench-calls\nexec {INSTALLED}/bin/pgbench "$@"\n')
    wrapper.chmod(0o755)
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o005)
    yield base
    shutil.rmtree(root, ignore_errors=True)


def test_a_basedir_build_runs_its_own_postgres_and_pgbench(tmp_path: Path, basedir: Path):
    spec = write_experiment(tmp_path / "e.toml", EXPERIMENT.format(basedir=basedir))
    seen: set[str] = set()
    done_flag = threading.Event()

    ours = runs_tmpfs()  # this test process's runs

    def watch() -> None:  # the postmaster's argv[0] while the cells run
        while not done_flag.is_set():
            seen.update(cmd.split()[0] for _, cmd in processes("postgres") if "/cell-" in cmd and ours in cmd)
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        done = perflab("run", str(spec), "-o", str(tmp_path / "out"))
    finally:
        done_flag.set()
        watcher.join()
    assert done.returncode == 0, done.stdout + done.stderr
    export = json.loads(perflab("export", str(tmp_path / "out"), "--format", "json").stdout)
    cells = {c["variant"]["build"]: c for c in export["cells"]}
    assert {c["status"] for c in cells.values()} == {"ok"}
    copy, installed = cells["copy"]["build"], cells["installed"]["build"]
    assert copy["name"] == "copy" and copy["kind"] == "basedir"
    assert copy["binary"] == str(basedir / "bin/postgres") and installed["binary"] == str(INSTALLED / "bin/postgres")
    assert copy["sha256"] == installed["sha256"]  # the same binary, run from another tree
    assert "(PostgreSQL) 15." in copy["version"]
    assert seen == {str(INSTALLED / "bin/postgres"), str(basedir / "bin/postgres")}
    calls = (basedir.parents[3] / "pgbench-calls").read_text().splitlines()
    assert len(calls) == 1 and "--builtin=select-only" in calls[0]  # the build's cell only, not -i
    assert cells["copy"]["summary"]["tps"] > 100
    # one on-disk format (postgresql-15): one snapshot, made by the installed initdb
    assert list(export["datasets"]) == ["postgresql-15"]


def test_bad_builds_on_postgresql_exit_2_before_anything_starts(tmp_path: Path):
    empty = tmp_path / "empty"
    (empty / "bin").mkdir(parents=True)
    for body, key in [
        (EXPERIMENT.format(basedir=empty), "builds.copy.basedir"),
        (
            EXPERIMENT.format(basedir="X").replace(
                'basedir = "X"', f'source = "debian={bookworm_version("mariadb", kind="Sources")}"'
            ),
            "builds.copy.source",
        ),
    ]:
        spec = write_experiment(tmp_path / "bad.toml", body)
        done = perflab("run", str(spec), "-o", str(tmp_path / "out"))
        assert done.returncode == 2, done.stdout + done.stderr
        assert key in done.stderr and "hint" in done.stderr
        assert not (tmp_path / "out").exists()
