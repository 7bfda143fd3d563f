"""The machine's CPU over a window, from /proc/stat: busy and steal time in cores (what everything
else ran meanwhile, and what the hypervisor took), sampled once a second by `StealSampler`.
A process's own figures are a place's (perflab/places/procfs.py here, perflab/hosts/place.py there).

    with StealSampler() as steal: run_workload()
    steal.cores(start_s, end_s) -> 0.03
"""

from __future__ import annotations

import threading
import time
from typing import Self

from perflab.places.procfs import CLOCK_TICKS


def _all_cpus() -> list[int]:
    """/proc/stat's first line: the ticks of all CPUs since boot (user nice system idle iowait
    irq softirq steal ...)."""
    with open("/proc/stat", encoding="ascii") as f:
        return [int(x) for x in f.readline().split()[1:]]


def machine_busy_s() -> float:
    """CPU time all CPUs spent busy since boot (user, nice, system, irq, softirq), /proc/stat."""
    fields = _all_cpus()
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / CLOCK_TICKS


def machine_steal_s() -> float:
    """CPU time the hypervisor gave other guests while this VM's CPUs wanted to run (steal,
    /proc/stat; 0 on bare metal), summed over all CPUs, since boot. On this project's 2-vCPU VM
    it was 0.14 cores on average under load, and explained half of a 1 s turn's QPS variance
    (r = -0.74; docs/lab-notes/2026-11-26-turn-noise-and-steal.md)."""
    fields = _all_cpus()
    return fields[7] / CLOCK_TICKS if len(fields) > 7 else 0.0


class StealSampler:
    """The machine's steal time every `interval` seconds in a thread, to tell how much of this
    VM's CPU the host gave its other guests over any span of the run (a stall's seconds): a
    stall the host caused shows as steal of a good part of the vCPUs, one of the server's or the
    client's does not.

        with StealSampler() as steal:
            run()
        steal.cores(a, b)   # cores of steal over [a, b] (CLOCK_MONOTONIC), None if not covered
    """

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.samples: list[tuple[float, float]] = []  # (CLOCK_MONOTONIC s, steal s since boot)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="steal-sampler", daemon=True)

    def _sample(self) -> None:
        self.samples.append((time.monotonic(), machine_steal_s()))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> Self:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def cores(self, start: float, end: float) -> float | None:
        """Steal over [start, end] in cores, between the samples that bracket it (at most
        `interval` wider on each side); None when the samples do not cover it."""
        before = [s for s in self.samples if s[0] <= start]
        after = [s for s in self.samples if s[0] >= end]
        if not before or not after or after[0][0] <= before[-1][0]:
            return None
        (t0, s0), (t1, s1) = before[-1], after[0]
        return round(max(0.0, s1 - s0) / (t1 - t0), 3)

