"""The stale sweep (run/workdir.py, places/segments.py) on a tmpfs other accounts write in (issue 48):
it takes only the work directories this perflab made (name, owner, mode, no symlink) whose run is
dead by its live.lock, kills only the very processes the run started (pid, start time and tag), and
removes only the shared memory segments they made. What nobody plants is never read: no process
killed, no segment removed, no SSH connection made. A real dead run is still swept."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perflab.places.proc import RUN_ENV, start_ticks
from perflab.places import segments
from perflab.run import workdir
from tests.nobody import as_nobody, shared_dir, start_as_nobody

MAKE_SEGMENT = "import ctypes; print(ctypes.CDLL(None).shmget(0, 56, 0o1000 | 0o600), flush=True)"
# what an attacker plants: a run directory in perflab's name pattern (or a prefix of a live run's
# name), a dead owner, a pids file naming root's processes, a hosts.json naming a host to SSH to, a
# postmaster.pid naming a segment that is not the run's; as nobody, the only way in is the name
PLANT = """
import json, os, sys
where, pids, port, shmid = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
os.mkdir(where, 0o700)
for name, text in [("owner.pid", "999999999"), ("pids", pids), ("live.lock", "")]:
    with open(os.path.join(where, name), "w") as f:
        f.write(text)
with open(os.path.join(where, "hosts.json"), "w") as f:
    json.dump([{"name": "bait", "ssh": f"root@127.0.0.1:{port}", "path": "/dev/shm/perflab-host-abcdef"}], f)
os.makedirs(os.path.join(where, "cell-0001", "data"))
with open(os.path.join(where, "cell-0001", "data", "postmaster.pid"), "w") as f:
    f.write("1\\n/x\\n0\\n5432\\n/tmp\\n*\\n  5432001 " + shmid + "\\nready\\n")
"""


@pytest.fixture
def base():
    path = shared_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def listener():
    """A TCP port that counts the connections made to it: where a planted hosts.json points."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    yield server
    server.close()


def connections(server: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            return count
        conn.close()
        count += 1


def sleeper(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", *args], env=env)


def segment_as(user: str) -> int:
    """A new System V segment nobody is attached to, made by `user` (nobody or this account)."""
    if user == "nobody":
        done = as_nobody(MAKE_SEGMENT)
        assert done.returncode == 0, done.stderr
        return int(done.stdout)
    return int(subprocess.run([sys.executable, "-c", MAKE_SEGMENT], capture_output=True, text=True).stdout)


def exists(shmid: int) -> bool:
    return any(row["shmid"] == shmid for row in segments.table())


def remove_segment(shmid: int) -> None:
    ctypes.CDLL(None).shmctl(shmid, 0, None)


def test_what_another_account_plants_is_left_alone(base: Path, listener: socket.socket):
    victims = [sleeper(str(base / "perflab-abcdefgh"), str(base / "perflab-abc")) for _ in range(2)]
    theirs = segment_as("nobody")
    try:
        pids = "".join(f"{v.pid} {start_ticks(v.pid)}\n" for v in victims)
        port = str(listener.getsockname()[1])
        for name in ("perflab-abcdefgh", "perflab-abc"):  # the exact pattern; a prefix of a live run's name
            done = as_nobody(PLANT, str(base / name), pids, port, str(theirs))
            assert done.returncode == 0, done.stderr
        assert workdir.stale_workdirs(base) == []
        assert workdir.remove_stale_workdirs(base) == []
        time.sleep(0.2)
        assert all(v.poll() is None for v in victims)  # root's processes: alive
        assert exists(theirs)  # nobody's segment: kept
        assert connections(listener) == 0  # the planted hosts.json made no SSH connection
        assert (base / "perflab-abcdefgh" / "hosts.json").exists() and (base / "perflab-abc").exists()
        assert workdir.foreign(base) == [(base / n, "owned by uid 65534") for n in ("perflab-abc", "perflab-abcdefgh")]
    finally:
        for v in victims:
            v.kill()
            v.wait()
        remove_segment(theirs)


def dead_run(base: Path) -> Path:
    """A work directory as a perflab SIGKILLed mid-run leaves it (made by work_dir itself)."""
    code = (
        "import sys, time; from pathlib import Path; from perflab.run.workdir import work_dir\n"
        "cm = work_dir(Path(sys.argv[1])); w = cm.__enter__(); print(w, flush=True); time.sleep(300)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(base)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    path = Path(proc.stdout.readline().strip())
    assert workdir.stale_workdirs(base) == []  # alive: its live.lock is held
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    return path


def test_a_symlink_to_a_dead_run_is_not_followed(base: Path):
    real = dead_run(base)
    hidden = base / "hidden"
    real.rename(hidden)
    (base / "perflab-zzzzzzzz").symlink_to(hidden)
    assert workdir.remove_stale_workdirs(base) == [] and hidden.is_dir()
    assert workdir.foreign(base) == [(base / "perflab-zzzzzzzz", "a symbolic link")]


def test_a_live_run_is_never_swept_whatever_its_owner_pid_says(base: Path):
    code = (
        "import sys, time; from pathlib import Path; from perflab.run.workdir import work_dir\n"
        "cm = work_dir(Path(sys.argv[1])); w = cm.__enter__(); print(w, flush=True); time.sleep(300)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(base)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        live = Path(proc.stdout.readline().strip())
        (live / "owner.pid").write_text("999999999", encoding="ascii")  # another container's pid namespace
        assert workdir.remove_stale_workdirs(base) == [] and live.is_dir()
    finally:
        proc.kill()
        proc.communicate()


def test_a_dead_run_is_swept_and_only_its_own_processes_and_segments_go(base: Path):
    path = dead_run(base)
    assert workdir.unsafe(path.lstat()) is None and path.name.startswith(workdir.PREFIX)
    ours = sleeper(env={**os.environ, RUN_ENV: str(path)})  # survived its perflab: to be stopped
    untagged = sleeper(str(path))  # names the directory, but the run did not start it
    other_run = sleeper(env={**os.environ, RUN_ENV: str(path) + "x"})
    recycled = sleeper(env={**os.environ, RUN_ENV: str(path)})  # its pid logged with another start time
    maker = subprocess.Popen([sys.executable, "-c", MAKE_SEGMENT + "; import time; time.sleep(1)"],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert maker.stdout is not None
    its_segment = int(maker.stdout.readline())
    theirs = segment_as("nobody")  # what a postmaster.pid the server's account wrote could name
    (path / "cell-0001" / "data").mkdir(parents=True)
    (path / "cell-0001" / "data" / "postmaster.pid").write_text(f"1\n/x\n0\n5432\n/tmp\n*\n 1 {theirs}\nready\n")
    processes = [ours, untagged, other_run, maker, recycled]
    with open(path / "pids", "a", encoding="ascii") as f:
        f.writelines(f"{p.pid} {start_ticks(p.pid) - (p is recycled)}\n" for p in processes)
    maker.communicate()
    try:
        assert workdir.stale_workdirs(base) == [(path, [ours.pid])]
        assert workdir.remove_stale_workdirs(base) == [(path, [ours.pid])]
        assert ours.wait(timeout=10) == -signal.SIGKILL
        assert untagged.poll() is None and other_run.poll() is None and recycled.poll() is None
        assert not path.exists()
        assert not exists(its_segment) and exists(theirs)
    finally:
        for p in processes:
            p.kill()
            p.wait()
        remove_segment(theirs)
        remove_segment(its_segment)


def test_a_segment_of_a_recycled_creator_pid_is_kept():
    """theirs(): a segment whose creator pid is the run's but whose creator now is another process."""
    alive = sleeper()
    try:
        row = {"shmid": 7, "cpid": alive.pid, "uid": os.geteuid(), "cuid": os.geteuid(), "ctime": int(time.time())}
        ticks = start_ticks(alive.pid)
        assert segments.theirs([row], {alive.pid: ticks}, {os.geteuid()}) == [7]
        assert segments.theirs([row], {alive.pid: ticks - 1}, {os.geteuid()}) == []  # pid recycled
        assert segments.theirs([row], {alive.pid: ticks}, {12345}) == []  # another account's
        assert segments.theirs([{**row, "ctime": 1}], {alive.pid: ticks}, {os.geteuid()}) == []  # older than it
    finally:
        alive.kill()
        alive.wait()


def test_hosts_json_of_a_real_dead_run_is_read(base: Path):
    """The other side: a dead run of ours with hosts.json is handed to hosts/clean.py (here a host
    that does not answer: kept for the next --clean, with its record)."""
    path = dead_run(base)
    (path / "hosts.json").write_text(json.dumps([{"name": "gone", "ssh": "root@127.0.0.1:1", "path": "/x"}]))
    assert workdir.remove_stale_workdirs(base) == []
    assert (path / "hosts.json").exists() and [p for p, _ in workdir.stale_workdirs(base)] == [path]


def test_a_process_the_run_never_logged_is_found_by_its_tag_but_not_another_accounts(base: Path):
    """SIGKILLed between starting a server and logging it (before its setpriv armed --pdeathsig: a
    postmaster left in one CI run), the run's process carries its tag only: the sweep stops it. One
    of another account that carries the same tag is not the run's and is left alone."""
    path = dead_run(base)
    unlogged = sleeper(env={**os.environ, RUN_ENV: str(path)})
    foreign = start_as_nobody(
        "import os, sys, time; print('ready', flush=True); time.sleep(300)", env={RUN_ENV: str(path)}
    )
    try:
        assert workdir.logged(path) == {} and set(workdir.tagged(path)) == {unlogged.pid}
        assert workdir.remove_stale_workdirs(base) == [(path, [unlogged.pid])]
        assert unlogged.wait(timeout=10) == -signal.SIGKILL and foreign.poll() is None
    finally:
        for p in (unlogged, foreign):
            p.kill()
            p.communicate()
