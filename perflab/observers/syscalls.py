"""The allocator's own system calls over the measured window, with their sizes.

glibc calls mmap, munmap, mprotect, madvise and brk from inside malloc, where no preload sees
them (its internal calls do not go through the PLT); the kernel's syscall tracepoints see every
one. `perf record` of those tracepoints, system-wide and enabled for the window only through
its control FIFO (as PerfRecorder, whose machinery this reuses: `-p PID` would not follow the
threads the server starts for new connections), then `perf script --pid` keeps the server's.
Tracepoints are counted, not sampled: every call is one record. kprobes do not work in this
VM; tracepoints do.

`perf script -F event,trace` prints one line per call:
    syscalls:sys_enter_munmap: addr: 0x7f0e2c000000, len: 0x02001000
    syscalls:sys_enter_mmap: addr: 0x00000000, len: 0x02001000, prot: 0x00000003, flags: ...
    syscalls:sys_enter_madvise: start: 0x7f0e2c000000, len_in: 0x00010000, behavior: 0x00000004
    syscalls:sys_enter_brk: brk: 0x55d1c6a4e000

    with SyscallRecorder(pid, workdir) as rec:
        run_window()
    counts = rec.counts()      # SyscallCounts: calls and bytes per syscall and log2 size class
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from perflab.observers.perf import PerfRecorder
from perflab.places import Place
from perflab.places.here import HERE

SYSCALLS = ("mmap", "munmap", "mprotect", "madvise", "brk")
CLASSES = 48
_LINE = re.compile(r"syscalls:sys_enter_(\w+):(.*)")
_LEN = re.compile(r"\blen(?:_in)?: (0x[0-9a-fA-F]+)")  # madvise names it len_in


@dataclass
class SyscallCounts:
    """Calls and bytes (the `len` argument; brk has none) per syscall, and by log2 size class."""

    calls: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SYSCALLS, 0))
    bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SYSCALLS, 0))
    by_class: dict[str, list[int]] = field(default_factory=lambda: {s: [0] * CLASSES for s in SYSCALLS})
    lost_chunks: int = 0  # runs of events perf lost (its buffer full): the counts are then too low

    def add(self, name: str, length: int) -> None:
        self.calls[name] += 1
        self.bytes[name] += length
        self.by_class[name][min(length.bit_length(), CLASSES - 1)] += 1


def events() -> list[str]:
    """perf record's options for the allocator's syscall tracepoints (here, and on a server host)."""
    return ["-e", ",".join(f"syscalls:sys_enter_{name}" for name in SYSCALLS)]


def parse(lines: Iterable[str]) -> SyscallCounts:
    """Counts from `perf script -F event,trace` output."""
    counts = SyscallCounts()
    for line in lines:
        match = _LINE.search(line)
        if match is None or match.group(1) not in counts.calls:
            continue
        size = _LEN.search(match.group(2))
        counts.add(match.group(1), int(size.group(1), 16) if size else 0)
    return counts


class SyscallRecorder(PerfRecorder):
    """`perf record` of the allocator's syscall tracepoints, system-wide, enabled for the window only,
    here or on a server's host (`place`: PerfRecorder's)."""

    def __init__(self, pid: int, workdir: Path | str, *, enabled: bool = True, tree: bool = False, place: Place = HERE) -> None:
        # a directory of its own: PerfRecorder's FIFOs and log are named after the pid only
        super().__init__(pid, Path(workdir) / "syscalls", enabled=enabled, place=place)
        self.tree = tree  # the calls of `pid`'s process tree (a postmaster's backends), not its own only

    def events(self) -> list[str]:
        return events()

    def counts(self) -> SyscallCounts:
        """The window's calls; PerflabError when the recording does not cover it, and
        `lost_chunks` when perf lost some of its events."""
        pids = self._pids(self.descendants() if self.tree else None)
        script = self._perf(["perf", "script", "-i", str(self.data), "--pid", pids, "-F", "event,trace"], "script")
        counts = parse(script.splitlines())
        counts.lost_chunks = self.lost
        return counts
