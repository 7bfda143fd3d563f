"""The seconds this machine ran nothing of ours while a test ran, measured by the test itself.

Why: this VM can stand still for seconds. A pause of the guest stops everything (CLOCK_MONOTONIC
jumps when it resumes); and under perflab's heaviest observers (perf and pmp on the server and
the client) this 2-vCPU VM's scheduler has been seen to run no ordinary process of ours for 2-6 s
(2026-11-27: a pinned sleeper on each CPU 1.9-6.2 s late in the client-profiles run, while
sysbench and mariadbd ran on and a SCHED_FIFO watcher was never more than 5 ms late). Either way
a figure perflab times across those seconds holds them (an interleaved turn that "ran" 2 s
instead of 0.1, a window that began late because the warm-up's sleep woke late), and a sampler
misses its samples in them (the host-speed canary, the status sampler, pmp). A test of such a
figure allows for exactly the seconds measured here, and for nothing else: with none, its bounds
are what they were.

How: one ordinary thread pinned to each CPU the test may use sleeps TICK s at a time; a wake-up
more than SLACK late means that CPU ran nothing of ours meanwhile (a busy machine otherwise
delays a sleeper by milliseconds). A pause is kept as a span of epoch seconds, so it can be placed
in a cell's span (its started_at and ended_at, whole UTC seconds): an upper bound of what the
cell's window lost.

    with Freezes() as freezes:
        done = perflab("run", ...)
    freezes.lost()                 # seconds lost over the whole run: 0.0, or 2.1 after a pause
    freezes.in_cell(cell)          # the seconds of them within a cell's span
    lost = sleep_running(0.3)      # 0.3 s of running time, any pause added on; the seconds added
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from typing import Any, Self

TICK = 0.02  # seconds each watcher sleeps
SLACK = 0.2  # a wake-up later than this is a pause of its CPU


def _epoch(moment: float | str) -> float:
    return moment if isinstance(moment, float | int) else dt.datetime.fromisoformat(moment).timestamp()


class Freezes:
    """Pauses of this machine's CPUs while the context is open, as (start, end) epoch seconds."""

    def __init__(self, cpus: list[int] | None = None, tick: float = TICK, slack: float = SLACK) -> None:
        self.cpus = sorted(os.sched_getaffinity(0)) if cpus is None else cpus
        self.tick, self.slack = tick, slack
        self.pauses: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch, args=(cpu,), name=f"freezes-cpu{cpu}", daemon=True)
                         for cpu in self.cpus]  # fmt: skip

    def _watch(self, cpu: int) -> None:
        os.sched_setaffinity(0, {cpu})  # this thread's alone (Linux: 0 is the calling thread)
        before = time.monotonic()
        while not self._stop.wait(self.tick):
            now = time.monotonic()
            late = now - before - self.tick
            if late > self.slack:
                wall = time.time()
                with self._lock:
                    self.pauses.append((wall - late, wall))
            before = now

    def __enter__(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def lost(self, since: float | str | None = None, until: float | str | None = None) -> float:
        """Seconds in which some CPU stood still (the pauses of all CPUs merged), within [since,
        until] (epoch seconds or ISO 8601 moments; None: open)."""
        low = -float("inf") if since is None else _epoch(since)
        high = float("inf") if until is None else _epoch(until)
        with self._lock:
            spans = sorted((max(a, low), min(b, high)) for a, b in self.pauses)
        total, reach = 0.0, -float("inf")
        for a, b in spans:
            a = max(a, reach)  # what an earlier pause (of another CPU) already counted
            if b > a:
                total += b - a
                reach = b
        return round(total, 3)

    def in_cell(self, cell: dict[str, Any]) -> float:
        """The seconds lost within a stored cell's span: its started_at and ended_at are whole
        seconds (truncated), so the span taken reaches to the second after its end."""
        return self.lost(cell["started_at"], _epoch(cell["ended_at"]) + 1.0)


def sleep_running(seconds: float, tick: float = TICK, slack: float = SLACK) -> float:
    """Sleep until `seconds` of this machine's running time have passed: a tick that came back
    more than `slack` late was a pause, and the time it lost is slept again. Returns the seconds
    lost (0.0 without a pause)."""
    lost, left = 0.0, seconds
    before = time.monotonic()
    while left > 0:
        step = min(tick, left)
        time.sleep(step)
        now = time.monotonic()
        late = now - before - step
        if late > slack:
            lost += late
            left -= step  # the tick's own part ran
        else:
            left -= now - before
        before = now
    return round(lost, 3)
