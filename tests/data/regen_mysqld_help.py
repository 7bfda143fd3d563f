#!/usr/bin/env python3
"""Re-record tests/data/mysqld/mariadbd-10.11-help.txt.gz: what the installed mariadbd says of its
options (`mariadbd --no-defaults --verbose --help`), which servers/mysqld_options.py reads.

    python3 tests/data/regen_mysqld_help.py
"""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

OUT = Path(__file__).resolve().parent / "mysqld" / "mariadbd-10.11-help.txt.gz"


def main() -> None:
    argv = ["/usr/sbin/mariadbd", "--no-defaults", "--verbose", "--help"]
    text = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    OUT.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))


if __name__ == "__main__":
    main()
