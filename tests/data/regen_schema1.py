#!/usr/bin/env python3
"""Re-record tests/data/schema1/results.db: a results directory written by the last perflab
whose results schema was version 1 (commit SCHEMA1_COMMIT), for the upgrade test
(tests/unit/test_results_upgrade.py).

    python3 tests/data/regen_schema1.py    # ~1 min: a real mariadbd and sysbench, 9 cells, 3 failed

That perflab is taken from git history (`git archive`) into a temporary directory and run with
PYTHONPATH pointing at it, so the file is what a real schema-1 perflab wrote, not a hand-made
imitation. Only results.db is kept, compacted into one file with VACUUM INTO (no WAL, no logs).
"""

from __future__ import annotations

import io
import os
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TARGET = HERE / "schema1" / "results.db"
SCHEMA1_COMMIT = "7ba921a"  # "Remove an unused Experiment field ...", just before results schema 2

SPEC = """\
[experiment]
name = "schema1"
duration = "5s"
warmup = "2s"
repeats = 3

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_read_only"
threads = [2]
options = { rand_type = "uniform" }

[variants.allocator]
glibc = {}
jemalloc = { preload = "jemalloc" }
broken = { server_options = { no_such_server_option = "1" } }   # a failed cell, as v1 stored it
"""


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="perflab-schema1-") as tmp:
        old = Path(tmp) / "perflab-schema1"
        archive = subprocess.run(["git", "archive", SCHEMA1_COMMIT], cwd=ROOT, capture_output=True, check=True)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(old, filter="data")
        spec = Path(tmp) / "schema1.toml"
        spec.write_text(SPEC, encoding="utf-8")
        out = Path(tmp) / "out"
        env = {**os.environ, "PYTHONPATH": str(old)}
        # cwd=tmp: `python -m` puts the working directory first on sys.path, and this checkout's
        # perflab must not shadow the old one
        argv = [sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)]
        done = subprocess.run(argv, env=env, cwd=tmp, check=False)
        if done.returncode != 1:  # 1: the run happened, the `broken` cells failed
            sys.exit(f"the schema-1 perflab failed with exit code {done.returncode}")
        TARGET.parent.mkdir(parents=True, exist_ok=True)
        TARGET.unlink(missing_ok=True)
        with sqlite3.connect(out / "results.db") as db:
            assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "1"
            db.execute("VACUUM INTO ?", (str(TARGET),))
    print(f"wrote {TARGET} ({TARGET.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
