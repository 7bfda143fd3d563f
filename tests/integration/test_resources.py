"""A full tmpfs or results disk: a clear error (exit 3), stored cells intact, nothing left
running, and `--resume` continues once there is room.

Each scenario mounts its own small tmpfs (we run as root, as CI does) and points perflab at it
with PERFLAB_TMPFS (where datadirs live) or -o (the results directory). The disk fills while a
cell runs: the test waits until that cell's sysbench runs, then takes the space (or the inodes)
itself, so each of perflab's five paths is hit on purpose and asserted exactly:

  tmpfs, before a cell    the pre-cell check: "<tmpfs> has N MiB free; a cell needs M MiB"
  tmpfs, at the copy      ENOSPC while copying the dataset (the check passed: bytes were free,
                          inodes were not)
  results disk, snapshot  ENOSPC while keeping the dataset snapshot, before any cell
  results disk, in a cell ENOSPC when the cell's logs are written
  results disk, commit    SQLite's "database or disk is full" when the cell in flight is stored
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, perflab
from tests.integration.helpers import perflab_children, runs_tmpfs, tmpfs_mounts, write_experiment

SPEC = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-space"
duration = "3s"
warmup = "1s"
repeats = {repeats}

[dataset]
tables = 1
table_size = 1000
"""
PAGE = os.sysconf("SC_PAGE_SIZE")  # tmpfs allocates whole pages


@dataclass
class Failed:
    """A run stopped by a full disk: where, what it said, and what it had stored then."""

    out: Path
    shm: Path | None
    disk: Path  # the file system the test filled
    filler: Path
    returncode: int
    stdout: str
    stderr: str
    stored: list[tuple]
    workdir: str


@pytest.fixture(scope="module")
def mounts() -> Iterator[Callable[..., Path]]:
    """Module-wide tmpfs mounts (each scenario's run is shared by several tests)."""
    with tmpfs_mounts() as mount:
        yield mount


def env_with(tmpfs: Path | None) -> dict[str, str]:
    return {**os.environ, **({"PERFLAB_TMPFS": str(tmpfs)} if tmpfs else {})}


def stored_rows(out: Path) -> list[tuple]:
    """Each stored cell as written (key, times, figures) with its per-second series; [] if
    there is no readable results.db yet."""
    try:
        db = sqlite3.connect(f"file:{out / 'results.db'}?mode=ro", uri=True)
        try:
            cells = db.execute("SELECT key, id, started_at, ended_at, summary, resources FROM cells ORDER BY id")
            return [
                (*c, db.execute("SELECT * FROM intervals WHERE cell_id = ? ORDER BY t", (c[1],)).fetchall())
                for c in cells.fetchall()
            ]
        finally:
            db.close()
    except sqlite3.Error:
        return []


def meta(out: Path, key: str) -> object:
    db = sqlite3.connect(f"file:{out / 'results.db'}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])
    finally:
        db.close()


def integrity(out: Path) -> str:
    db = sqlite3.connect(out / "results.db")
    try:
        return db.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        db.close()


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(disk: Path, leave: int) -> Path:
    """Take the space of `disk` but `leave` bytes, as another program would (measured again
    when the run in progress took some meanwhile)."""
    filler = disk / "filler"
    with open(filler, "wb") as f:
        size = 0
        for _ in range(100):
            room = free_bytes(disk) - leave
            if room < PAGE:
                break
            try:
                os.posix_fallocate(f.fileno(), size, room)
                size += room
            except OSError as exc:  # tmpfs undoes a failed fallocate: nothing taken, try again
                if exc.errno != errno.ENOSPC:
                    raise
    assert abs(free_bytes(disk) - leave) <= PAGE
    return filler


def fill_inodes(disk: Path, leave: int) -> Path:
    """Take every inode of `disk` but `leave`: bytes stay free, new files cannot be made."""
    filler = disk / "filler"
    filler.mkdir()
    made = 0
    try:
        while True:
            (filler / str(made)).touch()
            made += 1
    except OSError:
        pass
    for i in range(made - 1, max(made - 1 - leave, -1), -1):
        (filler / str(i)).unlink()
    assert os.statvfs(disk).f_favail <= leave
    return filler


@contextlib.contextmanager
def perflab_run(tmp: Path, out: Path, repeats: int, shm: Path | None) -> Iterator[subprocess.Popen]:
    """`perflab run` in the background; killed if the test fails before it ends."""
    spec = write_experiment(tmp / "s.toml", SPEC.format(repeats=repeats))
    proc = subprocess.Popen(
        [sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)],
        env=env_with(shm),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.communicate()


def wait_for_cell_workload(proc: subprocess.Popen, out: Path, cell: int) -> tuple[list[tuple], str]:
    """Block until cell number `cell` (from 0) runs its sysbench; (the cells stored, workdir)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        stored = stored_rows(out)
        if len(stored) == cell and (out / "logs" / f"cell-{cell:04d}").is_dir():
            workdir = str(meta(out, "workdir"))
            if any(" run" in cmd for _, cmd in perflab_children(workdir) if "sysbench" in cmd):
                return stored, workdir
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"cell {cell} never started its workload")


def finish(proc: subprocess.Popen, out: Path, shm: Path | None, disk: Path, filler: Path, workdir: str) -> Failed:
    stdout, stderr = proc.communicate(timeout=180)
    return Failed(out, shm, disk, filler, proc.returncode, stdout, stderr, stored_rows(out), workdir)


def log_pages_left(logs: Path, previous: Path) -> int:
    """Bytes the in-flight cell's logs still need: the previous cell's files, page by page,
    less what the in-flight sysbench.txt already holds."""
    need = sum(math.ceil(f.stat().st_size / PAGE) * PAGE for f in previous.iterdir())
    return need - (logs / "sysbench.txt").stat().st_blocks * 512


def first_keys(rows: list[tuple]) -> list[str]:
    """The stored cells' keys in run order, each retry (`KEY/retry-of-ID`) after a cell it names."""
    keys = [key for key, *_ in rows]
    for key in keys:
        if "/retry-of-" in key:
            assert key.split("/retry-of-")[0] in keys[: keys.index(key)], keys
    return [key for key in keys if "/retry-of-" not in key]


def assert_stopped_cleanly(failed: Failed, stored: int) -> None:
    """Exit 3 with the hint, no traceback, exactly `stored` cells kept and readable, the run's
    work directory removed and no process left that names it."""
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert "Traceback" not in failed.stderr
    assert "hint: free space on" in failed.stderr
    assert f"`perflab run --resume {failed.out}` continues" in failed.stderr.replace("\n", "")
    assert integrity(failed.out) == "ok"
    assert len(failed.stored) == stored
    firsts = first_keys(failed.stored)  # an unsettled cell is measured again in its round (retry_of)
    assert firsts == [f"default/t1/r{i + 1}" for i in range(len(firsts))], failed.stored
    assert not Path(failed.workdir).exists()
    assert perflab_children(failed.workdir) == []


def assert_resumes_once_there_is_room(failed: Failed, total: int) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "perflab", "run", "--resume", str(failed.out)],
        env=env_with(failed.shm),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(failed.stored)} cells stored" in done.stdout
    assert "dataset prepared" not in done.stderr  # on the kept snapshot
    after = stored_rows(failed.out)
    assert first_keys(after) == [f"default/t1/r{i + 1}" for i in range(total)]
    assert after[: len(failed.stored)] == failed.stored  # the first ones untouched
    assert integrity(failed.out) == "ok" and meta(failed.out, "status") == "complete"
    assert not (failed.out / "dataset").exists()


# --- before anything starts ------------------------------------------------------------------------


def test_preflight_refuses_a_tmpfs_too_small_for_the_dataset(tmp_path: Path, tmpfs):
    tiny = tmpfs("tiny", "100M")
    spec = write_experiment(tmp_path / "s.toml", SPEC.format(repeats=3))
    done = subprocess.run(
        [sys.executable, "-m", "perflab", "run", str(spec), "-o", str(tmp_path / "out")],
        env=env_with(tiny),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert f"(machine) {tiny}" in done.stderr and "MiB free" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


# --- the tmpfs fills between cells: the pre-cell check ---------------------------------------------


@pytest.fixture(scope="module")
def tmpfs_full_before_a_cell(tmp_path_factory: pytest.TempPathFactory, mounts) -> Failed:
    """Cell 2 of 3 is running when another program leaves 8 MiB on the tmpfs: cell 2 ends
    (its copy was made), cell 3's check finds no room for a copy of the dataset."""
    tmp = tmp_path_factory.mktemp("tmpfs-check")
    shm = mounts("shm-check", "700M")  # the 641 MiB preflight asks: dataset + one copy, estimated
    out = tmp / "out"
    with perflab_run(tmp, out, 3, shm) as proc:
        _, workdir = wait_for_cell_workload(proc, out, 1)
        filler = fill(shm, 8 << 20)
        return finish(proc, out, shm, shm, filler, workdir)


def test_tmpfs_full_before_a_cell_stops_at_the_check(tmpfs_full_before_a_cell: Failed):
    failed = tmpfs_full_before_a_cell
    assert_stopped_cleanly(failed, stored=2)  # the cell in flight had its copy: it ended and was stored
    assert f"error: {failed.shm} has " in failed.stderr and " MiB free; a cell needs " in failed.stderr
    assert "no space left" not in failed.stderr.lower()
    assert [p for p in failed.shm.iterdir() if p.name.startswith("perflab-")] == []


def test_stored_cells_still_read_after_the_tmpfs_filled_up(tmpfs_full_before_a_cell: Failed):
    """report and export work on what was stored, while the tmpfs is still full."""
    failed = tmpfs_full_before_a_cell
    assert failed.filler.stat().st_size > 64 << 20  # still there: nobody made room yet
    exported = perflab("export", str(failed.out))
    assert exported.returncode == 0, exported.stderr
    doc = json.loads(exported.stdout)
    assert [c["status"] for c in doc["cells"]] == ["ok", "ok"] and doc["run"]["status"] == "interrupted"
    assert all(c["summary"]["qps"] > 0 and c["intervals"] for c in doc["cells"])
    report = perflab("report", str(failed.out))
    assert report.returncode == 0 and "it-space" in report.stdout, report.stderr


def test_resume_after_the_tmpfs_has_room_again(tmpfs_full_before_a_cell: Failed):
    failed = tmpfs_full_before_a_cell
    failed.filler.unlink()  # the other program is done
    assert_resumes_once_there_is_room(failed, total=3)


# --- the tmpfs has bytes but no inodes: ENOSPC at the copy -------------------------------------------


def hold_open(datadir: Path, under: int = 1 << 20) -> list[int]:
    """Open every small file of a running cell's datadir: when perflab removes the directory,
    their inodes stay in use until closed (an unlinked file lives while it is open); their
    bytes are few. A stuck backup or a scanner would do the same."""
    fds = []
    for path in sorted(datadir.rglob("*")):
        if path.is_file() and not path.is_symlink() and path.stat().st_size < under:
            fds.append(os.open(path, os.O_RDONLY))
    return fds


def test_tmpfs_full_at_the_copy_is_a_clear_error(tmp_path: Path, tmpfs):
    """The check before a cell counts bytes; the copy needs inodes too. While cell 1 runs,
    the test holds its datadir's small files open and takes the tmpfs' other inodes: cell 2
    passes the check (bytes are free) and its copy of the dataset fails with ENOSPC."""
    shm = tmpfs("shm-inodes", "700M", "nr_inodes=4000")
    out = tmp_path / "out"
    with perflab_run(tmp_path, out, 2, shm) as proc:
        _, workdir = wait_for_cell_workload(proc, out, 0)
        fds = hold_open(Path(workdir) / "cell-0000" / "data")
        try:
            filler = fill_inodes(shm, leave=2)
            failed = finish(proc, out, shm, shm, filler, workdir)
        finally:
            for fd in fds:
                os.close(fd)
    assert len(fds) > 100  # the system tables alone are hundreds of files
    assert_stopped_cleanly(failed, stored=1)
    message = failed.stderr.replace("\n", "")
    assert (
        "error: no space left: [Errno 28] no space left on device while copying the dataset to "
        f"{workdir}/cell-0001/data" in message
    )
    assert "MiB free" not in message
    assert [p for p in shm.iterdir() if p.name.startswith("perflab-")] == []


# --- the results disk -------------------------------------------------------------------------------


def test_results_disk_full_at_the_snapshot_is_a_clear_error(tmp_path: Path, tmpfs):
    """2 MiB hold results.db and the logs, not the dataset snapshot kept for --resume: the run
    stops before any cell, with no partial snapshot left to resume from."""
    disk = tmpfs("disk", "2M")
    out = disk / "out"
    spec = write_experiment(tmp_path / "s.toml", SPEC.format(repeats=3))
    done = perflab("run", str(spec), "-o", str(out), timeout=300)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "error: no space left: " in done.stderr and "Traceback" not in done.stderr
    assert f"while copying the dataset to {out}/dataset" in done.stderr.replace("\n", "")
    assert integrity(out) == "ok" and stored_rows(out) == []
    assert not (out / "dataset").exists()
    workdir = str(meta(out, "workdir"))
    assert workdir.startswith(f"{runs_tmpfs()}/perflab-") and not Path(workdir).exists()
    assert perflab_children(workdir) == []  # the prepare server is gone too


@pytest.fixture(scope="module")
def results_disk_full_in_a_cell(tmp_path_factory: pytest.TempPathFactory, mounts) -> Failed:
    """The results disk holds the snapshot; while cell 2 runs, another program leaves just
    enough for that cell's logs and one page: storing the cell fails in SQLite."""
    tmp = tmp_path_factory.mktemp("results-commit")
    disk = mounts("results-commit", "400M")  # the ~275 MiB snapshot, the logs, 16 MiB to spare
    out = disk / "out"
    with perflab_run(tmp, out, 3, None) as proc:
        _, workdir = wait_for_cell_workload(proc, out, 1)
        leave = log_pages_left(out / "logs" / "cell-0001", out / "logs" / "cell-0000") + PAGE
        filler = fill(disk, leave)
        return finish(proc, out, None, disk, filler, workdir)


def test_results_disk_full_when_a_cell_is_stored(results_disk_full_in_a_cell: Failed):
    failed = results_disk_full_in_a_cell
    assert_stopped_cleanly(failed, stored=1)  # the cell in flight is not stored, not half-stored
    assert "error: no space left: the results database could not be written: database or disk is full" in failed.stderr
    assert (failed.out / "logs" / "cell-0001" / "my.cnf").exists()  # its logs fitted: SQLite was what failed
    assert (failed.out / "dataset").is_dir()  # kept for --resume


def test_results_disk_full_during_a_cell_is_a_clear_error(tmp_path: Path, tmpfs):
    """Filled to the last byte while cell 1 runs: sysbench's output is cut short and the cell's
    logs cannot be copied: ENOSPC, exit 3, nothing of that cell stored."""
    disk = tmpfs("results-zero", "400M")
    out = disk / "out"
    with perflab_run(tmp_path, out, 2, None) as proc:
        _, workdir = wait_for_cell_workload(proc, out, 0)
        failed = finish(proc, out, None, disk, fill(disk, 0), workdir)
    assert_stopped_cleanly(failed, stored=0)
    logs = out / "logs" / "cell-0000"
    message = failed.stderr.replace("\n", "")
    assert f"error: no space left: [Errno 28] No space left on device: '{workdir}/cell-0000/" in message
    assert f"' -> '{logs}/" in message  # a log copied at the end of the cell
    assert (out / "dataset").is_dir()  # kept for --resume


def test_resume_after_the_results_disk_has_room_again(results_disk_full_in_a_cell: Failed):
    failed = results_disk_full_in_a_cell
    failed.filler.unlink()
    assert_resumes_once_there_is_room(failed, total=3)
