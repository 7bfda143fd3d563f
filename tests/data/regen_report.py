#!/usr/bin/env python3
"""Re-record tests/data/report/tiny/ (a real results directory) and the Markdown golden file.

    python3 tests/data/regen_report.py               # run tiny.toml for real (~1 min), then render
    python3 tests/data/regen_report.py --golden-only # re-render tiny.md from the stored results

The run goes through the perflab CLI like a user's (a real mariadbd and sysbench); only
results.db is kept (compacted into one file with VACUUM INTO: no WAL, no logs), so the
directory stays small. The golden file is what `perflab report DIR --format markdown -o`
writes for it today: after regenerating, read its diff before committing, the unit test
checks it byte for byte.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "report"
ROOT = HERE.parent.parent


def record() -> None:
    with tempfile.TemporaryDirectory(prefix="perflab-regen-") as tmp:
        out = Path(tmp) / "tiny"
        done = subprocess.run(
            [sys.executable, "-m", "perflab", "run", str(DATA / "tiny.toml"), "-o", str(out)], cwd=ROOT, check=False
        )
        if done.returncode != 0:
            sys.exit(f"perflab run failed with exit code {done.returncode}")
        target = DATA / "tiny"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        with sqlite3.connect(out / "results.db") as db:
            db.execute("VACUUM INTO ?", (str(target / "results.db"),))


def render() -> None:
    """Render from a copy, so that opening the database leaves no WAL files in tests/data."""
    with tempfile.TemporaryDirectory(prefix="perflab-regen-") as tmp:
        copy = Path(tmp) / "tiny"
        shutil.copytree(DATA / "tiny", copy)
        report = Path(tmp) / "tiny.md"
        subprocess.run(
            [sys.executable, "-m", "perflab", "report", str(copy), "--format", "markdown", "-o", str(report)],
            cwd=ROOT,
            check=True,
        )
        shutil.copy(report, DATA / "tiny.md")
        listing = sorted(p.name for p in (Path(tmp) / "tiny_files").iterdir())
        (DATA / "tiny_files.txt").write_text("\n".join(listing) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--golden-only", action="store_true", help="only re-render the golden file")
    if not parser.parse_args().golden_only:
        record()
    render()


if __name__ == "__main__":
    main()
