#!/usr/bin/env python3
"""Re-record tests/data/status/batch.txt: one batch of perflab's status query (SHOW GLOBAL
STATUS, the enabled INNODB_METRICS rows, the end marker) as `mariadb --batch` prints it, from a
fresh server on a throw-away datadir under /dev/shm (removed at the end, even on failure).

    python3 tests/data/regen_status.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perflab.observers.status import QUERY  # noqa: E402
from perflab.servers.mysqld import Mysqld, binary  # noqa: E402


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="perflab-regen-status-", dir="/dev/shm"))
    try:
        data = root / "data"
        install = [binary("mariadb-install-db"), "--no-defaults", f"--datadir={data}", "--user=root",
                   "--auth-root-authentication-method=socket"]  # fmt: skip
        subprocess.run(install, check=True, capture_output=True)
        with Mysqld(root, data, {}) as server:
            client = [binary("mariadb"), "--no-defaults", f"--socket={server.socket}", "--user=root", "--batch",
                      "--skip-column-names"]  # fmt: skip
            out = subprocess.run(client, input=QUERY, capture_output=True, text=True, check=True).stdout
        target = ROOT / "tests" / "data" / "status" / "batch.txt"
        target.write_text(out, encoding="utf-8")
        print(f"wrote {target} ({len(out.splitlines())} lines)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
