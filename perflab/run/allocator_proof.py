"""Proof, from /proc/PID/maps, that a server runs the allocator its cell asked for.

A preload that failed to load, or a server linked against another allocator, would measure
something else than the variant says; the cell fails instead. Output: the two fields a cell
row stores, e.g. {"allocator_library": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
"allocator_version": "5.3.0-1"}, and "libc", the C library it mapped (the row's build.libc):
{"library": "/usr/lib/x86_64-linux-gnu/libc.so.6", "version": "2.36", "build": "Debian GLIBC 2.36-9+deb12u14"}.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perflab import allocators, elf
from perflab.errors import AllocatorNotMappedError
from perflab.places.proc import per_binary

VERSION_RE = re.compile(rb"GNU C Library \(([^)\n]{1,80})\) [a-z ]{0,40}release version (\d+\.\d+(?:\.\d+)?)")


def prove(
    pid: int, name: str | None, library: Path | str | None, program: Path | None = None, glibc: str | None = None
) -> dict[str, Any]:
    """The allocator fields of a cell row; AllocatorNotMappedError if `pid` runs another one.
    With no preload asked for, an allocator the server's `program` links itself (DT_NEEDED:
    sid's mysqld links tcmalloc) is that server's own default, recorded as such; any other is
    foreign. `glibc`: the C library's version when it is not the system's (a private root's)."""
    mapped = allocators.mapped_libraries(pid)
    return {**_allocator(mapped, pid, name, library, program, glibc), "libc": libc_mapped(mapped)}


def libc_mapped(mapped: set[str]) -> dict[str, str | None] | None:
    """The C library the server actually mapped, and its version as the library itself says it
    ("GNU C Library (Debian GLIBC 2.43-7) stable release version 2.43."): the row's build.libc."""
    libc = allocators.glibc_library(mapped)
    if libc is None:
        return None
    try:
        version, build = per_binary([libc], ("libc says",), lambda: _libc_says(libc))
    except OSError:
        version = build = None
    return {"library": libc, "version": version, "build": build}


def _libc_says(path: str) -> tuple[str | None, str | None]:
    """(version, build) from the library's own string: read once per file (2 MB), not per cell (per_binary)."""
    with open(path, "rb") as f:
        found = VERSION_RE.search(f.read())
    return (found.group(2).decode(), found.group(1).decode()) if found else (None, None)


def _allocator(
    mapped: set[str], pid: int, name: str | None, library: Path | str | None, program: Path | None, glibc: str | None
) -> dict[str, Any]:
    if library is not None:
        if not allocators.is_mapped(library, mapped):
            raise AllocatorNotMappedError(
                f"{library} ({name}) is not mapped into {program.name if program else 'the server'} (pid {pid})",
                "the server may be statically linked or the library failed to load",
            )
        real = os.path.realpath(library)
        return {"allocator_library": real, "allocator_version": allocators.package_version(real)}
    own = linked_allocator(mapped, program, allocators.package_version)
    if own is not None:
        return own
    libc = allocators.glibc_library(mapped)
    package = allocators.package_version(libc) if libc else None
    version = f"glibc {glibc}" if glibc else os.confstr("CS_GNU_LIBC_VERSION") or "glibc"  # "glibc 2.36"
    return {"allocator_library": libc, "allocator_version": f"{version} ({package})" if package else version}


def linked_allocator(
    mapped: set[str], program: Path | None, version_of: Callable[[str], str | None]
) -> dict[str, Any] | None:
    """With no preload asked for: the allocator fields of one the server's `program` links itself
    (its own default: sid's mysqld's tcmalloc), None for glibc's malloc; AllocatorNotMappedError
    for any other allocator mapped. `version_of`: a library's package (here, or on its host)."""
    unasked = {p for p in mapped if allocators.foreign_allocators({p})}
    linked = elf.needed(program) if unasked and program is not None else set()
    own = [p for p in unasked if _links(p, linked)]
    foreign = allocators.foreign_allocators(unasked - set(own))
    if foreign:
        raise AllocatorNotMappedError(f"glibc malloc requested but {', '.join(foreign)} is mapped")
    if not own:
        return None
    assert program is not None
    path = min(own)
    version = version_of(path)
    kind = ", ".join(allocators.foreign_allocators({path}))
    said = f"{kind} {version}" if version else kind
    return {"allocator_library": path, "allocator_version": f"{said} (linked by {program.name})"}


def _links(path: str, sonames: set[str]) -> bool:
    """`path` (maps show the real file: libtcmalloc.so.4.6.5) is the library of one of `sonames`."""
    name = os.path.basename(path)
    return any(name == soname or name.startswith(soname + ".") for soname in sonames)


def glibc_of(build: Any) -> str | None:
    """The C library version a build runs with when it is not the system's: a private root's."""
    root = getattr(build, "extra", {}).get("root") if build is not None else None
    return root.get("glibc_version") if root else None
