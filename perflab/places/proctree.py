"""A process tree's accounting: a server of many processes (PostgreSQL's postmaster and its
backends) counted as one.

CPU, page faults and context switches of the server over a window are those of every process
of the tree: the live ones (each its own /proc/PID/stat and status) plus those that exited,
which their parent reaped and the kernel added to its cumulative children's counters
(/proc/PID/stat cutime, cstime, cminflt, cmajflt). So a process alive at both ends counts its
difference, one that exited in the window counts its final use less what it had at the start,
one born and gone inside counts all of it. Context switches of exited processes are not
counted: the kernel keeps no children's sum of them.

Memory: PSS summed over the tree (smaps_rollup). RSS would count shared memory once per
process; PSS divides each shared page among the processes that map it, so the sum is the
memory the server really holds.

    counters = tree_counters(root_pid)          # a ProcCounters of the whole tree
    with TreeSampler(root_pid) as memory: ...   # memory.pss_end, memory.end (RSS sum)
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from perflab.places.procfs import CLOCK_TICKS, ProcCounters, RssSampler, rss_bytes


def children(pid: int) -> list[int]:
    """The direct children of `pid` (every backend is the postmaster's)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="ascii")
    except OSError:
        return []
    return [int(x) for x in text.split()]


def tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo += children(current)
    return out


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(")", 1)[1].split()


def tree_counters(pid: int, threads: bool = True) -> ProcCounters:
    """The counters of every live process of the tree, plus the children the tree has reaped
    (`threads=False`: no context switches, which read every thread's status file)."""
    total = ProcCounters(0.0, 0.0, 0, 0, 0, 0)
    for member in tree(pid):
        try:
            own = ProcCounters.read(member, threads)
            fields = _stat(member)
        except (FileNotFoundError, ProcessLookupError):  # ended while we looked
            continue
        reaped = ProcCounters(
            int(fields[13]) / CLOCK_TICKS, int(fields[14]) / CLOCK_TICKS, int(fields[8]), int(fields[10]), 0, 0
        )
        total = total.plus(own).plus(reaped)
    return total


def pss_bytes(pids: list[int]) -> int | None:
    """PSS summed over `pids` (smaps_rollup); None if none could be read."""
    total, seen = 0, False
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        seen = True
                        break
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total if seen else None


PSS_BUDGET = 0.002  # of one core: the tree's PSS reads may take at most this share of perflab's time


class TreeSampler(RssSampler):
    """RSS summed over the tree once a second (the series), and PSS summed beside it, within a
    budget: smaps_rollup walks each process's page tables, some 6 ms of CPU a read for a postmaster,
    its auxiliaries and 2 backends here, and more with every backend (every one maps the shared
    buffers). Read each second, it was 0.6% of a core of perflab's 1.0% over a PostgreSQL window;
    so a read follows the last one after `its CPU time / PSS_BUDGET` seconds (a second at least):
    every 3 s at 6 ms. The window's end mark always reads it (`sample(pss=True)`: pss_end is the
    end's), and pss_peak is the largest of the reads. No sample is taken after the window: the
    workload's backends may have gone by then."""

    def __init__(self, pid: int, interval: float = 1.0) -> None:
        super().__init__(pid, interval)
        self.pss: list[int] = []
        self._lock = threading.Lock()
        self._next_pss = 0.0  # time.monotonic() from which the next PSS read is due
        self._mark: int | None = None  # the end mark's PSS (a loop's read may finish after it)

    def sample(self, pss: bool = True) -> None:
        """One reading of RSS summed over the tree, and of PSS with `pss` (the window's end mark)
        or when the budget allows it."""
        members = tree(self.pid)
        rss = [v for v in (rss_bytes(p) for p in members) if v is not None]
        found = None
        if pss or time.monotonic() >= self._next_pss:
            cpu = time.thread_time()
            found = pss_bytes(members)
            cost = time.thread_time() - cpu
            self._next_pss = time.monotonic() + max(self.interval, cost / PSS_BUDGET) - self.interval / 2  # at a tick
        with self._lock:
            if rss:
                self.samples.append((round(time.monotonic() - self._start, 3), sum(rss)))
            if found is not None:
                self.pss.append(found)
                if pss:
                    self._mark = found

    def _loop(self) -> None:
        while True:
            self.sample(pss=False)
            if self._stop.wait(self.interval):
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def pss_end(self) -> int | None:
        return self._mark if self._mark is not None else self.pss[-1] if self.pss else None

    @property
    def pss_peak(self) -> int | None:
        return max(self.pss, default=None)
