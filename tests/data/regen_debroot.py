#!/usr/bin/env python3
"""Re-record tests/data/debroot/: what apt prints, through a private sid index
(perflab/builds/aptindex.py), for the look-ups and resolutions tests/unit/test_debroot.py parses:

    madison.txt    apt-cache madison mysql-server-core mariadb-server-core
    simulate.txt   apt-get install --simulate -q mysql-server-core   (the closure, libc6 included)
    conflict.txt   apt-get install --simulate -q mysql-server-core mariadb-server-core   (unresolvable)

    python3 tests/data/regen_debroot.py

The index lives in a throw-away cache (removed at the end); only the network is used. sid moves:
after regenerating, update the versions the unit tests name (libc6, mysql-server-core).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "debroot"
sys.path.insert(0, str(HERE.parent.parent))  # the perflab checkout this file belongs to

from perflab.builds.aptindex import apt, suite_index

RECORDINGS = {
    "madison.txt": ["apt-cache", "madison", "mysql-server-core", "mariadb-server-core"],
    "simulate.txt": ["apt-get", "install", "--simulate", "-q", "mysql-server-core"],
    "conflict.txt": ["apt-get", "install", "--simulate", "-q", "mysql-server-core", "mariadb-server-core"],
}


def main() -> None:
    cache = Path(tempfile.mkdtemp(prefix="perflab-regen-debroot-"))
    try:
        index = suite_index("sid", cache)
        OUT.mkdir(exist_ok=True)
        for name, argv in RECORDINGS.items():
            done = apt(index, argv, argv[0])
            (OUT / name).write_text(done.stdout + done.stderr, encoding="utf-8")
            print(f"wrote {OUT / name} (exit {done.returncode})")
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
