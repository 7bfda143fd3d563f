"""A shared lab machine (issue 48), tried for real: while a real `perflab run` goes on, the
unprivileged account `nobody` plants work directories for the sweep (a name in perflab's pattern and
a prefix of the live run's, a dead owner, pids naming the live run's server and client, a hosts.json
naming a host to SSH to, a postmaster.pid naming its own segment), and `perflab doctor --clean` runs:
nothing of the live run is killed, nothing is connected to, nobody's segment stays, the run ends
well. A second writer of the results directory is refused at once (exit 3, naming the first), a
reader is not. Then the history index: two processes making one new PostgreSQL index at once both
succeed. (The locks and the sweep against the functions: tests/unit/test_lock_files.py,
test_sweep_trust.py; SQLite's first use: test_history_first_use.py.) About 40 s."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from perflab.places.proc import start_ticks
from perflab.places import segments
from perflab.servers.postgresql import server as pgserver
from tests.conftest import ROOT, perflab
from tests.integration.helpers import perflab_children, used, write_experiment
from tests.nobody import as_nobody, shared_dir
from tests.unit.test_sweep_trust import MAKE_SEGMENT, PLANT, connections, remove_segment

SPEC = """
[experiment]
design = "sequential"
name = "shared"
duration = "30s"  # the attacks run inside its window: 12 s ended before them under CI's load (ci5)
warmup = "1s"
repeats = 1

[dataset]
tables = 1
table_size = 1000

[workload]
threads = [1]
"""


class LiveRun(NamedTuple):
    proc: subprocess.Popen
    out: Path
    workdir: Path
    base: Path
    children: list[int]  # its server and client


def _workdir(out: Path) -> Path | None:
    try:
        with sqlite3.connect(f"file:{out / 'results.db'}?mode=ro", uri=True) as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'workdir'").fetchone()
    except sqlite3.Error:
        return None
    return Path(row[0].strip('"')) if row else None


def _windowed(cmd: str) -> bool:
    """A cell's mariadbd (its option file in cell-NNNN/) or a client's `sysbench ... run`."""
    return "/cell-" in cmd or " run " in f" {cmd} "


@pytest.fixture(scope="module")
def live_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRun]:
    """A real run on a tmpfs directory as open as /dev/shm (1777), in its window."""
    tmp = tmp_path_factory.mktemp("shared")
    base = shared_dir()
    spec = write_experiment(tmp / "shared.toml", SPEC)
    env = {**os.environ, "PERFLAB_TMPFS": str(base)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "perflab", "run", str(spec), "-o", str(tmp / "out")],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            workdir = _workdir(tmp / "out")
            # a cell's server and its client's `run` (not the dataset's prepare server and `sysbench
            # ... prepare`, which end a moment later: ci8 caught those under load and found them gone)
            children = [(pid, cmd) for pid, cmd in perflab_children(workdir) if workdir and _windowed(cmd)]
            if any("sysbench" in cmd for _, cmd in children) and any("mariadbd" in cmd for _, cmd in children):
                break
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        assert workdir is not None
        yield LiveRun(proc, tmp / "out", workdir, base, [pid for pid, _ in children])
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
        shutil.rmtree(base, ignore_errors=True)


def test_what_nobody_plants_for_the_sweep_harms_no_live_run(live_run: LiveRun):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    made = as_nobody(MAKE_SEGMENT)
    assert made.returncode == 0, made.stderr
    theirs = int(made.stdout)
    try:
        pids = "".join(f"{pid} {start_ticks(pid)}\n" for pid in live_run.children)
        port = str(listener.getsockname()[1])
        planted = [live_run.base / "perflab-aaaaaaaa", live_run.base / live_run.workdir.name[:-1]]
        for where in planted:
            done = as_nobody(PLANT, str(where), pids, port, str(theirs))
            assert done.returncode == 0, done.stderr
        env = {**os.environ, "PERFLAB_TMPFS": str(live_run.base)}
        done = subprocess.run([sys.executable, "-m", "perflab", "doctor", "--clean"],
                              env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "nothing left behind by earlier runs" in done.stdout
        for where in planted:  # named, so that the machine's owner can look
            assert f"left alone: {where}: owned by uid 65534; not made by this perflab (uid 0)" in done.stdout
        time.sleep(0.3)
        assert all(start_ticks(pid) is not None for pid in live_run.children)  # the server and client live
        assert connections(listener) == 0  # no SSH connection to the planted host
        assert any(row["shmid"] == theirs for row in segments.table())
        assert live_run.workdir.is_dir() and all((p / "hosts.json").is_file() for p in planted)
    finally:
        listener.close()
        remove_segment(theirs)


def test_a_second_writer_is_refused_at_once_and_a_reader_is_not(live_run: LiveRun):
    resumed = perflab("run", "--resume", str(live_run.out), timeout=120)
    assert resumed.returncode == 3, resumed.stdout + resumed.stderr
    assert f"{live_run.out} is being written by another perflab: pid {live_run.proc.pid}, since 20" in resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert perflab("export", str(live_run.out)).returncode == 0  # readers take no lock


def test_the_live_run_ends_well(live_run: LiveRun):
    """After the attacks: the run completes its cell (nothing of it was killed), its work directory
    gone, and its results directory free for the next writer."""
    stdout, stderr = live_run.proc.communicate(timeout=180)
    assert live_run.proc.returncode == 0, stdout + stderr
    done = perflab("export", str(live_run.out))
    assert [c["status"] for c in used(json.loads(done.stdout)["cells"])] == ["ok"]  # or its retry, if unsettled
    assert not live_run.workdir.exists()
    again = perflab("run", "--resume", str(live_run.out), timeout=120)
    assert again.returncode == 0 and "nothing to resume" in again.stdout, again.stderr


# Two processes per URL open the index at one instant (a barrier on the clock), one URL after another.
RACE = """
import os, sys, time
from perflab.history.index import Index
for url in sys.argv[1:]:
    start, children = time.time() + 0.3, []
    for _ in range(2):
        read, write = os.pipe()
        if (pid := os.fork()) == 0:
            while time.time() < start:
                pass
            try:
                with Index.open(url) as index:
                    line = f"ok {index.names()}"
            except Exception as exc:
                line = f"{type(exc).__name__}: {exc}".splitlines()[0]
            os.write(write, line.encode()); os._exit(0)
        os.close(write)
        children.append((pid, read))
    for pid, read in children:
        os.waitpid(pid, 0)
        print(os.read(read, 4096).decode() or "no answer", flush=True)
"""


def test_two_processes_making_one_new_postgresql_index_both_succeed():
    base = Path(tempfile.mkdtemp(prefix="plshared-pg-", dir="/tmp"))
    try:
        pgserver.initdb(base / "data", base / "initdb.log")
        with pgserver.PostgreSQL(base / "run", base / "data", {}):
            url = f"postgresql://{pgserver.SUPERUSER}@/{{}}?host={base / 'run'}&port={pgserver.PORT}"
            import psycopg  # noqa: PLC0415

            with psycopg.connect(url.format("postgres"), autocommit=True) as db:
                for i in range(6):
                    db.execute(f"CREATE DATABASE h{i}")
            urls = [url.format(f"h{i}") for i in range(6)]
            done = subprocess.run([sys.executable, "-c", RACE, *urls], cwd=ROOT, capture_output=True,
                                  text=True, timeout=120, check=False)  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert done.stdout.splitlines() == ["ok []"] * 12, done.stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)
