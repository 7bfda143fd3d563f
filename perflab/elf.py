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


def _is_pie(file, head: bytes, end: str) -> bool:
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


SHT_DYNAMIC = 6
SHT_DYNSYM = 11
SHT_GNU_VERNEED = 0x6FFFFFFE  # .gnu.version_r: the symbol versions needed, per library
DT_NEEDED, DT_SONAME = 1, 14
_SECTION_BYTES = 16 << 20  # a dynamic symbol table is far smaller (libc's: ~70 KiB); hostile files stop here


def dynamic_names(path: Path) -> tuple[str | None, set[str]] | None:
    """(soname, names of the functions and data it defines for others) of a shared library,
    from its section headers (.dynsym, .dynamic and their string tables); None when it has
    none that can be read (not ELF, truncated, stripped of section headers)."""
    try:
        with open(path, "rb") as file:
            head = file.read(_HEADER)
            if len(head) < 52 or head[:4] != MAGIC or head[4] not in (1, 2) or head[5] not in (1, 2):
                return None
            sections = _sections(file, head)
            symbols = [s for s in sections if s[0] == SHT_DYNSYM]
            dynamic = [s for s in sections if s[0] == SHT_DYNAMIC]
            if not symbols:
                return None
            names = _defined_symbols(file, head, symbols[0], sections)
            soname = _soname(file, head, dynamic[0], sections) if dynamic else None
    except (OSError, struct.error, IndexError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return soname, names


# (type, offset, size, link) of each section
Section = tuple[int, int, int, int]


def _sections(file, head: bytes) -> list[Section]:
    end, wide = "<" if head[5] == 1 else ">", head[4] == 2
    if wide:
        shoff, (shentsize, shnum) = (
            struct.unpack_from(end + "Q", head, 0x28)[0],
            struct.unpack_from(end + "HH", head, 0x3A),
        )
    else:
        shoff, (shentsize, shnum) = (
            struct.unpack_from(end + "I", head, 0x20)[0],
            struct.unpack_from(end + "HH", head, 0x2E),
        )
    if not shoff or shentsize != (64 if wide else 40):
        return []
    file.seek(shoff)
    table = file.read(shentsize * min(shnum, 4096))
    out = []
    for i in range(len(table) // shentsize):
        entry = table[i * shentsize : (i + 1) * shentsize]
        if wide:
            _, kind, _, _, offset, size, link = struct.unpack_from(end + "IIQQQQI", entry)
        else:
            _, kind, _, _, offset, size, link = struct.unpack_from(end + "IIIIIII", entry)
        out.append((kind, offset, size, link))
    return out


def _read(file, section: Section) -> bytes:
    file.seek(section[1])
    return file.read(min(section[2], _SECTION_BYTES))


def _string(strings: bytes, at: int) -> str:
    return strings[at : strings.index(b"\0", at)].decode("utf-8")


def _defined_symbols(file, head: bytes, symtab: Section, sections: list[Section]) -> set[str]:
    end, wide = "<" if head[5] == 1 else ">", head[4] == 2
    strings = _read(file, sections[symtab[3]])
    data = _read(file, symtab)
    fmt = end + ("IBBHQQ" if wide else "IIIBBH")
    step = struct.calcsize(fmt)
    names = set()
    for fields in struct.iter_unpack(fmt, data[: len(data) // step * step]):
        name, shndx = (fields[0], fields[3]) if wide else (fields[0], fields[5])
        if name and shndx:  # section 0 (SHN_UNDEF): needed from another library, not defined here
            names.add(_string(strings, name))
    return names


def needed(path: Path) -> set[str]:
    """The sonames a program or library links (its DT_NEEDED entries); empty when unreadable."""
    try:
        with open(path, "rb") as file:
            head = file.read(_HEADER)
            if len(head) < 52 or head[:4] != MAGIC or head[4] not in (1, 2) or head[5] not in (1, 2):
                return set()
            sections = _sections(file, head)
            dynamic = [s for s in sections if s[0] == SHT_DYNAMIC]
            return set(_dynamic_strings(file, head, dynamic[0], sections, DT_NEEDED)) if dynamic else set()
    except (OSError, struct.error, IndexError, ValueError):
        return set()


def _soname(file, head: bytes, dynamic: Section, sections: list[Section]) -> str | None:
    return next(iter(_dynamic_strings(file, head, dynamic, sections, DT_SONAME)), None)


def _dynamic_strings(file, head: bytes, dynamic: Section, sections: list[Section], wanted: int) -> list[str]:
    """The strings of every `wanted` entry of the dynamic section (DT_NEEDED, DT_SONAME)."""
    end = "<" if head[5] == 1 else ">"
    fmt = end + ("qQ" if head[4] == 2 else "iI")
    step = struct.calcsize(fmt)
    data = _read(file, dynamic)
    strings: bytes | None = None
    out = []
    for tag, value in struct.iter_unpack(fmt, data[: len(data) // step * step]):
        if tag == 0:
            break
        if tag == wanted:
            strings = strings if strings is not None else _read(file, sections[dynamic[3]])
            out.append(_string(strings, value))
    return out


def version_needs(path: Path) -> dict[str, set[str]]:
    """The symbol versions a program or library needs, per library it links (.gnu.version_r):
    {"libc.so.6": {"GLIBC_2.34", "GLIBC_2.38", ...}, ...}; empty when unreadable."""
    try:
        with open(path, "rb") as file:
            head = file.read(_HEADER)
            if len(head) < 52 or head[:4] != MAGIC or head[4] not in (1, 2) or head[5] not in (1, 2):
                return {}
            sections = _sections(file, head)
            found = [s for s in sections if s[0] == SHT_GNU_VERNEED]
            if not found:
                return {}
            return _needs(_read(file, found[0]), _read(file, sections[found[0][3]]), "<" if head[5] == 1 else ">")
    except (OSError, struct.error, IndexError, ValueError):
        return {}


def _needs(data: bytes, strings: bytes, end: str) -> dict[str, set[str]]:
    """Walk Elf_Verneed entries (16 bytes: version, count, file, aux, next) and each one's
    Elf_Vernaux list (16 bytes: hash, flags, other, name, next); the same in 32 and 64 bits."""
    out: dict[str, set[str]] = {}
    at, seen = 0, 0
    while seen < 4096:
        _, count, name, aux, following = struct.unpack_from(end + "HHIII", data, at)
        versions = out.setdefault(_string(strings, name), set())
        where = at + aux
        for _ in range(min(count, 4096)):
            _, _, _, version, step = struct.unpack_from(end + "IHHII", data, where)
            versions.add(_string(strings, version))
            where += step
            if not step:
                break
        if not following:
            break
        at, seen = at + following, seen + 1
    return out


def glibc_needed(path: Path) -> tuple[int, ...] | None:
    """The newest GLIBC_x.y symbol version `path` needs, as a tuple (2, 38); None when none."""
    versions = [v.removeprefix("GLIBC_") for names in version_needs(path).values() for v in names]
    numbers = [tuple(int(p) for p in v.split(".")) for v in versions if v and all(p.isdigit() for p in v.split("."))]
    return max(numbers) if numbers else None
