"""perflab's cache: builds, unpacked packages, calibrations, server option lists, dpkg's answers.

$PERFLAB_CACHE, else $XDG_CACHE_HOME/perflab, else ~/.cache/perflab (builds/__init__.py has its layout).
"""

from __future__ import annotations

import os
from pathlib import Path

from perflab.errors import EnvironmentProblem, Problem


def cache_root() -> Path:
    if os.environ.get("PERFLAB_CACHE"):
        return Path(os.environ["PERFLAB_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "perflab"


def writable_cache(root: Path) -> Path:
    """`root`, created if need be; else an environment problem naming it (exit 3)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise EnvironmentProblem(
            str(root),
            [
                Problem(
                    "build cache",
                    "a writable directory for builds",
                    f"{root}: {exc.strerror or exc}",
                    "set PERFLAB_CACHE to a writable directory",
                )
            ],
        ) from None
    return root
