"""Directories of this machine copied to a host, once per run: a dataset's snapshot, and what a build
runs from there (docs/hosts.md, "Builds and glibc on the server host").

A tree goes as a tar (zstd, else gzip) over SFTP and is unpacked in the host's run directory (`put_tree`). A
build (builds/__init__.Build) runs on the host from copies of its private root (a sid package's, a
`glibc` variant's C library: builds/debroot.py) and of its own install tree (a package unpacked, a
basedir, a source build, and its share directory where it lies apart); a build of the installed kind
runs the host's own installed server. The Build that `shipped` returns names those copies: its
binary, share and root there, its sha256 and version those of the binary copied, so a cell records
what ran and where.

    put_tree(link, Path("/root/.cache/perflab/debroot/roots/9b86..."), "/dev/shm/perflab-host-x/tree-0", workdir)
    there = shipped(build, put, "/usr/sbin/mariadbd")   # put: a local directory -> its copy there
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perflab.builds import Build
from perflab.errors import HostLostError, PerflabError
from perflab.hosts.transport import Connection

# $0: where the tree goes (it must not exist), from the tar $0.tar.$2 beside it, unpacked with tar's
# option $1 (-z: any tar's gzip, busybox's too); readable by every account there (mode 0755 on its
# top: the server's own account, not the ssh user, maps its files)
_UNPACK = 'mkdir -m 755 "$0" && tar "$1" -xf "$0.tar.$2" -C "$0" && rm "$0.tar.$2"'
# (suffix, compressor here, tar's option there): zstd where both ends have it, a quarter of gzip -1's
# CPU for as many bytes (sid's PostgreSQL 18 root, 254 MB: zstd -1 1.55 CPU-s to 94 MB, gzip -1 5.8
# CPU-s to 97 MB; 2026-11-30); gzip -1 where either lacks it (a quarter of -6's CPU, a few percent
# more bytes). --use-compress-program: GNU tar's long-standing option (--zstd came with 1.31)
ZSTD = ("zst", "zstd -1", "--use-compress-program=zstd")
GZIP = ("gz", "gzip -1", "-z")
_zstd_there: dict[tuple[str, str], bool] = {}  # (a host's name, its ssh target) -> it has zstd


# what a private root holds that nothing runs (documentation, manual pages): never copied
LEFT_OUT = ("./usr/share/doc", "./usr/share/man", "./usr/share/info", "./usr/share/lintian")
# the system's own trees: a build's files there are never copied (own_trees)
_SYSTEM = {Path(p) for p in ("/usr/local", "/usr/lib", "/usr/share", "/opt/local")}


def put_tree(link: Connection, local: Path, remote: str, workdir: Path) -> str:
    """`local` (a directory) unpacked at `remote` on the host, through a tar in `workdir` compressed
    with zstd where both ends have it, else gzip (`compressor`); `remote`. HostLostError with the
    host's words when it does not fit there."""
    suffix, program, unpack = compressor(link)
    tar = workdir / f"{os.path.basename(remote)}.tar.{suffix}"
    skip = [f"--exclude={path}" for path in LEFT_OUT]
    argv = ["tar", "--sparse", *skip, "-I", program, "-cf", str(tar), "-C", str(local), "."]
    packed = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    if packed.returncode != 0:  # here: the work directory's room, or a file it cannot read
        tar.unlink(missing_ok=True)
        raise PerflabError(f"packing {local} for host {link.name} failed: {packed.stderr.strip()[-300:]}",
                           f"free space in {workdir}")  # fmt: skip
    try:
        link.put(tar, f"{remote}.tar.{suffix}")
    finally:
        tar.unlink(missing_ok=True)
    done = link.run(["sh", "-c", _UNPACK, remote, unpack, suffix], timeout=1800)
    if done.status != 0:
        raise HostLostError(
            f"host {link.name}: unpacking {local.name} there failed: {done.stderr.strip()[-300:]}",
            f"free space in {os.path.dirname(remote)} on {link.name}",
        )
    return remote


def compressor(link: Connection) -> tuple[str, str, str]:
    """ZSTD where zstd runs here and on the host (asked once per host), else GZIP."""
    if shutil.which("zstd") is None:
        return GZIP
    key = (link.name, str(link.target))
    if key not in _zstd_there:
        _zstd_there[key] = link.run(["sh", "-c", "command -v zstd"]).status == 0
    return ZSTD if _zstd_there[key] else GZIP


def own_trees(build: Build) -> list[Path]:
    """The directories a build's binary runs from: BASE of BASE/sbin/mariadbd or BASE/bin/postgres,
    and its share directory (error messages, charsets) where it lies outside BASE (Debian's layout).
    PerflabError for a system directory (/usr: a basedir naming the system's own tree), never copied."""
    trees = [build.binary.parent.parent]
    if build.share is not None and not build.share.is_relative_to(trees[0]):
        trees.append(build.share)
    for tree in trees:
        if len(tree.parts) < 3 or tree in _SYSTEM:
            raise PerflabError(
                f"build {build.name}: its files are in {tree}, a directory of the system's: not copied to a host",
                "give the build a directory of its own (a basedir, a package or a source build)",
            )
    return trees


def shipped(build: Build, put: Callable[[Path], str], installed: str) -> Build:
    """`build` as it runs on the host: its private root and its own tree copied there by `put` (a
    local directory -> its path there, once per run), `installed` (the host's server binary) for the
    installed kind. The binary, share and root name the copies; a copied binary's record keeps its
    path here (`shipped_from`)."""
    moved: dict[Path, str] = {}
    root: dict[str, Any] | None = build.extra.get("root")
    if root:
        moved[Path(root["dir"])] = put(Path(root["dir"]))

    def there(path: Path) -> Path:
        local = next((d for d in moved if path.is_relative_to(d)), None)
        return path if local is None else Path(moved[local]) / path.relative_to(local)

    extra = dict(build.extra)
    if build.kind == "installed":
        binary = Path(installed)  # the host's own server (a glibc variant: through the root copied there)
    else:
        if not any(build.binary.is_relative_to(d) for d in moved):
            for tree in own_trees(build):
                moved[tree] = put(tree)
        binary, extra["shipped_from"] = there(build.binary), str(build.binary)
    if root:
        extra["root"] = {**root, "dir": str(there(Path(root["dir"])))}
    share = there(build.share) if build.share is not None else None
    return dataclasses.replace(build, binary=binary, share=share, extra=extra)
