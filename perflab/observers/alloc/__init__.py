"""Allocation counting: the perflab_alloc.so preload, its build, and its counters.

perflab_alloc.c (beside this file) is an LD_PRELOAD library that counts malloc, calloc,
realloc, free, the memalign family and C++ operator new/delete by log2 size class, per thread,
into a file on tmpfs that perflab creates (`create`) and reads (`read`) at the window's start
and end; the window's counts are the difference (`Counts.minus`). It forwards every call to
the next library, so the variant's allocator still does all the work.

It also samples allocations with their stacks: one in every `period` bytes on average, only
while `sample(path, period)` has switched it on (the window), into a ring of records.

Counter file format `perflab-alloc/1`, version word 2 (little-endian uint64 words): a 256-byte
header (magic "PLALLOC1", version, slots, ops, classes, slots_used, overflow_threads, pid,
sample_capacity, samples_used, samples_dropped, period, max_depth, owner, extra_copies,
foreign_processes, paused: nonzero while counting is paused (`pause`), reserved words), then
per slot calls[ops][classes] and bytes[ops][classes], then per sample op, size, depth,
pcs[max_depth]. Size class c holds sizes in [2^(c-1), 2^c). pid is the process that counts (the
first to count a call claims the file: `claim`); extra_copies counts copies of the library loaded
a second time into it, foreign_processes other processes that found the file (neither counts).

    >>> create(path); sample(path, 512 * 1024)      # before the server starts; window start
    >>> counts = read(path)                          # at the window's end
    >>> counts.calls["malloc"][12]                   # malloc calls of 2048..4095 bytes
    >>> sample(path, 0); records = samples(path)     # (op, size, weight, return addresses)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from perflab import allocators
from perflab.errors import PerflabError
from perflab import cbuild

SOURCE = Path(__file__).with_name("perflab_alloc.c")
OPS = ("malloc", "calloc", "realloc", "free", "memalign", "new", "delete")
CLASSES = 48
MAGIC = int.from_bytes(b"PLALLOC1", "little")
HEADER_BYTES = 256
VERSION = 2  # 2: the paused word, a 256-byte header
HEADER_WORDS = HEADER_BYTES // 8
SLOT_WORDS = 2 * len(OPS) * CLASSES
MAX_DEPTH = 48
SAMPLE_WORDS = 3 + MAX_DEPTH
DEFAULT_SLOTS = 2048  # threads with a slot of their own; more share slot 0 (atomic adds)
DEFAULT_SAMPLES = 65536  # records in the ring (27 MiB); more are counted as dropped
DEFAULT_PERIOD = 512 * 1024
_SLOTS_USED, _OVERFLOW, _PID, _CAPACITY, _SAMPLES_USED, _DROPPED, _PERIOD = 5, 6, 7, 8, 9, 10, 11
_EXTRA_COPIES, _FOREIGN, _PAUSED = 14, 15, 16


class AllocTracerError(PerflabError):
    """The allocation counter could not be built or read."""


def build(cache: Path) -> Path:
    """The shim compiled for this machine, cached by the hash of its source and compiler."""
    flags = ["-O2", "-g", "-fPIC", "-shared", "-fexceptions", "-Wall", f"-Wl,-soname,{allocators.TRACER_SONAME}"]
    return cbuild.compiled(
        SOURCE, cache, "perflab_alloc", ".so", flags, "the allocation counter", ["-ldl", "-lm"], AllocTracerError
    )


def create(path: Path, slots: int = DEFAULT_SLOTS, sample_capacity: int = DEFAULT_SAMPLES) -> None:
    """A counter file for `slots` threads and `sample_capacity` sampled stacks, sampling off."""
    with open(path, "wb") as f:
        f.write(header(slots, sample_capacity))
        f.truncate(file_bytes(slots, sample_capacity))


def header(slots: int = DEFAULT_SLOTS, sample_capacity: int = DEFAULT_SAMPLES) -> bytes:
    """A new counter file's header (the rest of the file is zeros)."""
    words = np.zeros(HEADER_WORDS, dtype="<u8")
    words[:5] = (MAGIC, VERSION, slots, len(OPS), CLASSES)
    words[_SLOTS_USED] = 1  # slot 0 is the one threads beyond the last share
    words[_CAPACITY] = sample_capacity
    words[12] = MAX_DEPTH
    return words.tobytes()


def file_bytes(slots: int = DEFAULT_SLOTS, sample_capacity: int = DEFAULT_SAMPLES) -> int:
    return HEADER_BYTES + (slots * SLOT_WORDS + sample_capacity * SAMPLE_WORDS) * 8


def _write_word(path: Path, word: int, value: int) -> None:
    """`value` into word `word` of the counter file, never through a link: the file is in the
    server's directory, which its account owns (it could plant a link to any file root writes)."""
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.pwrite(fd, int(value).to_bytes(8, "little"), word * 8)
    finally:
        os.close(fd)


def sample(path: Path, period: int) -> None:
    """Switch stack sampling on (one allocation per `period` bytes on average) or off (0)."""
    _write_word(path, _PERIOD, period)


def pause(path: Path, paused: bool) -> None:
    """Stop counting (calls are forwarded to the allocator, uncounted) or start again: lets
    bench/profile_overhead.py toggle the counter within one server run."""
    _write_word(path, _PAUSED, int(paused))


@dataclass(frozen=True)
class Claim:
    """Who counts into a counter file: `pid` (0 until a process counted its first call), and the
    copies and processes that found it taken and count nothing."""

    pid: int
    extra_copies: int
    foreign_processes: int


def claim(path: Path) -> Claim:
    return claim_of(_words(path, HEADER_WORDS))


def claim_of(words: np.ndarray) -> Claim:
    """The claim from a counter file's words (its header at least)."""
    return Claim(int(words[_PID]), int(words[_EXTRA_COPIES]), int(words[_FOREIGN]))


@dataclass
class Counts:
    """Calls and bytes per op and size class; `threads` that had a slot, `overflow` that shared one;
    `per_slot`: each slot's calls (every op); of a window's counts (minus), `started`: the threads that
    took their slot within it, and `started_calls` their calls."""

    calls: dict[str, list[int]] = field(default_factory=dict)
    bytes: dict[str, list[int]] = field(default_factory=dict)
    threads: int = 0
    overflow: int = 0
    per_slot: list[int] = field(default_factory=list)
    started: int = 0
    started_calls: int = 0

    def minus(self, before: Counts) -> Counts:
        first = before.threads + 1  # the slots after those in use at the window's start (slot 0 is shared)
        return Counts(
            {op: [a - b for a, b in zip(self.calls[op], before.calls[op], strict=True)] for op in OPS},
            {op: [a - b for a, b in zip(self.bytes[op], before.bytes[op], strict=True)] for op in OPS},
            self.threads,
            self.overflow,
            started=self.threads - before.threads,
            started_calls=sum(self.per_slot[first:]),
        )

    def total_calls(self, op: str) -> int:
        return sum(self.calls[op])

    def total_bytes(self, op: str) -> int:
        return sum(self.bytes[op])


def _words(path: Path, count: int = -1) -> np.ndarray:
    return checked(np.fromfile(path, dtype="<u8", count=count), str(path))


def checked(words: np.ndarray, where: str) -> np.ndarray:
    """`words` when they start with a perflab-alloc/1 header; AllocTracerError otherwise."""
    if (
        len(words) < HEADER_WORDS
        or words[0] != MAGIC
        or words[1] != VERSION
        or words[3] != len(OPS)
        or words[4] != CLASSES
    ):
        raise AllocTracerError(f"{where} is not a perflab-alloc/1 counter file", "was it written by another perflab?")
    return words


def read(path: Path) -> Counts:
    """Sum of every thread's slot (the header and the slots only: read at the window's start and
    end, it leaves the sample ring alone)."""
    slots = int(_words(path, HEADER_WORDS)[2])
    return counts_of(_words(path, HEADER_WORDS + slots * SLOT_WORDS))


def slots_used(words: np.ndarray) -> int:
    """Slots in use, from a counter file's header words."""
    return min(int(words[_SLOTS_USED]), int(words[2]))


def counts_of(words: np.ndarray) -> Counts:
    """The counts from a counter file's header and its first slots (at least those in use: the
    others are zeros): what a host sends of its counter file (AllocTracer on its place)."""
    present = (len(words) - HEADER_WORDS) // SLOT_WORDS
    used = min(slots_used(words), present)
    body = words[HEADER_WORDS : HEADER_WORDS + present * SLOT_WORDS].reshape(present, 2, len(OPS), CLASSES)
    total = body[:used].sum(axis=0, dtype=np.uint64)
    return Counts(
        {op: [int(x) for x in total[0, i]] for i, op in enumerate(OPS)},
        {op: [int(x) for x in total[1, i]] for i, op in enumerate(OPS)},
        threads=used - 1,
        overflow=int(words[_OVERFLOW]),
        per_slot=[int(x) for x in body[:used, 0].sum(axis=(1, 2), dtype=np.uint64)],
    )


@dataclass
class Sample:
    op: str
    size: int
    weight: float  # allocations this one stands for: 1 / P(sampled)
    pcs: list[int]  # return addresses, leaf first (the shim's own frames included)


def samples(path: Path, period: int) -> tuple[list[Sample], int]:
    """The sampled allocations (taken at `period`) and how many were dropped (ring full)."""
    words = _words(path)
    return samples_of(words[:HEADER_WORDS], words[ring_start(words) :], period)


def ring_start(words: np.ndarray) -> int:
    """The word where the sample ring starts, from a counter file's header."""
    return HEADER_WORDS + int(words[2]) * SLOT_WORDS


def ring_used(words: np.ndarray) -> int:
    """Records in the ring, from a counter file's header."""
    return min(int(words[_SAMPLES_USED]), int(words[_CAPACITY]))


def samples_of(header: np.ndarray, ring: np.ndarray, period: int) -> tuple[list[Sample], int]:
    """samples() from a counter file's header words and its ring's words (its used records at least)."""
    used = min(ring_used(header), len(ring) // SAMPLE_WORDS)
    records = ring[: used * SAMPLE_WORDS].reshape(used, SAMPLE_WORDS)
    out = []
    for op, size, depth, *pcs in records.tolist():
        if depth == 0:  # taken while being read: not finished
            continue
        weight = 1 / -math.expm1(-max(size, 1) / period)
        out.append(Sample(OPS[op], size, weight, pcs[:depth]))
    return out, int(header[_DROPPED])


def size_class_bounds(c: int) -> tuple[int, int]:
    """[low, high) bytes of size class c."""
    return (0, 1) if c == 0 else (1 << (c - 1), 1 << c)
