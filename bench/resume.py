"""Time from `perflab run --resume DIR` to its first new cell, with 100 cells already stored.

What: a results directory holding 100 completed cells of a 120-cell matrix (oltp_read_only,
4 tables x 100k rows, as an interrupted overnight run would leave it). Measured: the wall
time from launching `perflab run --resume DIR` to the start of cell 100 (its log directory
appears when the cell starts), against the same figure for a fresh `perflab run` of the same
experiment to its cell 0 (which has to prepare the dataset). Also checked: resume does not
prepare the dataset again (logs/prepare.txt untouched), keeps the 100 stored cells unchanged,
and runs cell 100 next (not cell 0).

How: a fresh run is started and killed (SIGKILL) once its first cell is stored; its stored
cell is then copied, in SQLite, to the ids and keys of cells 1-99 (each with its intervals),
which is what 100 completed cells look like to --resume. Fresh and resume launches alternate,
3 of each; medians are reported.

Run: python3 bench/resume.py            # the figures we quote (~2 minutes)
     python3 bench/resume.py --quick    # 1 of each, smaller dataset
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C

ROOT = Path(__file__).resolve().parent.parent
STORED = 100

SPEC = """\
[experiment]
name = "bench-resume"
duration = "2s"
warmup = "1s"
repeats = 60

[dataset]
tables = {tables}
table_size = {table_size}

[variants.v]
a = {{}}
b = {{}}
"""


def launch(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PERFLAB_ALLOW_CONCURRENT": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "perflab", "run", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 300) -> float:
    started = time.monotonic()
    while not path.exists():
        if proc.poll() is not None:
            raise C.BenchError(f"perflab exited with {proc.returncode} before {path} appeared")
        if time.monotonic() - started > timeout:
            raise C.BenchError(f"{path} did not appear within {timeout:.0f} s")
        time.sleep(0.01)
    return time.monotonic() - started


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()


def fill(out: Path, count: int) -> None:
    """Copy stored cell 0 (and its intervals) to ids 1..count-1 with the keys of those cells."""
    db = sqlite3.connect(out / "results.db")
    try:
        columns = [row[1] for row in db.execute("PRAGMA table_info(cells)")]
        row = dict(zip(columns, db.execute("SELECT * FROM cells WHERE id = 0").fetchone()))
        keys = [f"v={v}/t1/r{r}" for r in range(1, 61) for v in ("a", "b")]
        with db:
            for i in range(1, count):
                copy = {
                    **row,
                    "id": i,
                    "key": keys[i],
                    "repeat": i // 2 + 1,
                    "variant": '{"v": "%s"}' % ("a", "b")[i % 2],
                }
                db.execute(
                    f"INSERT INTO cells ({', '.join(copy)}) VALUES ({', '.join('?' for _ in copy)})",
                    list(copy.values()),
                )
                db.execute(
                    "INSERT INTO intervals SELECT ?, t, warmup, tps, qps, reads, writes, other, p95_ms, "
                    "errors_per_s, reconnects_per_s FROM intervals WHERE cell_id = 0",
                    (i,),
                )
    finally:
        db.close()


def stored_ids(out: Path) -> list[int]:
    db = sqlite3.connect(out / "results.db")
    try:
        return [r[0] for r in db.execute("SELECT id FROM cells WHERE status = 'ok' ORDER BY id")]
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds, tables, size = (1, 2, 10_000) if args.quick else (3, 4, 100_000)
    machine = C.Machine()
    fresh_s, resume_s = [], []
    with tempfile.TemporaryDirectory(prefix="plbench-resume-") as tmp:
        spec = Path(tmp) / "resume.toml"
        spec.write_text(SPEC.format(tables=tables, table_size=size), encoding="utf-8")
        for r in range(rounds):
            out = Path(tmp) / f"run{r}"
            proc = launch([str(spec), "-o", str(out)])
            try:
                fresh_s.append(wait_for(out / "logs" / "cell-0000", proc))
                deadline = time.monotonic() + 120
                while not (out / "results.db").exists() or 0 not in stored_ids(out):
                    if time.monotonic() > deadline:
                        raise C.BenchError("the first cell was never stored")
                    time.sleep(0.05)
            finally:
                stop(proc)
            fill(out, STORED)
            prepared = (out / "logs" / "prepare.txt").stat().st_mtime_ns
            logs_before = {p.name: p.stat().st_mtime_ns for p in (out / "logs").iterdir()}
            proc = launch(["--resume", str(out)])
            try:
                resume_s.append(wait_for(out / "logs" / f"cell-{STORED:04d}", proc))
            finally:
                stop(proc)
            if (out / "logs" / "prepare.txt").stat().st_mtime_ns != prepared:
                raise C.BenchError("--resume prepared the dataset again")
            touched = sorted(
                p.name
                for p in (out / "logs").iterdir()
                if p.name.startswith("cell-")
                and int(p.name[5:]) < STORED
                and logs_before.get(p.name) != p.stat().st_mtime_ns
            )
            if touched or stored_ids(out)[:STORED] != list(range(STORED)):
                raise C.BenchError(f"--resume re-ran or lost a stored cell: {touched}")
            C.say(
                f"round {r + 1}: fresh run to cell 0 {fresh_s[-1]:.2f} s, resume to cell {STORED} {resume_s[-1]:.2f} s"
            )
    info = machine.finish()
    fresh, resume = statistics.median(fresh_s), statistics.median(resume_s)
    C.say(C.Machine.describe(info))
    C.say(
        f"median: resume to first new cell {resume:.2f} s vs fresh run to first cell {fresh:.2f} s "
        f"(ratio {resume / fresh:.3f}); dataset not prepared again, {STORED} stored cells untouched"
    )
    C.final_json(
        {
            "bench": "resume",
            "quick": args.quick,
            "stored_cells": STORED,
            "resume_to_first_cell_s": round(resume, 3),
            "fresh_to_first_cell_s": round(fresh, 3),
            "ratio": round(resume / fresh, 3),
            "resume_runs_s": [round(x, 3) for x in resume_s],
            "fresh_runs_s": [round(x, 3) for x in fresh_s],
            "machine": info,
        }
    )


if __name__ == "__main__":
    C.main_guard(main)
