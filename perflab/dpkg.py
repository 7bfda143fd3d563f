"""Which Debian package owns a file on this machine: `dpkg-query -S PATH`, its answers kept across runs.

`dpkg-query -S` reads the file list of every installed package (0.1 s of CPU each here); a run asks
it of its server binary, its C library and each allocator, and every `perflab run` asks again: 0.67
CPU-s of a 4-cell run's 7.7 (measured 2026-11-30, perf -a). An answer stays valid while dpkg's
database is unchanged: its status file, which every install and removal rewrites, is the key.

    $PERFLAB_CACHE/dpkg-owners.json  (else ~/.cache/perflab/)
    {"format": "perflab-dpkg-owners/1", "status": [inode, size, mtime_ns],
     "owners": {"/usr/sbin/mariadbd": [0, "mariadb-server-core: /usr/sbin/mariadbd\\n"]}}

A cache that cannot be read or written is only slower: the query runs as before
(docs/results-format.md, "Package owners").
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

from perflab.cache import cache_root

FORMAT = "perflab-dpkg-owners/1"
STATUS = Path("/var/lib/dpkg/status")


def search(path: str) -> tuple[int, str]:
    """(exit status, stdout) of `dpkg-query -S path`; (127, "") where dpkg-query cannot run."""
    stamp = _stamp()
    file = cache_root() / "dpkg-owners.json"
    owners = _read(file, stamp)
    if path in owners:
        status, out = owners[path]
        return int(status), str(out)
    try:
        done = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return 127, ""
    # an answer (owned: 0, owned by none: 1; not an error, 2) from a database unchanged while it was asked
    if done.returncode in (0, 1) and stamp is not None and stamp == _stamp():
        _write(file, stamp, {**_read(file, stamp), path: [done.returncode, done.stdout]})
    return done.returncode, done.stdout


def _stamp() -> list[int] | None:
    try:
        st = STATUS.stat()
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def _read(file: Path, stamp: list[int] | None) -> dict[str, list]:
    try:
        doc = json.loads(file.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("status") != stamp or stamp is None:
        return {}
    owners = doc.get("owners")
    return owners if isinstance(owners, dict) else {}


def _write(file: Path, stamp: list[int], owners: dict[str, list]) -> None:
    """Replaced whole (a rename): another perflab reading it at once sees the old or the new."""
    temporary = file.with_name(f".{file.name}.{os.getpid()}")
    with contextlib.suppress(OSError):
        file.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps({"format": FORMAT, "status": stamp, "owners": owners}))
        os.replace(temporary, file)
    with contextlib.suppress(OSError):
        temporary.unlink(missing_ok=True)
