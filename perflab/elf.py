"""Can the dynamic loader preload this file? Read from its ELF header and dynamic section.

A preload must be an ELF shared object (ET_DYN) for this machine's class and architecture,
and not a position-independent executable: PIEs are ET_DYN too, but glibc refuses to load
them ("cannot dynamically load position-independent executable", DF_1_PIE). Without this
check a wrong file only shows up as a cell whose allocator is not mapped.

    not_preloadable(Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"))  -> None
    not_preloadable(Path("/usr/bin/ls"))  -> "a position-independent executable, not a shared library"
"""

from __future__ import annotations

import struct
from pathlib import Path

MAGIC = b"\x7fELF"
ET_DYN = 3
_TYPES = {1: "an object file (.o)", 2: "an executable", 4: "a core dump"}
PT_DYNAMIC = 2
DT_FLAGS_1 = 0x6FFFFFFB
DF_1_PIE = 0x08000000
_HEADER = 64  # an ELF64 header; ELF32's is shorter


def not_preloadable(path: Path) -> str | None:
    """None if `path` is a shared library this machine can preload; else what it is instead."""
    if path.is_dir():
        return "a directory"
    if not path.is_file():
        return "not a regular file"
    with open(path, "rb") as file:
        head = file.read(_HEADER)
        if not head:
            return "an empty file"
        if head[:4] != MAGIC:
            return "a text file, not a shared library" if _is_text(head) else "not an ELF file"
        if len(head) < 52 or head[4] not in (1, 2) or head[5] not in (1, 2):
            return "a truncated or corrupt ELF file"
        end = "<" if head[5] == 1 else ">"
        e_type, machine = struct.unpack_from(end + "HH", head, 16)
        if e_type != ET_DYN:
            return f"{_TYPES.get(e_type, f'an ELF file of type {e_type}')}, not a shared library"
        host = _host_header()
        if host is not None and (head[4], machine) != host:
            return f"a shared library for another machine (ELF class {head[4]}, machine {machine})"
        try:
            pie = _is_pie(file, head, end)
        except struct.error:
            return "a truncated or corrupt ELF file"
        if pie:
            return "a position-independent executable, not a shared library"
    return None


def _is_text(head: bytes) -> bool:
    try:
        return b"\0" not in head and bool(head.decode("utf-8").strip())
    except UnicodeDecodeError:
        return False


def _host_header() -> tuple[int, int] | None:
    """(ELF class, machine) of this process's own executable: the server's architecture."""
    try:
        with open("/proc/self/exe", "rb") as exe:
            head = exe.read(20)
    except OSError:
        return None
    if head[:4] != MAGIC or len(head) < 20:
        return None
    return head[4], struct.unpack_from("<H" if head[5] == 1 else ">H", head, 18)[0]


def _is_pie(file, head: bytes, end: str) -> bool:  # noqa: ANN001 - a binary file object
    wide = head[4] == 2
    if wide:
        phoff, phentsize, phnum = struct.unpack_from(end + "Q", head, 32)[0], *struct.unpack_from(end + "HH", head, 54)
    else:
        phoff, phentsize, phnum = struct.unpack_from(end + "I", head, 28)[0], *struct.unpack_from(end + "HH", head, 42)
    if phentsize < (56 if wide else 32):
        return False
    file.seek(phoff)
    table = file.read(phentsize * min(phnum, 256))
    for i in range(len(table) // max(phentsize, 1)):
        entry = table[i * phentsize : (i + 1) * phentsize]
        if wide:
            p_type, _, offset, _, _, size = struct.unpack_from(end + "IIQQQQ", entry)
        else:
            p_type, offset, _, _, size = struct.unpack_from(end + "IIIII", entry)
        if p_type != PT_DYNAMIC:
            continue
        file.seek(offset)
        dynamic = file.read(min(size, 1 << 20))
        fmt = end + ("qQ" if wide else "iI")
        step = struct.calcsize(fmt)
        for tag, value in struct.iter_unpack(fmt, dynamic[: len(dynamic) // step * step]):
            if tag == DT_FLAGS_1:
                return bool(value & DF_1_PIE)
            if tag == 0:  # DT_NULL ends the table
                break
    return False
