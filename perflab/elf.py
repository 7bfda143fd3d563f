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
from dataclasses import dataclass
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
_SECTION_BYTES = 256 << 20  # a section perflab reads is far smaller (libc's .dynsym: ~70 KiB); hostile files stop here
_UNREADABLE = (OSError, struct.error, IndexError, ValueError)  # UnicodeDecodeError is a ValueError


@dataclass(frozen=True)
class Section:
    name: str
    kind: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


class Elf:
    """perflab's one ELF reader: the section and program headers of a 32- or 64-bit ELF file of
    either byte order, and reads of its sections by name or type (each read capped, so a hostile
    file cannot make it read without end). ValueError (or OSError) if the file is not ELF.

        elf = Elf("/usr/sbin/mariadbd")
        elf.section(".note.gnu.build-id"), elf.read(section), elf.at(vaddr, 12), elf.build_id()
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        with open(self.path, "rb") as file:
            head = file.read(_HEADER)
            if len(head) < 52 or head[:4] != MAGIC or head[4] not in (1, 2) or head[5] not in (1, 2):
                raise ValueError(f"{path}: not an ELF file")
            self.wide, self.end = head[4] == 2, "<" if head[5] == 1 else ">"
            self.sections = self._sections(file, head)
            self.loads = self._loads(file, head)

    def _sections(self, file, head: bytes) -> dict[str, Section]:  # noqa: ANN001 - a binary file object
        if self.wide:
            (shoff,), (shentsize, shnum, shstrndx) = (
                struct.unpack_from(self.end + "Q", head, 0x28),
                struct.unpack_from(self.end + "HHH", head, 0x3A),
            )
        else:
            (shoff,), (shentsize, shnum, shstrndx) = (
                struct.unpack_from(self.end + "I", head, 0x20),
                struct.unpack_from(self.end + "HHH", head, 0x2E),
            )
        if not shoff or shentsize != (64 if self.wide else 40):
            return {}
        file.seek(shoff)
        table = file.read(shentsize * min(shnum, 4096))
        fmt = self.end + ("IIQQQQIIQQ" if self.wide else "IIIIIIIIII")
        raw = [struct.unpack_from(fmt, table, i * shentsize) for i in range(len(table) // shentsize)]
        names = b""
        if shstrndx < len(raw):
            file.seek(raw[shstrndx][4])
            names = file.read(min(raw[shstrndx][5], _SECTION_BYTES))
        out: dict[str, Section] = {}
        for i, (name, kind, _flags, addr, offset, size, link, _info, _align, entsize) in enumerate(raw):
            label = _string(names, name) if name < len(names) else f"#{i}"
            out.setdefault(label, Section(label, kind, addr, offset, size, link, entsize))
        return out

    def _loads(self, file, head: bytes) -> list[tuple[int, int, int]]:  # noqa: ANN001
        if self.wide:
            (phoff,), (phentsize, phnum) = (
                struct.unpack_from(self.end + "Q", head, 0x20),
                struct.unpack_from(self.end + "HH", head, 0x36),
            )
        else:
            (phoff,), (phentsize, phnum) = (
                struct.unpack_from(self.end + "I", head, 0x1C),
                struct.unpack_from(self.end + "HH", head, 0x2C),
            )
        if phentsize < (56 if self.wide else 32):
            return []
        file.seek(phoff)
        table = file.read(phentsize * min(phnum, 256))
        loads = []
        for i in range(len(table) // phentsize):
            if self.wide:
                ptype, _, off, vaddr, _, filesz = struct.unpack_from(self.end + "IIQQQQ", table, i * phentsize)
            else:
                ptype, off, vaddr, _, filesz = struct.unpack_from(self.end + "IIIII", table, i * phentsize)
            if ptype == 1:  # PT_LOAD
                loads.append((vaddr, off, filesz))
        return loads

    def section(self, name: str) -> Section | None:
        return self.sections.get(name)

    def of_kind(self, kind: int) -> Section | None:
        return next((s for s in self.sections.values() if s.kind == kind), None)

    def linked(self, section: Section) -> Section | None:
        """The section `section` links to (a symbol table's strings)."""
        return next((s for i, s in enumerate(self.sections.values()) if i == section.link), None)

    def read(self, section: Section | None, offset: int = 0, size: int | None = None) -> bytes:
        if section is None:
            return b""
        with open(self.path, "rb") as file:
            file.seek(section.offset + offset)
            return file.read(min(section.size - offset if size is None else size, _SECTION_BYTES))

    def at(self, vaddr: int, size: int) -> bytes:
        """`size` bytes at virtual address `vaddr` (b"" outside the file's loaded segments)."""
        for start, off, filesz in self.loads:
            if start <= vaddr < start + filesz:
                with open(self.path, "rb") as file:
                    file.seek(off + vaddr - start)
                    return file.read(min(size, start + filesz - vaddr))
        return b""

    def build_id(self) -> str | None:
        """The GNU build ID (its -dbgsym debug file is /usr/lib/debug/.build-id/XX/REST.debug)."""
        note = self.read(self.section(".note.gnu.build-id"))
        if len(note) < 12:
            return None
        namesz, descsz, _kind = struct.unpack_from(self.end + "III", note)
        start = 12 + ((namesz + 3) & ~3)
        return note[start : start + descsz].hex() or None

    def comment(self) -> list[str]:
        """The strings of .comment (the compilers that built it: "GCC: (Debian 12.2.0-14) 12.2.0")."""
        data = self.read(self.section(".comment"))
        return [text.decode("utf-8", "replace").strip() for text in data.split(b"\0") if text.strip()]

    def function_symbols(self, table: str = ".dynsym") -> list[int]:
        """Addresses of the defined FUNC symbols of `table`."""
        sec = self.section(table)
        if sec is None or not sec.entsize:
            return []
        fmt = self.end + ("IBBHQQ" if self.wide else "IIIBBH")
        data = self.read(sec)
        out = []
        for fields in struct.iter_unpack(fmt, data[: len(data) // struct.calcsize(fmt) * struct.calcsize(fmt)]):
            info, shndx, value = (fields[1], fields[3], fields[4]) if self.wide else (fields[3], fields[5], fields[1])
            if info & 0xF == 2 and shndx != 0 and value:  # STT_FUNC, defined
                out.append(value)
        return out

    def defined_names(self, table: Section) -> set[str]:
        """Names of the symbols `table` defines (not those it needs from another library)."""
        strings = self.read(self.linked(table))
        data = self.read(table)
        fmt = self.end + ("IBBHQQ" if self.wide else "IIIBBH")
        step = struct.calcsize(fmt)
        names = set()
        for fields in struct.iter_unpack(fmt, data[: len(data) // step * step]):
            name, shndx = (fields[0], fields[3]) if self.wide else (fields[0], fields[5])
            if name and shndx:  # section 0 (SHN_UNDEF): needed from another library, not defined here
                names.add(_string(strings, name))
        return names

    def dynamic_strings(self, wanted: int) -> list[str]:
        """The strings of every `wanted` entry of the dynamic section (DT_NEEDED, DT_SONAME)."""
        dynamic = self.of_kind(SHT_DYNAMIC)
        if dynamic is None:
            return []
        fmt = self.end + ("qQ" if self.wide else "iI")
        step = struct.calcsize(fmt)
        data = self.read(dynamic)
        strings: bytes | None = None
        out = []
        for tag, value in struct.iter_unpack(fmt, data[: len(data) // step * step]):
            if tag == 0:
                break
            if tag == wanted:
                strings = strings if strings is not None else self.read(self.linked(dynamic))
                out.append(_string(strings, value))
        return out


def _string(strings: bytes, at: int) -> str:
    return strings[at : strings.index(b"\0", at)].decode("utf-8")


def dynamic_names(path: Path) -> tuple[str | None, set[str]] | None:
    """(soname, names of the functions and data it defines for others) of a shared library,
    from its section headers (.dynsym, .dynamic and their string tables); None when it has
    none that can be read (not ELF, truncated, stripped of section headers)."""
    try:
        elf = Elf(path)
        symbols = elf.of_kind(SHT_DYNSYM)
        if symbols is None:
            return None
        return next(iter(elf.dynamic_strings(DT_SONAME)), None), elf.defined_names(symbols)
    except _UNREADABLE:
        return None


def needed(path: Path) -> set[str]:
    """The sonames a program or library links (its DT_NEEDED entries); empty when unreadable."""
    try:
        return set(Elf(path).dynamic_strings(DT_NEEDED))
    except _UNREADABLE:
        return set()


def comment(path: Path) -> list[str] | None:
    """The strings of `path`'s .comment section ([] when it has none); None when unreadable."""
    try:
        return Elf(path).comment()
    except _UNREADABLE:
        return None


def build_id(path: Path) -> str | None:
    try:
        return Elf(path).build_id()
    except _UNREADABLE:
        return None


def version_needs(path: Path) -> dict[str, set[str]]:
    """The symbol versions a program or library needs, per library it links (.gnu.version_r):
    {"libc.so.6": {"GLIBC_2.34", "GLIBC_2.38", ...}, ...}; empty when unreadable."""
    try:
        elf = Elf(path)
        found = elf.of_kind(SHT_GNU_VERNEED)
        if found is None:
            return {}
        return _needs(elf.read(found), elf.read(elf.linked(found)), elf.end)
    except _UNREADABLE:
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
