"""`[variants.X] NAME = { glibc = "sid" }`: the same server binary with another Debian suite's C
library (issue 34; report 002's question, glibc's own malloc across versions, asked of today's).

The suite's libc6 and what it depends on are unpacked into a private root (debroot.py), and the
server runs through that root's loader with the root's libraries first. Every other library the
binary needs is still the system's: after the root's, the loader searches its built-in /lib and
/usr/lib, which are this machine's. A preloaded allocator keeps working (Debian 12's libraries
run on a newer C library). The cell records the C library actually mapped (allocator_proof).

    libc = libc_root("sid", cache)               # debroot.Root, made once, then cached
    build = with_glibc(installed, libc)          # the same binary, run through libc's loader
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from perflab.errors import PerflabError
from perflab.builds import Build, BuildError, debroot

PACKAGE = "libc6"


def libc_root(suite: str, cache: Path) -> debroot.Root | BuildError:
    """The private root of `suite`'s libc6, or why it could not be made (its cells fail)."""
    try:
        return debroot.make_root(PACKAGE, suite, cache)
    except PerflabError as exc:
        return BuildError(
            f"glibc {suite}", "private root", None, exc.message + (f"\nhint: {exc.hint}" if exc.hint else "")
        )


def with_glibc(build: Build, libc: debroot.Root) -> Build:
    """`build` run through `libc`'s loader: its record gains `root` (the C library's) and `glibc`
    (the suite). A build that already runs from a private root has that suite's C library."""
    if build.extra.get("root"):
        raise BuildError(
            build.name or "installed",
            f"glibc = {libc.suite!r}",
            None,
            f"it runs from its own {build.extra['root']['suite']} private root, with that suite's C library; "
            "glibc applies to a binary of this system (the installed server, a basedir or a source build)",
        )
    return dataclasses.replace(build, extra={**build.extra, "root": libc.record(), "glibc": libc.suite})
