"""Allocation counting: the perflab_alloc.so preload, its build, and its counters.

perflab_alloc.c (beside this file) is an LD_PRELOAD library that counts malloc, calloc,
realloc, free, the memalign family and C++ operator new/delete by log2 size class, per thread,
into a file on tmpfs that perflab creates (`create`) and reads (`read`) at the window's start
and end; the window's counts are the difference (`Counts.minus`). It forwards every call to
the next library, so the variant's allocator still does all the work.

Counter file format `perflab-alloc/1` (little-endian uint64 words): a 64-byte header
(magic "PLALLOC1", version, slots, ops, classes, slots_used, overflow_threads, pid), then per
slot calls[ops][classes] and bytes[ops][classes]. Size class c holds sizes in [2^(c-1), 2^c).

    >>> counts = read(path)            # after the workload ran
    >>> counts.calls["malloc"][12]     # malloc calls of 2048..4095 bytes
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from perflab.errors import PerflabError

SOURCE = Path(__file__).with_name("perflab_alloc.c")
OPS = ("malloc", "calloc", "realloc", "free", "memalign", "new", "delete")
CLASSES = 48
MAGIC = int.from_bytes(b"PLALLOC1", "little")
HEADER_BYTES = 64
SLOT_WORDS = 2 * len(OPS) * CLASSES
DEFAULT_SLOTS = 2048  # threads with a slot of their own; more share slot 0 (atomic adds)


class AllocTracerError(PerflabError):
    """The allocation counter could not be built or read."""


def build(cache: Path) -> Path:
    """The shim compiled for this machine, cached by the hash of its source and compiler."""
    cc = os.environ.get("CC", "cc")
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise AllocTracerError(
            f"no C compiler to build the allocation counter ({cc}: {exc})",
            "install gcc (apt-get install gcc) or set CC",
        ) from exc
    digest = hashlib.sha256(SOURCE.read_bytes() + version.encode()).hexdigest()[:16]
    out = cache / f"perflab_alloc-{digest}.so"
    if out.exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(f".{os.getpid()}.tmp")
    argv = [cc, "-O2", "-g", "-fPIC", "-shared", "-fexceptions", "-Wall", "-o", str(partial), str(SOURCE), "-ldl"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AllocTracerError(
            f"building the allocation counter failed: {done.stderr.strip()[-2000:]}",
            f"the command was: {' '.join(argv)}",
        )
    partial.rename(out)
    return out


def create(path: Path, slots: int = DEFAULT_SLOTS) -> None:
    """A zeroed counter file for `slots` threads (the shim fills in the header)."""
    with open(path, "wb") as f:
        f.truncate(HEADER_BYTES + slots * SLOT_WORDS * 8)


@dataclass
class Counts:
    """Calls and bytes per op and size class; `threads` that had a slot, `overflow` that shared one."""

    calls: dict[str, list[int]] = field(default_factory=dict)
    bytes: dict[str, list[int]] = field(default_factory=dict)
    threads: int = 0
    overflow: int = 0

    def minus(self, before: Counts) -> Counts:
        return Counts(
            {op: [a - b for a, b in zip(self.calls[op], before.calls[op], strict=True)] for op in OPS},
            {op: [a - b for a, b in zip(self.bytes[op], before.bytes[op], strict=True)] for op in OPS},
            self.threads,
            self.overflow,
        )

    def total_calls(self, op: str) -> int:
        return sum(self.calls[op])

    def total_bytes(self, op: str) -> int:
        return sum(self.bytes[op])


def empty() -> Counts:
    return Counts({op: [0] * CLASSES for op in OPS}, {op: [0] * CLASSES for op in OPS})


def read(path: Path) -> Counts:
    """Sum of every thread's slot. A file the shim never mapped (no allocation yet) is all zero."""
    words = np.fromfile(path, dtype="<u8")
    header = words[: HEADER_BYTES // 8]
    if header[0] == 0:
        return empty()
    if header[0] != MAGIC or header[1] != 1 or header[3] != len(OPS) or header[4] != CLASSES:
        raise AllocTracerError(f"{path} is not a perflab-alloc/1 counter file", "was it written by another perflab?")
    slots = int(header[2])
    used = min(int(header[5]), slots)
    body = words[HEADER_BYTES // 8 : HEADER_BYTES // 8 + slots * SLOT_WORDS].reshape(slots, 2, len(OPS), CLASSES)
    total = body[:used].sum(axis=0, dtype=np.uint64)
    return Counts(
        {op: [int(x) for x in total[0, i]] for i, op in enumerate(OPS)},
        {op: [int(x) for x in total[1, i]] for i, op in enumerate(OPS)},
        threads=used - 1,
        overflow=int(header[6]),
    )


def size_class_bounds(c: int) -> tuple[int, int]:
    """[low, high) bytes of size class c."""
    return (0, 1) if c == 0 else (1 << (c - 1), 1 << c)
