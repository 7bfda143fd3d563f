"""`perflab doctor --clean` looks in the storage directories (`[experiment] storage`: datadirs on disk)
this machine's runs used, not only in the tmpfs (issue 48): a killed run's work directory there is
removed and named, and "nothing left behind" says where it looked."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# a run with its datadirs on disk, killed as its work directory exists (run/storage.py, run/workdir.py)
_KILLED = """
import sys, time
from pathlib import Path
from perflab.run import storage
from perflab.run.workdir import work_dir
storage.of_experiment(sys.argv[1])
kept = work_dir(Path(sys.argv[1]))  # kept: a collected generator would remove the directory
print(kept.__enter__(), flush=True)
time.sleep(600)
"""


@pytest.fixture
def disk() -> Iterator[Path]:
    """A storage directory with a short path (the servers' sockets live below it: run/storage.py)."""
    path = Path(tempfile.mkdtemp(prefix="pl-", dir="/tmp"))
    yield path
    shutil.rmtree(path)


def test_doctor_clean_removes_a_killed_runs_work_directory_on_disk(tmp_path: Path, disk: Path) -> None:
    tmpfs, state = tmp_path / "tmpfs", tmp_path / "state"
    tmpfs.mkdir()
    env = {**os.environ, "PERFLAB_TMPFS": str(tmpfs), "PERFLAB_STATE": str(state)}
    run = subprocess.Popen([sys.executable, "-c", _KILLED, str(disk)], stdout=subprocess.PIPE, text=True,
                           env=env, cwd=ROOT)  # fmt: skip
    assert run.stdout is not None
    left = Path(run.stdout.readline().strip())
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=30)
    run.stdout.close()
    assert left.parent == disk and left.is_dir()
    done = subprocess.run([sys.executable, "-m", "perflab", "doctor", "--clean"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"removed {left}" in done.stdout and not left.exists()
    again = subprocess.run([sys.executable, "-m", "perflab", "doctor", "--clean"], capture_output=True, text=True,
                           env=env, cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert "nothing left behind" in again.stdout and str(disk) in again.stdout and str(tmpfs) in again.stdout
