"""A full tmpfs or results disk: a clear error (exit 3), stored cells intact, nothing left running.

Each test mounts its own small tmpfs (we run as root, as CI does) and points perflab at it
with PERFLAB_TMPFS (where datadirs live) or -o (the results directory)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.helpers import perflab_children, write_experiment

SPEC = """
[experiment]
name = "it-space"
duration = "2s"
warmup = "1s"
repeats = 3

[dataset]
tables = 1
table_size = 1000
"""


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[callable]:
    mounted: list[Path] = []

    def mount(name: str, size: str) -> Path:
        path = tmp_path / name
        path.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)


def cli(args: list[str], tmpfs: Path | None = None) -> list[str]:
    return [sys.executable, "-m", "perflab", *args]


def env_with(tmpfs: Path | None) -> dict[str, str]:
    return {**os.environ, **({"PERFLAB_TMPFS": str(tmpfs)} if tmpfs else {})}


def integrity(out: Path) -> str:
    db = sqlite3.connect(out / "results.db")
    try:
        return db.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        db.close()


def test_preflight_refuses_a_tmpfs_too_small_for_the_dataset(tmp_path: Path, small_tmpfs):
    tiny = small_tmpfs("tiny", "100M")
    spec = write_experiment(tmp_path / "s.toml", SPEC)
    done = subprocess.run(
        cli(["run", str(spec), "-o", str(tmp_path / "out")]),
        env=env_with(tiny),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert f"(machine) {tiny}" in done.stderr and "MiB free" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_tmpfs_filling_up_mid_run_stops_cleanly(tmp_path: Path, small_tmpfs):
    shm = small_tmpfs("shm", "1G")
    spec = write_experiment(tmp_path / "s.toml", SPEC)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        cli(["run", str(spec), "-o", str(out)]),
        env=env_with(shm),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (out / "results.db").exists() or not _stored(out):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    # another process fills the tmpfs, then leaves 8 MiB: the next cell cannot get its copy
    written = 0
    with open(shm / "filler", "wb") as filler:
        try:
            while True:
                os.posix_fallocate(filler.fileno(), written, 4 << 20)
                written += 4 << 20
        except OSError:
            pass
        filler.truncate(max(written - (8 << 20), 0))
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stdout + stderr
    # caught before the next cell's copy ("N MiB free"), or by the copy itself (ENOSPC)
    assert "MiB free" in stderr or "no space left" in stderr.lower(), stderr
    assert "--resume" in stderr and "Traceback" not in stderr
    assert integrity(out) == "ok"
    assert 1 <= len(_stored(out)) < 3
    workdirs = [p for p in shm.iterdir() if p.name.startswith("perflab-")]
    assert workdirs == []  # the work directory was removed on the way out
    assert perflab_children(str(shm)) == []


def test_full_results_disk_is_a_clear_error(tmp_path: Path, small_tmpfs):
    disk = small_tmpfs("disk", "2M")
    spec = write_experiment(tmp_path / "s.toml", SPEC)
    out = disk / "out"
    done = subprocess.run(
        cli(["run", str(spec), "-o", str(out)]), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "no space left" in done.stderr.lower() and "Traceback" not in done.stderr
    assert integrity(out) == "ok"
    assert perflab_children() == [] or all(str(out) not in cmd for _, cmd in perflab_children())


def _stored(out: Path) -> list[str]:
    try:
        db = sqlite3.connect(out / "results.db")
        try:
            return [r[0] for r in db.execute("SELECT key FROM cells")]
        finally:
            db.close()
    except sqlite3.Error:
        return []


def test_json_of_stored_cells_still_reads(tmp_path: Path, small_tmpfs):
    """After the tmpfs filled up, report and export work on what was stored."""
    shm = small_tmpfs("shm2", "1G")
    spec = write_experiment(tmp_path / "s.toml", SPEC.replace("repeats = 3", "repeats = 1"))
    out = tmp_path / "out"
    done = subprocess.run(
        cli(["run", str(spec), "-o", str(out)]),
        env=env_with(shm),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    exported = subprocess.run(cli(["export", str(out)]), cwd=ROOT, capture_output=True, text=True)
    assert json.loads(exported.stdout)["cells"][0]["status"] == "ok"
