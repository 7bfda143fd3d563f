"""perflab killed with SIGKILL mid-matrix, then `perflab run --resume`: only the missing cells
run, in their original order, on the same dataset snapshot; nothing is lost or run twice."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from perflab.spec import parse
from tests.conftest import ROOT, perflab
from tests.integration.helpers import perflab_children, processes, write_experiment

SPEC = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-resume"
duration = "2s"
warmup = "1s"
repeats = 2

[dataset]
tables = 1
table_size = 2000

[workload]
threads = [1, 2]

[variants.v]
a = {}
b = {}
"""


def stored_keys(out: Path) -> list[str]:
    return [row[0] for row in stored_rows(out)]


def stored_rows(out: Path) -> list[tuple]:
    """Each stored cell as written: key, times, figures, and its per-second series."""
    db = sqlite3.connect(out / "results.db")
    try:
        cells = db.execute("SELECT key, id, started_at, ended_at, summary, resources FROM cells ORDER BY id").fetchall()
        return [
            (*c, db.execute("SELECT * FROM intervals WHERE cell_id = ? ORDER BY t", (c[1],)).fetchall()) for c in cells
        ]
    finally:
        db.close()


def meta(out: Path, key: str) -> object:
    db = sqlite3.connect(out / "results.db")
    try:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])
    finally:
        db.close()


def test_sigkill_then_resume_completes_exactly_the_missing_cells(tmp_path: Path):
    spec = write_experiment(tmp_path / "resume.toml", SPEC)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and (not (out / "results.db").exists() or len(stored_keys(out)) < 3):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)  # mid-matrix, probably mid-cell: no cleanup runs
        proc.communicate()
    before = stored_rows(out)
    assert 3 <= len(before) < 8
    killed_workdir = Path(str(meta(out, "workdir")))
    assert killed_workdir.is_dir()  # SIGKILL: its work directory is left behind...
    deadline = time.monotonic() + 10
    while perflab_children(killed_workdir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert perflab_children(killed_workdir) == []  # ...but not its server or client (pdeathsig)
    prepared = (out / "logs" / "prepare.txt").stat().st_mtime_ns
    assert (out / "dataset").is_dir()  # the snapshot outlives the killed run

    done = perflab("run", "--resume", str(out), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(before)} cells stored" in done.stdout
    assert "dataset prepared" not in done.stderr  # the progress line of a `prepare`

    seed = meta(out, "seed")  # drawn by the first run, kept by the resume: the same order
    assert isinstance(seed, int) and f"seed {seed} (the stored seed)" in done.stdout
    expected = [c.key for c in dataclasses.replace(parse(SPEC), seed=seed).cells()]
    assert sorted(expected) == sorted(f"v={v}/t{t}/r{r}" for r in (1, 2) for t in (1, 2) for v in ("a", "b"))
    assert stored_keys(out) == expected  # every cell once, ids in the original (seeded) order
    assert stored_rows(out)[: len(before)] == before  # the first ones kept exactly as they were
    doc = json.loads(perflab("export", str(out)).stdout)
    assert all(c["status"] == "ok" for c in doc["cells"])
    assert doc["run"]["status"] == "complete"
    # the same dataset: not prepared again, and the snapshot is gone once complete
    assert (out / "logs" / "prepare.txt").stat().st_mtime_ns == prepared
    assert meta(out, "dataset_reprepared") is None
    assert not (out / "dataset").exists()
    db = sqlite3.connect(out / "results.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    # the killed run's work directory was removed by this next run; the resumed run's own too
    resumed_workdir = Path(doc["run"]["workdir"])
    assert resumed_workdir != killed_workdir
    assert not killed_workdir.exists() and not resumed_workdir.exists()
    assert perflab_children(killed_workdir) == [] and perflab_children(resumed_workdir) == []

    again = perflab("run", "--resume", str(out))
    assert again.returncode == 0 and "nothing to resume" in again.stdout


def test_resume_errors(tmp_path: Path):
    assert perflab("run", "--resume", str(tmp_path)).returncode == 2  # no results here
    bad = perflab("run", "--resume", str(tmp_path), str(tmp_path / "x.toml"))
    assert bad.returncode == 2 and "neither an EXPERIMENT" in bad.stderr
    none = perflab("run")
    assert none.returncode == 2 and "no EXPERIMENT file given" in none.stderr


def _kill_once_stored(spec: Path, out: Path, cells: int, env: dict[str, str] | None = None) -> None:
    """Start `perflab run`, SIGKILL it once `cells` cells are stored (then a second later:
    inside the next cell or group)."""
    proc = subprocess.Popen([sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and (not (out / "results.db").exists() or len(stored_keys(out)) < cells):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        time.sleep(1.0)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()


def _environ(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/environ").read_text(errors="replace")
    except OSError:  # gone meanwhile
        return None


def _resumed(out: Path) -> dict:
    done = perflab("run", "--resume", str(out), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(perflab("export", str(out)).stdout)
    assert doc["run"]["status"] == "complete" and all(c["status"] == "ok" for c in doc["cells"])
    return doc


PG = """
[experiment]
design = "sequential"  # PostgreSQL runs one server at a time
name = "it-resume-pg"
server = "postgresql"
duration = "2s"
warmup = "1s"
repeats = 2

[dataset]
scale = 1

[workload]
tool = "pgbench"
test = "select-only"
threads = [1, 2]
"""


def test_sigkill_then_resume_of_a_postgresql_run(tmp_path: Path, tmpfs):
    shm = tmpfs("shm", "1G")
    shm.parent.chmod(0o755)  # the postgres user must reach its directories
    env = {**os.environ, "PERFLAB_TMPFS": str(shm)}
    spec, out = write_experiment(tmp_path / "pg.toml", PG), tmp_path / "out"
    _kill_once_stored(spec, out, 1, env)
    before = stored_rows(out)
    assert 1 <= len(before) < 4
    deadline = time.monotonic() + 15  # pdeathsig: the killed run's postmaster and backends go
    while [p for p, cmd in processes("postgres") if str(shm) in cmd] and time.monotonic() < deadline:
        time.sleep(0.2)
    # but a postmaster started in the instant of the kill, before its setpriv armed --pdeathsig (ci50:
    # the next cell's, 1 s after the first was stored), outlives it: the resume's sweep stops it by the
    # run's tag in its environment (run/workdir.tagged; tests/unit/test_sweep_trust.py)
    left = {p for p, cmd in processes("postgres") if str(shm) in cmd}
    assert all(f"PERFLAB_RUN={shm}/" in (_environ(p) or f"PERFLAB_RUN={shm}/") for p in left), left
    done = subprocess.run([sys.executable, "-m", "perflab", "run", "--resume", str(out)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(before)} cells stored" in done.stdout
    expected = [c.key for c in dataclasses.replace(parse(PG), seed=meta(out, "seed")).cells()]
    assert stored_keys(out) == expected  # every cell once, in the original order
    assert stored_rows(out)[: len(before)] == before
    doc = json.loads(perflab("export", str(out)).stdout)
    assert doc["run"]["status"] == "complete" and all(c["status"] == "ok" for c in doc["cells"])
    assert all(c["summary"]["transactions"] > 0 and c["preload_verified_backends"] > c["threads"] for c in doc["cells"])
    assert [p for p, cmd in processes("postgres") if str(shm) in cmd] == []  # the leftovers among them


INTERLEAVED = """
[experiment]
design = "interleaved"
name = "it-resume-interleaved"
duration = "2s"
warmup = "1s"
repeats = 3

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_point_select"
threads = [1]

[variants.v]
a = {}
b = {}
"""


def test_sigkill_then_resume_of_an_interleaved_run_pairs_only_cells_that_ran_together(tmp_path: Path):
    """A group's cells are committed in one transaction (run/interleave.py run_group): a run
    killed while a group runs or is stored leaves whole groups only, and the resume runs the
    missing groups whole, never a lone cell beside one that ran at another time."""
    spec, out = write_experiment(tmp_path / "il.toml", INTERLEAVED), tmp_path / "out"
    _kill_once_stored(spec, out, 2)
    before = {row[1]: row for row in stored_rows(out)}
    assert len(before) in (2, 4), sorted(before)  # whole groups of 2
    doc = _resumed(out)
    expected = [c.key for c in dataclasses.replace(parse(INTERLEAVED), seed=meta(out, "seed")).cells()]
    assert stored_keys(out) == expected  # every cell once, in the original order
    assert all(before[i] == row for i, row in ((r[1], r) for r in stored_rows(out)) if i in before)
    cells = {c["id"]: c for c in doc["cells"]}
    groups = {tuple(c["design"]["group"]) for c in cells.values()}
    assert sorted(i for g in groups for i in g) == sorted(cells)  # 3 groups, each cell in one
    for group in groups:
        members = [cells[i] for i in group]
        assert len(members) == 2 and {c["repeat"] for c in members} == {members[0]["repeat"]}
        assert len({i in before for i in group}) == 1, (group, sorted(before))  # all before the kill, or all after
        a, b = members  # ran together: their spans overlap
        assert a["started_at"] < b["ended_at"] and b["started_at"] < a["ended_at"], members
