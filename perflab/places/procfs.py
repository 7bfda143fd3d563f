"""A process here, read from this machine's /proc: its CPU ticks, page faults and context switches
(summed over its threads), and its resident memory sampled once a second in a thread that sleeps in
between (one small file read a second). The difference of two reads is a window's use; a client that
has exited is read from its rusage instead (`ProcCounters.of_rusage`). A host over SSH reads the same
figures there (perflab/hosts/place.py); both are reached through a place (perflab/places/).

    before = ProcCounters.read(pid); ...; used = ProcCounters.read(pid).minus(before)
    with RssSampler(pid) as rss: run_workload()      # rss.samples -> [(0.0, 123456789), (1.0, ...)]
"""

from __future__ import annotations

import os
import resource
import threading
import time
from dataclasses import astuple, dataclass
from typing import Self

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcCounters:
    user_s: float
    sys_s: float
    minor_faults: int
    major_faults: int
    voluntary_ctx: int
    involuntary_ctx: int

    @classmethod
    def read(cls, pid: int, threads: bool = True) -> ProcCounters:
        """The process's counters now. `threads=False` reads /proc/PID/stat alone and leaves the
        context switches 0: the switches are summed over every thread's status file, and reading
        those after every 100 ms turn of an interleaved run made a server's per-second QPS vary
        13-21% instead of 1-4% (docs/methodology.md#nothing-read-between-turns)."""
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            # the command name may contain spaces: fields start after the last ')'
            fields = f.read().rsplit(")", 1)[1].split()
        vol = invol = 0
        for tid in os.listdir(f"/proc/{pid}/task") if threads else ():
            try:
                with open(f"/proc/{pid}/task/{tid}/status", encoding="ascii") as status:
                    for line in status:
                        if line.startswith("voluntary_ctxt_switches:"):
                            vol += int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches:"):
                            invol += int(line.split()[1])
            except (FileNotFoundError, ProcessLookupError):  # the thread ended while we looked (ESRCH: mid-read)
                continue
        # /proc/PID/stat fields (man 5 proc), counted from field 3 (state) at index 0
        return cls(
            user_s=int(fields[11]) / CLOCK_TICKS,
            sys_s=int(fields[12]) / CLOCK_TICKS,
            minor_faults=int(fields[7]),
            major_faults=int(fields[9]),
            voluntary_ctx=vol,
            involuntary_ctx=invol,
        )

    @classmethod
    def of_rusage(cls, usage: resource.struct_rusage) -> ProcCounters:
        """The same counters of a reaped child, from its rusage (every thread it ever had)."""
        return cls(usage.ru_utime, usage.ru_stime, usage.ru_minflt, usage.ru_majflt, usage.ru_nvcsw, usage.ru_nivcsw)

    @property
    def cpu_s(self) -> float:
        """User plus system CPU seconds."""
        return self.user_s + self.sys_s

    def minus(self, before: ProcCounters) -> ProcCounters:
        return ProcCounters(*(a - b for a, b in zip(astuple(self), astuple(before), strict=True)))

    def plus(self, other: ProcCounters) -> ProcCounters:
        return ProcCounters(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def scaled(self, factor: float) -> ProcCounters:
        """These counters times `factor` (a sampled rate over a longer time; counts rounded)."""
        counts = (round(v * factor) for v in astuple(self)[2:])
        return ProcCounters(self.user_s * factor, self.sys_s * factor, *counts)

    @classmethod
    def zero(cls) -> ProcCounters:
        return cls(0.0, 0.0, 0, 0, 0, 0)


def rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return pages * PAGE_SIZE or None  # 0: a zombie (a client that has ended, not yet reaped)


class RssSampler:
    """Samples the resident set size of `pid` every `interval` seconds in a thread."""

    def __init__(self, pid: int, interval: float = 1.0) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self._start = 0.0

    def _loop(self) -> None:
        while True:
            value = rss_bytes(self.pid)
            if value is not None:
                self.samples.append((round(time.monotonic() - self._start, 3), value))
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> Self:
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        value = rss_bytes(self.pid)  # the end of the window, exactly
        if value is not None:
            self.samples.append((round(time.monotonic() - self._start, 3), value))

    @property
    def end(self) -> int | None:
        return self.samples[-1][1] if self.samples else None

    @property
    def peak(self) -> int | None:
        return max((v for _, v in self.samples), default=None)


def process_cpu_s(pid: int) -> float | None:
    """user + system CPU of a process (a zombie's too); None when it is gone. Not 0: a
    process's CPU is cumulative, so a 0 taken for one that was reaped would subtract all it
    had used from a window's accounting and show up as CPU of other processes."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
