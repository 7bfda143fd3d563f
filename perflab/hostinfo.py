"""Host metadata stored once per run: what a result is only comparable with.

Output: {"kernel": "6.1.0-...", "cpu_model": "...", "cores": 2, "glibc": "2.36", ...}
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from typing import Any

from perflab import __version__, servers


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _version_of(argv: list[str]) -> str | None:
    if not shutil.which(argv[0]):
        return None
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr) else None


def _go_tpc() -> str | None:
    """go-tpc's pinned version when it is installed (its own `version` says "dev")."""
    from perflab.run.workloads import gotpc

    return gotpc.version()


def collect() -> dict[str, Any]:
    """The machine, and the installed servers' and tools' versions (each kind's fields)."""
    versions = {field: argv for kind in servers.every() for field, argv in kind.host_versions().items()}
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "glibc": os.confstr("CS_GNU_LIBC_VERSION"),
        "mariadbd": None,
        "sysbench": _version_of(["sysbench", "--version"]),
        "postgres": None,
        "pgbench": None,
        "go-tpc": _go_tpc(),
        **{field: _version_of(argv) for field, argv in versions.items()},
        "python": platform.python_version(),
        "perflab": __version__,
    }
