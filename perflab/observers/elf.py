"""What a binary offers a profiler: symbol tables, debug info, frame pointers, function starts.

Reads the ELF file with perflab's one ELF reader (perflab/elf.py), no external tool:

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

from perflab import debuginfo
from perflab.elf import Elf

_FP_PROLOGUE = b"\x55\x48\x89\xe5"  # push %rbp; mov %rsp,%rbp
_ENDBR64 = b"\xf3\x0f\x1e\xfa"


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
    found = debuginfo.debug_file(Path(path))  # a private root's usr/lib/debug, or the system's
    separate = str(found) if found is not None else None
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
        hdr = elf.section(".eh_frame_hdr")
        data = elf.read(hdr)
        if hdr is None or len(data) < 4:
            return cls(label, [])
        version, ptr_enc, count_enc, table_enc = data[:4]
        if version != 1 or table_enc != 0x3B or count_enc & 0x0F not in _PE_FORMAT or ptr_enc & 0x0F not in _PE_FORMAT:
            return cls(label, [])  # only the encoding every x86-64 toolchain writes: datarel sdata4
        pos = 4 + struct.calcsize(_PE_FORMAT[ptr_enc & 0x0F])
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
