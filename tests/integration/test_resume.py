"""perflab killed with SIGKILL mid-matrix, then `perflab run --resume`: only the missing cells
run, in their original order, on the same dataset snapshot; nothing is lost or run twice."""

from __future__ import annotations

import dataclasses
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from perflab.spec import parse
from tests.conftest import ROOT, perflab
from tests.integration.helpers import perflab_children, write_experiment

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
