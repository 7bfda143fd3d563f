"""Known allocator libraries: names users write in `preload`, where the .so lives, which
Debian package ships it, and how to tell from /proc/PID/maps that it is really in use.

Example: resolve("jemalloc") -> Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perflab import dpkg, elf


@dataclass(frozen=True)
class Allocator:
    name: str
    sonames: tuple[str, ...]  # first found wins
    package: str  # Debian package that ships it


KNOWN: dict[str, Allocator] = {
    a.name: a
    for a in (
        Allocator("jemalloc", ("libjemalloc.so.2",), "libjemalloc2"),
        Allocator("tcmalloc", ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4"), "libtcmalloc-minimal4"),
        Allocator("mimalloc", ("libmimalloc.so.2", "libmimalloc.so.2.0"), "libmimalloc2.0"),
    )
}
GLIBC = "glibc"
NAMES = (GLIBC, *KNOWN)
# What makes an allocator one the allocation counter can stand in front of: the calls it
# forwards. A preload without them is not an allocator (the counter would count glibc's).
ENTRY_POINTS = ("malloc", "free", "calloc", "realloc")
# perflab's allocation counter (observers/alloc/perflab_alloc.c) names itself so, and
# exports this symbol: it is never a variant's allocator ([observe] alloc preloads it)
TRACER_SONAME = "perflab_alloc.so"
TRACER_SYMBOL = "perflab_alloc_format"
TRACER_ENV = "PERFLAB_ALLOC_FILE"  # names the counter's file, for the counter only

_LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
)


def resolve(preload: str) -> Path | None:
    """The library file for a `preload` value (a known name or an absolute path).

    Returns None for "glibc" (nothing to preload). Raises LookupError with a hint when a
    known allocator is not installed, FileNotFoundError when a path does not exist.
    """
    if preload == GLIBC:
        return None
    if preload.startswith("/"):
        path = Path(preload)
        if not path.is_file():
            raise FileNotFoundError(preload)
        return path
    allocator = KNOWN[preload]
    for soname in allocator.sonames:
        for directory in _LIB_DIRS:
            candidate = Path(directory) / soname
            if candidate.is_file():
                return candidate
    raise LookupError(f"apt-get install {allocator.package}")


# on another host, over SSH: the first of "$@" that is a file, its real path (exit 1: none)
FIND_ON_HOST = 'for f in "$@"; do [ -f "$f" ] && { readlink -f "$f"; exit 0; }; done; exit 1'


def candidates(name: str) -> list[str]:
    """Where a known allocator's library may be, in resolve's order: for a look on another host."""
    return [f"{directory}/{soname}" for soname in KNOWN[name].sonames for directory in _LIB_DIRS]


def is_alloc_tracer(path: Path) -> bool:
    """Is `path` (a shared library) perflab's allocation counter, by name, soname or its symbol?"""
    if os.path.basename(os.path.realpath(path)).startswith(TRACER_SONAME.removesuffix(".so")):
        return True
    names = elf.dynamic_names(Path(path))
    return names is not None and (names[0] == TRACER_SONAME or TRACER_SYMBOL in names[1])


def missing_entry_points(path: Path) -> list[str] | None:
    """The allocator calls (ENTRY_POINTS) `path` does not define; None if its symbols cannot be read."""
    names = elf.dynamic_names(Path(path))
    return None if names is None else [name for name in ENTRY_POINTS if name not in names[1]]


def mapped_libraries(pid: int) -> set[str]:
    """Real paths of every file mapped into process `pid`."""
    paths = set()
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].startswith("/"):
                paths.add(parts[5].strip().removesuffix(" (deleted)"))
    return paths


def is_mapped(library: Path | str, mapped: set[str]) -> bool:
    real = os.path.realpath(library)
    return any(os.path.realpath(p) == real for p in mapped)


def foreign_allocators(mapped: set[str]) -> list[str]:
    """Known allocator libraries found in a mapping set (for checking the glibc variant)."""
    found = []
    for allocator in KNOWN.values():
        stems = tuple(s.split(".so")[0] + ".so" for s in allocator.sonames)
        if any(os.path.basename(p).startswith(stems) for p in mapped):
            found.append(allocator.name)
    return found


def glibc_library(mapped: set[str]) -> str | None:
    for path in sorted(mapped):
        if os.path.basename(path).startswith("libc.so"):
            return path
    return None


def _usrmerge_aliases(path: str) -> list[str]:
    """The other name of a path under merged /usr: /lib -> usr/lib, so mariadbd's maps show
    /usr/lib/x86_64-linux-gnu/libc.so.6 where dpkg recorded /lib/x86_64-linux-gnu/libc.so.6."""
    for short in ("/lib", "/lib64", "/bin", "/sbin"):
        if path.startswith(f"/usr{short}/"):
            return [path.removeprefix("/usr")]
        if path.startswith(f"{short}/"):
            return [f"/usr{path}"]
    return []


def package_version(path: str | Path) -> str | None:
    """'package version' of the Debian package owning `path`, or None if no package does.
    Asked once per file in a process (each cell asks it of its allocator and C library; each
    `dpkg-query -S` reads the whole package database, 30 ms of CPU here): a file replaced since
    (another inode, size or mtime: a package upgraded mid-run) is asked again."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
        stamp: tuple[int, int, int] | None = (st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        stamp = None
    return _package_version(str(path), real, stamp)


@functools.lru_cache(maxsize=256)
def _package_version(path: str, real: str, stamp: tuple[int, int, int] | None) -> str | None:
    def run(argv: list[str]) -> tuple[int, str]:
        if argv[:2] == ["dpkg-query", "-S"]:
            return dpkg.search(argv[2])  # kept across runs
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return done.returncode, done.stdout

    return owning_package((path, real), run)


def owning_package(paths: tuple[str, ...], run: Callable[[list[str]], tuple[int, str]]) -> str | None:
    """'package version' of the Debian package owning the first of `paths` (or its other name under
    merged /usr) dpkg knows, asked through `run` (argv -> (exit status, stdout)): here, or on a host."""
    aliases = [alias for path in paths for alias in _usrmerge_aliases(path)]
    for candidate in dict.fromkeys((*paths, *aliases)):
        status, out = run(["dpkg-query", "-S", candidate])
        if status == 0 and ":" in out:
            package = out.split(":")[0].strip()
            return f"{package} {run(['dpkg-query', '-W', '-f', '${Version}', package])[1].strip()}".strip()
    return None
