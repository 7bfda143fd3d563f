"""The history index under concurrency and failure (issue 48): processes that make one new SQLite
index at once all succeed, and an index that fails is a clear error with exit 3, never a traceback;
after a complete run the results are kept and the line says how to record them later.
(PostgreSQL's first use by two processes at once: tests/integration/test_shared_machine.py.)"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from perflab.cli.history import record_run
from perflab.history.index import Index
from tests.conftest import ROOT, perflab

TINY = ROOT / "tests" / "data" / "report" / "tiny"

# For each index path in turn, forks two processes that open it at the same instant (a barrier on
# the clock, the CPUs otherwise idle). Prints one line per process: "ok" or the error.
RACE = """
import os, sys, time
from perflab.history.index import Index
paths = sys.argv[1:]
children = []
for path in paths:
    start = time.time() + 0.2
    for _ in range(2):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            while time.time() < start:
                pass
            try:
                with Index.open(path) as index:
                    index.names()
                line = "ok"
            except Exception as exc:
                line = f"{type(exc).__name__}: {exc}"
            os.write(write, line.encode())
            os._exit(0)
        os.close(write)
        children.append((pid, read))
    for pid, read in children[-2:]:
        os.waitpid(pid, 0)
for pid, read in children:
    print(os.read(read, 4096).decode() or "no answer")
"""


def test_processes_making_one_new_sqlite_index_at_once_all_succeed(tmp_path: Path):
    paths = [str(tmp_path / f"h{i}.sqlite") for i in range(10)]
    done = subprocess.run(
        [sys.executable, "-c", RACE, *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:-1] == ["ok"] * 20, done.stdout
    for path in paths:
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT value FROM meta WHERE key = 'index_version'").fetchall() == [("2",)]


# Another process in the middle of making the index: its first transaction open for a second.
MAKING = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
print("ready", flush=True)
time.sleep(1)
db.execute("COMMIT")
"""


def test_a_first_use_waits_for_another_process_making_the_index(tmp_path: Path):
    path = tmp_path / "history.sqlite"
    other = subprocess.Popen([sys.executable, "-c", MAKING, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline() == "ready\n"
        with Index.open(str(path)) as index:  # SQLite answers "database is locked" at once: waited for
            assert index.names() == []
    finally:
        other.communicate(timeout=30)
    assert other.returncode == 0


def broken_index(tmp_path: Path) -> Path:
    """A SQLite file of another shape where the index should be: every statement on runs fails."""
    path = tmp_path / "history.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE runs (something_else TEXT)")
    return path


def test_a_history_error_after_a_complete_run_is_one_line_and_the_results_stay(tmp_path: Path, capsys):
    results = tmp_path / "tiny"
    shutil.copytree(TINY, results)
    record_run(results, str(broken_index(tmp_path)))
    said = capsys.readouterr()
    assert "history: not recorded:" in said.err and f"later: perflab history import {results}" in said.err
    assert "Traceback" not in said.err and (results / "results.db").is_file()


def test_history_verbs_on_a_failing_index_exit_3(tmp_path: Path):
    results = tmp_path / "tiny"
    shutil.copytree(TINY, results)
    where = str(broken_index(tmp_path))
    for args in (("history", "import", str(results)), ("history", "tiny")):
        done = perflab(*args, "--history", where)
        assert done.returncode == 3, done.stdout + done.stderr
        assert f"history index {where}:" in done.stderr and "Traceback" not in done.stderr
