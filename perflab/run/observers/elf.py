"""What a binary offers a profiler: symbol tables, debug info, frame pointers, function starts.

Reads the ELF file directly (64-bit little-endian, x86-64), no external tool:

    info = inspect("/usr/sbin/mariadbd")   # BinaryInfo(symtab=False, dynsym_functions=29000, ...)
    starts = FunctionStarts.load(path)     # from .eh_frame_hdr: every function with unwind info
    starts.name(0x8a78c9) -> "mariadbd+0x8a7700"

Why function starts: a stripped binary (Debian's mariadbd) has only its exported symbols
(.dynsym); static functions show as bare addresses in perf and eu-stack, a different
address per sample. .eh_frame_hdr (needed for C++ exceptions, so never stripped) lists
where every function starts, so an address can be named by its function's start: stable
across samples, runs and processes (PIE relative), so such frames still aggregate and diff.
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

_FP_PROLOGUE = b"\x55\x48\x89\xe5"  # push %rbp; mov %rsp,%rbp
_ENDBR64 = b"\xf3\x0f\x1e\xfa"


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
    """The section table of a 64-bit little-endian ELF file, and reads of its bytes."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        with open(self.path, "rb") as f:
            self.data = f.read()
        if self.data[:4] != b"\x7fELF" or self.data[4] != 2 or self.data[5] != 1:
            raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
        (shoff,) = struct.unpack_from("<Q", self.data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", self.data, 0x3A)
        raw = [struct.unpack_from("<IIQQQQIIQQ", self.data, shoff + i * shentsize) for i in range(shnum)]
        names = raw[shstrndx][4] if raw else 0
        self.sections = {}
        for name, kind, _flags, addr, offset, size, link, _info, _align, entsize in raw:
            label = self._cstr(names + name)
            self.sections[label] = Section(label, kind, addr, offset, size, link, entsize)
        (phoff,) = struct.unpack_from("<Q", self.data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", self.data, 0x36)
        self.loads = []
        for i in range(phnum):
            ptype, _pflags, off, vaddr, _paddr, filesz, _memsz, _al = struct.unpack_from(
                "<IIQQQQQQ", self.data, phoff + i * phentsize
            )
            if ptype == 1:  # PT_LOAD
                self.loads.append((vaddr, off, filesz))

    def _cstr(self, offset: int) -> str:
        end = self.data.index(b"\0", offset)
        return self.data[offset:end].decode("utf-8", "replace")

    def at(self, vaddr: int, size: int) -> bytes:
        """`size` bytes at virtual address `vaddr` (b"" outside the file's loaded segments)."""
        for start, off, filesz in self.loads:
            if start <= vaddr < start + filesz:
                pos = off + vaddr - start
                return self.data[pos : pos + size]
        return b""

    def build_id(self) -> str | None:
        note = self.sections.get(".note.gnu.build-id")
        if note is None:
            return None
        namesz, descsz, _kind = struct.unpack_from("<III", self.data, note.offset)
        start = note.offset + 12 + ((namesz + 3) & ~3)
        return self.data[start : start + descsz].hex()

    def function_symbols(self, table: str = ".dynsym") -> list[int]:
        """Addresses of defined FUNC symbols in `table`."""
        sec = self.sections.get(table)
        if sec is None or not sec.entsize:
            return []
        out = []
        for pos in range(sec.offset, sec.offset + sec.size, sec.entsize):
            _name, info, _other, shndx, value, _size = struct.unpack_from("<IBBHQQ", self.data, pos)
            if info & 0xF == 2 and shndx != 0 and value:  # STT_FUNC, defined
                out.append(value)
        return out


@dataclass(frozen=True)
class BinaryInfo:
    """What a profiler will be able to show for this binary, and why."""

    path: str
    build_id: str | None
    symtab: bool  # full symbol table: static functions have names
    dynsym_functions: int  # exported functions: named even when stripped
    debug_info: bool  # .debug_info in the file or a separate debug file found
    debug_file: str | None
    eh_frame_functions: int  # functions with unwind info (named as binary+0xSTART otherwise)
    fp_functions_sampled: int
    fp_functions_with_prologue: int  # of those, how many set up a frame pointer

    @property
    def fp_fraction(self) -> float | None:
        return self.fp_functions_with_prologue / self.fp_functions_sampled if self.fp_functions_sampled else None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["fp_fraction"] = None if self.fp_fraction is None else round(self.fp_fraction, 3)
        return data


def debug_file(build_id: str | None) -> str | None:
    if not build_id:
        return None
    path = f"/usr/lib/debug/.build-id/{build_id[:2]}/{build_id[2:]}.debug"
    return path if os.path.isfile(path) else None


@lru_cache(maxsize=16)
def inspect(path: str) -> BinaryInfo:
    elf = Elf(path)
    funcs = sorted(set(elf.function_symbols(".symtab") or elf.function_symbols(".dynsym")))
    sample = funcs[:: max(1, len(funcs) // 400)]
    with_fp = 0
    for addr in sample:
        head = elf.at(addr, 12)
        head = head[4:] if head.startswith(_ENDBR64) else head
        with_fp += head.startswith(_FP_PROLOGUE)
    build_id = elf.build_id()
    separate = debug_file(build_id)
    return BinaryInfo(
        path=path,
        build_id=build_id,
        symtab=".symtab" in elf.sections,
        dynsym_functions=len(elf.function_symbols(".dynsym")),
        debug_info=".debug_info" in elf.sections or separate is not None,
        debug_file=separate,
        eh_frame_functions=len(FunctionStarts.load(path).starts),
        fp_functions_sampled=len(sample),
        fp_functions_with_prologue=with_fp,
    )


# DWARF pointer encodings used in .eh_frame_hdr
_PE_FORMAT = {0x02: "<H", 0x03: "<I", 0x04: "<Q", 0x0A: "<h", 0x0B: "<i", 0x0C: "<q"}  # udata2/4/8, sdata2/4/8


class FunctionStarts:
    """Sorted start addresses of the functions listed in .eh_frame_hdr."""

    def __init__(self, label: str, starts: list[int]) -> None:
        self.label = label
        self.starts = starts

    @classmethod
    @lru_cache(maxsize=32)
    def load(cls, path: str) -> FunctionStarts:
        label = os.path.basename(path)
        try:
            elf = Elf(path)
        except (OSError, ValueError):
            return cls(label, [])
        hdr = elf.sections.get(".eh_frame_hdr")
        if hdr is None:
            return cls(label, [])
        data = elf.data
        version, ptr_enc, count_enc, table_enc = data[hdr.offset : hdr.offset + 4]
        if version != 1 or table_enc != 0x3B or count_enc & 0x0F not in _PE_FORMAT or ptr_enc & 0x0F not in _PE_FORMAT:
            return cls(label, [])  # only the encoding every x86-64 toolchain writes: datarel sdata4
        pos = hdr.offset + 4 + struct.calcsize(_PE_FORMAT[ptr_enc & 0x0F])
        (count,) = struct.unpack_from(_PE_FORMAT[count_enc & 0x0F], data, pos)
        pos += struct.calcsize(_PE_FORMAT[count_enc & 0x0F])
        pairs = struct.unpack_from(f"<{2 * count}i", data, pos)
        starts = sorted({hdr.addr + rel for rel in pairs[0::2]})
        return cls(label, starts)

    def start_of(self, addr: int) -> int | None:
        i = bisect.bisect_right(self.starts, addr) - 1
        return self.starts[i] if i >= 0 else None

    def name(self, addr: int) -> str:
        """`label+0xSTART` of the function containing `addr`, or `label+0xADDR` if none does."""
        start = self.start_of(addr)
        return f"{self.label}+{hex(addr if start is None else start)}"
