"""Libraries on a host, for a server or a client that runs there: a variant's preload or client
library (a known allocator as the host installed it, or a file given by its path here, copied into
the host's run directory once a run) and the Debian package that ships a file there (asked once).

    path = library(rundir, "jemalloc")     # "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" there
    package_of(rundir, path)               # "libjemalloc2 5.3.0-1", or None
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perflab import allocators
from perflab.errors import ToolMissingError
from perflab.hosts.rundir import RunDir

# keyed by the host's connection and run directory: (id, path, a variant's value) -> its real path there
_found: dict[tuple[int, str, str], str] = {}
_packages: dict[tuple[int, str, str], str | None] = {}  # (id, path, a file there) -> "package version"


def library(rundir: RunDir, value: str) -> str:
    """The real path on the host of `value`: a known allocator there, or a library given by its path here
    (copied into the run directory). ToolMissingError (exit 3) naming the package the host lacks."""
    key = (id(rundir.link), rundir.path, value)
    if key not in _found:
        link = rundir.link
        if value.startswith("/"):
            copied = sum(1 for k in _found if k[:2] == key[:2] and k[2].startswith("/"))
            copy = f"{rundir.path}/lib-{copied}-{Path(value).name}"
            link.put(Path(value), copy)
            found = link.run(["readlink", "-f", copy])
        else:
            found = link.run(["sh", "-c", allocators.FIND_ON_HOST, *allocators.candidates(value)])
        if found.status != 0 or not found.stdout.strip():
            package = allocators.KNOWN[value].package if value in allocators.KNOWN else None
            raise ToolMissingError(
                f"host {link.name} has no {value} library",
                f"install it there: `apt-get install {package}` on {link.target}"
                if package
                else f"check {value} on this machine ({found.stderr.strip()[-200:]})",
            )
        _found[key] = found.stdout.strip()
    return _found[key]


def package_of(rundir: RunDir, path: str) -> str | None:
    """'package version' of the Debian package owning `path` on the host (asked once per run), or None."""
    key = (id(rundir.link), rundir.path, path)
    if key not in _packages:

        def run(argv: list[str]) -> tuple[int, str]:
            done = rundir.link.run(argv)
            return (done.status if done.status is not None else -1), done.stdout

        _packages[key] = allocators.owning_package((path,), run)
    return _packages[key]


def mapped(link: Any, pid: int) -> set[str]:
    """Real paths of the files process `pid` maps on the host (its /proc/PID/maps there); empty once it is gone."""
    lines = link.run(["cat", f"/proc/{pid}/maps"], timeout=60).stdout.splitlines()
    parts = [line.split(maxsplit=5) for line in lines]
    return {p[5].strip().removesuffix(" (deleted)") for p in parts if len(p) == 6 and p[5].startswith("/")}
