"""A killed server leaves no process behind, here or on a host: PostgreSQL's backends each call setsid
(outside the postmaster's group) and their titles overwrite their environment (the run's tag), so a
SIGKILL to the group, or a scan for the tag, used to leave them to notice the postmaster's death seconds
later (CI, stop 67: a `postgres` still in the host's namespace after the run). The stray here is such a
process: a child of the group's leader in a session of its own, with an empty environment. And a
wait on a child ends as it exits (its pidfd), not at the next 50 ms poll (bench/stop_latency.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from perflab.hosts.rundir import _KILL, _STOP, _WRAPPER
from perflab.places.proc import Child, start_ticks


def _alive(pid: int, ticks: int | None) -> bool:
    """Still running: neither gone nor a zombie (dead, its reaping init's business: up to 2 s here)."""
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return ticks is not None and start_ticks(pid) == ticks and state not in ("Z", "X")
    return False


def _tree(out: Path) -> list[str]:
    """A leader (`sleep`) whose child left its group and its environment, the stray's pid written to `out`."""
    return ["sh", "-c", 'setsid env -i sleep 300 & echo $! > "$0"; exec sleep 300', str(out)]


def _stray(out: Path) -> tuple[int, int | None]:
    """The stray's pid once it runs `sleep` in a session of its own, and its start ticks."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            pid = int(out.read_text())
            if os.getsid(pid) == pid and Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                return pid, start_ticks(pid)
        time.sleep(0.01)
    raise AssertionError(f"no stray in {out}")


def test_a_child_killed_here_takes_its_descendants_outside_its_group(tmp_path: Path) -> None:
    child = Child(_tree(tmp_path / "stray"))
    stray, ticks = _stray(tmp_path / "stray")
    try:
        assert _alive(stray, ticks) and os.getpgid(stray) != child.pid
        child.kill()
        assert child.poll() == -signal.SIGKILL
        assert not _alive(stray, ticks)  # dead when kill returns, not seconds later
    finally:
        if _alive(stray, ticks):
            os.kill(stray, signal.SIGKILL)


def _started_there(run: Path) -> tuple[subprocess.Popen[str], int]:
    """The tree started as a run directory on a host starts it (RunDir.start's wrapper, tagged)."""
    argv = ["setsid", "--wait", "sh", "-c", _WRAPPER, str(run), *_tree(run / "stray")]
    proc = subprocess.Popen(argv, env={**os.environ, "PERFLAB_RUN": str(run)}, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def test_a_hosts_kill_takes_the_descendants_outside_the_group(tmp_path: Path) -> None:
    proc, leader = _started_there(tmp_path)
    with proc:
        stray, ticks = _stray(tmp_path / "stray")
        try:
            subprocess.run(["sh", "-c", _KILL, "perflab-kill", str(leader)], check=True, timeout=30)
            assert proc.wait(timeout=10) != 0
            assert not _alive(stray, ticks)
        finally:
            proc.kill()
            if _alive(stray, ticks):
                os.kill(stray, signal.SIGKILL)


def test_a_hosts_stop_all_takes_an_untagged_descendant_of_a_recorded_group(tmp_path: Path) -> None:
    proc, leader = _started_there(tmp_path)
    with proc:
        stray, ticks = _stray(tmp_path / "stray")
        try:
            assert "PERFLAB_RUN" not in Path(f"/proc/{stray}/environ").read_text()  # the tag scan cannot see it
            done = subprocess.run(["sh", "-c", _STOP, "perflab-stop", str(tmp_path)], capture_output=True, text=True)
            assert {leader, stray} <= {int(p) for p in done.stdout.split()}, done
            assert not _alive(stray, ticks)
        finally:
            proc.kill()
            if _alive(stray, ticks):
                os.kill(stray, signal.SIGKILL)


def test_a_wait_returns_as_the_child_exits_and_times_out_while_it_runs() -> None:
    """Child.wait waits on the child's pidfd (places/proc.exited), not a 50 ms poll: it returns the
    exit code however long the timeout, and a child still running times out."""
    with Child(["sh", "-c", "sleep 0.2; exit 3"]) as quick:
        started = time.monotonic()
        assert quick.wait(60) == 3 and time.monotonic() - started < 30  # not the timeout's 60 s
    with Child(["sleep", "30"]) as slow:
        with pytest.raises(TimeoutError):
            slow.wait(0.3)
        assert slow.poll() is None
        slow.kill()
        assert slow.poll() == -signal.SIGKILL
