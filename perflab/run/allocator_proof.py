"""Proof, from /proc/PID/maps, that a server runs the allocator its cell asked for.

A preload that failed to load, or a server linked against another allocator, would measure
something else than the variant says; the cell fails instead. Output: the two fields a cell
row stores, e.g. {"allocator_library": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
"allocator_version": "5.3.0-1"}.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from perflab import allocators
from perflab.errors import AllocatorNotMappedError


def prove(pid: int, name: str | None, library: Path | None) -> dict[str, Any]:
    """The allocator fields of a cell row; AllocatorNotMappedError if `pid` runs another one."""
    mapped = allocators.mapped_libraries(pid)
    if library is not None:
        if not allocators.is_mapped(library, mapped):
            raise AllocatorNotMappedError(
                f"{library} ({name}) is not mapped into mariadbd (pid {pid})",
                "the server may be statically linked or the library failed to load",
            )
        real = os.path.realpath(library)
        return {"allocator_library": real, "allocator_version": allocators.package_version(real)}
    foreign = allocators.foreign_allocators(mapped)
    if foreign:
        raise AllocatorNotMappedError(f"glibc malloc requested but {', '.join(foreign)} is mapped")
    libc = allocators.glibc_library(mapped)
    package = allocators.package_version(libc) if libc else None
    version = os.confstr("CS_GNU_LIBC_VERSION") or "glibc"  # "glibc 2.36"
    return {"allocator_library": libc, "allocator_version": f"{version} ({package})" if package else version}
