"""What a killed perflab left behind is found and stopped by the next run or `doctor --clean`,
and only processes it started: a pid that was recycled by another program is never touched."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT


def sleeper(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", *args])


def test_doctor_clean_stops_only_what_the_dead_run_started(tmp_path: Path):
    base = tmp_path / "shm"
    workdir = base / "perflab-dead1234"
    workdir.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (workdir / "owner.pid").write_text(str(dead.pid), encoding="ascii")  # its perflab is gone
    ours = sleeper(str(workdir / "run" / "my.cnf"))  # a "server" it started: names the work dir
    other = sleeper("--unrelated")  # a recycled pid: someone else's process
    (workdir / "pids").write_text(f"{ours.pid}\n{other.pid}\n", encoding="ascii")
    alive = base / "perflab-alive"
    alive.mkdir()
    (alive / "owner.pid").write_text(str(os.getpid()), encoding="ascii")  # a live run: not touched
    env = {**os.environ, "PERFLAB_TMPFS": str(base)}
    try:
        report = subprocess.run(
            [sys.executable, "-m", "perflab", "doctor"], env=env, cwd=ROOT, capture_output=True, text=True
        )
        assert "1 work dir(s), 1 live process(es)" in report.stdout
        done = subprocess.run(
            [sys.executable, "-m", "perflab", "doctor", "--clean"], env=env, cwd=ROOT, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert f"removed {workdir}; stopped {ours.pid}" in done.stdout
        assert ours.wait(timeout=10) == -9
        time.sleep(0.2)
        assert other.poll() is None  # not ours: alive
        assert not workdir.exists() and alive.exists()
        again = subprocess.run(
            [sys.executable, "-m", "perflab", "doctor", "--clean"], env=env, cwd=ROOT, capture_output=True, text=True
        )
        assert "nothing left behind" in again.stdout
    finally:
        for proc in (ours, other):
            proc.kill()
            proc.wait()
