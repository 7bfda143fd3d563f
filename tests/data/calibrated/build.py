"""Builds tests/data/calibrated/slow_malloc.c (a preload that burns N ns per malloc call) once
per source and compiler, for the calibrated-effect test and bench/archive/calibrated_effect.py.

    python3 tests/data/calibrated/build.py [OUT_DIR]   # prints the .so's path
    build(Path("/tmp/x"))                              # -> /tmp/x/slow_malloc-<hash>.so
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "slow_malloc.c"
ENV = "PERFLAB_SLOW_MALLOC_NS"


def build(out_dir: Path | None = None) -> Path:
    """The shim compiled for this machine (cached by the hash of its source and compiler)."""
    cc = os.environ.get("CC", "cc")
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout
    digest = hashlib.sha256(SOURCE.read_bytes() + version.encode()).hexdigest()[:16]
    out_dir = out_dir or Path(tempfile.gettempdir()) / "perflab-test-shims"
    out = out_dir / f"slow_malloc-{digest}.so"
    if out.exists():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(f".{os.getpid()}.tmp")
    argv = [cc, "-O2", "-fPIC", "-shared", "-Wall", "-Werror", "-o", str(partial), str(SOURCE)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()[-2000:]}")
    partial.rename(out)
    return out


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
