"""What a killed perflab left behind is found and stopped by the next run or `doctor --clean`,
and only processes it started: a pid that was recycled by another program is never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from perflab.places.proc import RUN_ENV, start_ticks
from tests.conftest import ROOT

# a perflab run's work directory (run/workdir.py), held until the process ends
HOLD = (
    "import sys, time; from pathlib import Path; from perflab.run.workdir import work_dir\n"
    "cm = work_dir(Path(sys.argv[1])); print(cm.__enter__(), flush=True); time.sleep(300)"
)


def sleeper(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", *args], env=env)


def run_holding(base: Path) -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(base)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_doctor_clean_stops_only_what_the_dead_run_started(tmp_path: Path):
    base = tmp_path / "shm"
    base.mkdir()
    live, alive = run_holding(base)  # a live run: not touched
    dead, workdir = run_holding(base)
    dead.kill()  # SIGKILL: its work directory stays, its live.lock free
    dead.communicate()
    ours = sleeper(env={**os.environ, RUN_ENV: str(workdir)})  # a "server" it started: tagged, logged
    other = sleeper(str(workdir))  # a recycled pid: someone else's process, whatever its command line
    with open(workdir / "pids", "a", encoding="ascii") as f:
        f.write(f"{ours.pid} {start_ticks(ours.pid)}\n{other.pid} {start_ticks(other.pid)}\n")
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
        assert ours.wait(timeout=10) == -signal.SIGKILL
        time.sleep(0.2)
        assert other.poll() is None  # not ours: alive
        assert not workdir.exists() and alive.exists()
        again = subprocess.run(
            [sys.executable, "-m", "perflab", "doctor", "--clean"], env=env, cwd=ROOT, capture_output=True, text=True
        )
        assert "nothing left behind" in again.stdout
    finally:
        for proc in (ours, other, live):
            proc.kill()
            proc.communicate()
