"""The function starts of a remote host's binaries, for the frames its perf or eu-stack could not
name (a stripped server): named `mariadbd+0xSTART` as locally (observers/elf.py), from the same
file here when it is the same (sha256), else from a copy fetched over SFTP once per run.

    starts = HostStarts(link, workdir / "host-binaries")
    starts("/usr/sbin/mariadbd").name(0x8a78c9)      # "mariadbd+0x8a5f00"
    starts.local("/usr/sbin/mariadbd")               # that file here: its stack quality is inspected
    names = HostSymbolizer(maps_text, starts)        # a host process's return addresses named here
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from perflab.builds import sha256
from perflab.errors import HostLostError
from perflab.hosts.transport import Connection
from perflab.observers.elf import FunctionStarts
from perflab.observers.pmp import ModuleMap
from perflab.observers.pmp_sampler import Symbolizer, V, _Callbacks, load_libdw


class _Unnamed(FunctionStarts):
    """No function starts: the host's binary could not be had; its unnamed frames stay [unknown]."""

    def name(self, addr: int) -> str:
        return "[unknown]"


def unnamed(path: str) -> FunctionStarts:
    return _Unnamed(os.path.basename(path), [])


class HostStarts:
    """Function starts of the host's binaries, for the frames its tools could not name (a stripped
    mariadbd: `mariadbd+0xSTART`, as locally): the file at the same path here when it is the same
    file (sha256), else a copy fetched over SFTP once per run into `cache` (by its sha256)."""

    def __init__(self, link: Connection, cache: Path) -> None:
        self.link, self.cache = link, cache
        self._local: dict[str, str | None] = {}

    def __call__(self, path: str) -> FunctionStarts:
        here = self.local(path)
        return FunctionStarts.load(here) if here is not None else unnamed(path)

    def local(self, path: str) -> str | None:
        """The host's file `path` as a file here (the same one, or the run's copy); None when it
        cannot be had (the host cannot hash it, the copy failed)."""
        if path not in self._local:
            try:
                self._local[path] = self._find(path)
            except (OSError, HostLostError):
                self._local[path] = None
        return self._local[path]

    def _find(self, path: str) -> str | None:
        done = self.link.run(["sha256sum", path], timeout=120)
        digest = done.stdout.split()[0] if done.status == 0 and done.stdout.strip() else None
        if digest is None:
            return None
        if os.path.isfile(path) and sha256(Path(path)) == digest:  # kept a process while the file is the same
            return path
        copy = self.cache / digest / os.path.basename(path)
        if not copy.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            partial = copy.with_name(copy.name + ".part")
            self.link.get(path, partial)
            partial.replace(copy)
        return str(copy)


def executable_bases(maps_text: str) -> dict[str, int]:
    """Each file the process runs code of (an executable mapping) -> where it is loaded (the start
    of its mapping at file offset 0), from its /proc/PID/maps: data files it maps are left out."""
    code = {p[5] for p in (line.split(None, 5) for line in maps_text.splitlines()) if len(p) == 6 and "x" in p[1]}
    return {path: base for path, base in ModuleMap(maps_text).bases.items() if path in code}


class HostSymbolizer(Symbolizer):
    """Symbolizer's names (name, dsos, close) for a process on a host, from its maps there: each
    binary it runs code of is read here (the same file, or the run's copy: HostStarts.local, or
    `local` first) at its load address there, by libdw as for a live process here."""

    def __init__(self, maps_text: str, starts: HostStarts, local: dict[str, str] | None = None) -> None:
        self.lib = lib = load_libdw()
        lib.dwfl_report_begin.restype, lib.dwfl_report_begin.argtypes = None, [V]
        lib.dwfl_report_elf.restype = V
        lib.dwfl_report_elf.argtypes = [
            V,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_uint64,
            ctypes.c_bool,
        ]
        debuginfo = ctypes.cast(lib.dwfl_standard_find_debuginfo, V).value
        self.callbacks = _Callbacks(ctypes.cast(lib.dwfl_build_id_find_elf, V).value, debuginfo, None, None)
        self.dwfl = lib.dwfl_begin(ctypes.byref(self.callbacks))
        if not self.dwfl:
            raise OSError(f"libdw: {self.error()}")
        lib.dwfl_report_begin(self.dwfl)
        for path, base in executable_bases(maps_text).items():
            here = (local or {}).get(path) or starts.local(path)
            if here is not None:  # an ET_DYN file placed at its load address (add_p_vaddr false)
                lib.dwfl_report_elf(self.dwfl, here.encode(), here.encode(), -1, base, False)
        lib.dwfl_report_end(self.dwfl, None, None)
        self.names: dict[int, str] = {}
        self.dsos: dict[str, str] = {}
