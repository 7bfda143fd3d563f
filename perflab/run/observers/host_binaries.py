"""The function starts of a remote host's binaries, for the frames its perf or eu-stack could not
name (a stripped server): named `mariadbd+0xSTART` as locally (run/observers/elf.py), from the same
file here when it is the same (sha256), else from a copy fetched over SFTP once per run.

    starts = HostStarts(link, workdir / "host-binaries")
    starts("/usr/sbin/mariadbd").name(0x8a78c9)      # "mariadbd+0x8a5f00"
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from perflab.errors import HostLostError
from perflab.hosts.transport import Connection
from perflab.run.observers.elf import FunctionStarts


class _Unnamed(FunctionStarts):
    """No function starts: the host's binary could not be had; its unnamed frames stay [unknown]."""

    def name(self, addr: int) -> str:
        return "[unknown]"


def unnamed(path: str) -> FunctionStarts:
    return _Unnamed(os.path.basename(path), [])


@functools.lru_cache(maxsize=64)
def _local_sha256(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class HostStarts:
    """Function starts of the host's binaries, for the frames its tools could not name (a stripped
    mariadbd: `mariadbd+0xSTART`, as locally): the file at the same path here when it is the same
    file (sha256), else a copy fetched over SFTP once per run into `cache` (by its sha256)."""

    def __init__(self, link: Connection, cache: Path) -> None:
        self.link, self.cache = link, cache
        self._loaded: dict[str, FunctionStarts] = {}

    def __call__(self, path: str) -> FunctionStarts:
        if path not in self._loaded:
            try:
                self._loaded[path] = self._load(path)
            except (OSError, HostLostError):
                self._loaded[path] = unnamed(path)
        return self._loaded[path]

    def _load(self, path: str) -> FunctionStarts:
        done = self.link.run(["sha256sum", path], timeout=120)
        digest = done.stdout.split()[0] if done.status == 0 and done.stdout.strip() else None
        if digest is None:
            return unnamed(path)
        if os.path.isfile(path):
            st = os.stat(path)
            if _local_sha256(path, st.st_mtime_ns, st.st_size) == digest:
                return FunctionStarts.load(path)
        copy = self.cache / digest / os.path.basename(path)
        if not copy.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            partial = copy.with_name(copy.name + ".part")
            self.link.get(path, partial)
            partial.replace(copy)
        return FunctionStarts.load(str(copy))
