"""hosts/rundir.py's sweep script, run here by `sh` as it runs on a host: which perflab-host-*
directories are a dead run of this controller (issue 48). Only the ssh user's own directories (mode
700 or 711, not a link) whose `controller` (its own too) names this controller and whose liveness
lock is free; a datadir directory on disk is alive while the run directory it names holds its lock.
The SSH side (a killed run, a reboot, planted directories) is tests/integration/test_hosts_trust.py."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from perflab.hosts import rundir
from perflab.run import workdir

ME = "3d1219c7c4c5404aaa1f6d2a48adfda4 /dev/shm"


def _dead(*bases: Path) -> list[str]:
    done = subprocess.run(["sh", "-c", rundir._DEAD, ME, *map(str, bases)], capture_output=True, text=True, check=True)
    return [Path(p).name for p in done.stdout.splitlines()]


def _made(base: Path, name: str, controller: str = ME, mode: int = 0o700, lock: bool = True) -> Path:
    d = base / f"perflab-host-{name}"
    d.mkdir()
    (d / "controller").write_text(controller + "\n")
    if lock:
        (d / "lock").touch()
    d.chmod(mode)
    return d


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return tmp_path


def test_only_this_controllers_dead_directories(base: Path) -> None:
    _made(base, "dead")
    _made(base, "traversable", mode=0o711)  # a server run as another user traverses it: still ours
    _made(base, "other", controller="0123 /dev/shm")  # another controller
    _made(base, "othertmpfs", controller=ME.replace("/dev/shm", "/dev/shm/pltest-x"))
    _made(base, "open", mode=0o755)  # not as perflab makes it
    _made(base, "nocontroller").joinpath("controller").unlink()  # being made: its lock not yet held
    live = _made(base, "live")
    (base / "perflab-host-link").symlink_to(live)  # a link: never followed
    with open(live / "lock", "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert sorted(_dead(base)) == ["perflab-host-dead", "perflab-host-traversable"]
    assert "perflab-host-live" in _dead(base)  # its keeper gone: dead


def test_another_accounts_directory_naming_this_controller_is_left_alone(base: Path) -> None:
    theirs = _made(base, "planted")
    os.chown(theirs, 65534, 65534)
    assert _dead(base) == []
    os.chown(theirs, 0, 0)
    os.chown(theirs / "controller", 65534, 65534)  # a controller file written by someone else
    assert _dead(base) == []


def test_a_directory_on_disk_lives_with_its_run_directory(base: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    shm = tmp_path_factory.mktemp("shm")
    run = _made(shm, "run")
    disk = _made(base, "disk", mode=0o711, lock=False)
    (disk / "rundir").write_text(f"{run}\n")
    with open(run / "lock", "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert _dead(base) == []  # its run lives
    assert _dead(base) == ["perflab-host-disk"]
    subprocess.run(["rm", "-rf", str(run)], check=True)  # the host rebooted: its tmpfs is gone
    assert _dead(base) == ["perflab-host-disk"]


def test_the_controller_is_this_machine_and_its_tmpfs(monkeypatch: pytest.MonkeyPatch) -> None:
    machine = Path("/etc/machine-id").read_text().strip()
    assert rundir.controller() == f"{machine} {workdir.TMPFS}"
    monkeypatch.delenv("PERFLAB_TMPFS", raising=False)
    assert rundir.controller() == f"{machine} /dev/shm"  # run/workdir.py's default
