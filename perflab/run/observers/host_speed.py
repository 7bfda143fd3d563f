"""[observe] host_speed: how fast the VM's vCPUs ran during a cell's window, from a canary.

Why: on the 2-vCPU VM perflab is developed on, the same cell's QPS varies 9% between server
restarts and drifts 7% over a session on an idle guest, and a register-only spin loop, timed
in its own thread CPU time, varies 2-4x over minutes: the vCPU itself runs slower at times (the
host's other tenants, its clock), which no counter inside the guest shows (steal was 0.3%).
Across cells, log QPS follows the canary's log speed (r = 0.88, slope 0.70 on
oltp_read_only; bench/host_speed.py). analyze/host_speed.py uses the figure as a covariate
of the verdicts; docs/methodology.md#host-speed has the measurements.

What: host_speed.c (beside this file), compiled once per machine, spins about 1 ms of fixed
work every PERIOD_MS (0.5% of one vCPU) and prints the CPU time the work took. Preemption
stops a thread's CPU clock, so a busy guest does not change it. The cell's field:

    {"work_ns": 812000.0,        # the window's median CPU ns for the fixed work (lower: faster)
     "samples": 50, "period_ms": 200,
     "spread": 0.07,             # (p90 - p10) / median of the window's samples
     "seconds": [[0, 805000.0], [1, 820000.0], ...]}   # per second since the window's start: the median

    with HostSpeed(cache, log) as canary:     # started before the workload
        ...                                   # warm-up, window
    canary.fields(window_start, window_end)   # CLOCK_MONOTONIC seconds (time.monotonic())
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import IO, Any

from perflab.errors import PerflabError
from perflab.run import cbuild
from perflab.run.proc import Child, clean_env

SOURCE = Path(__file__).with_name("host_speed.c")
PERIOD_MS = 200
MIN_SAMPLES = 5  # fewer in a window: no figure (a 1 s window has 5)


class HostSpeedError(PerflabError):
    """The canary could not be built or did not report."""


def build(cache: Path) -> Path:
    return cbuild.compiled(SOURCE, cache, "perflab-canary", "", ["-O2", "-Wall"], "the host-speed canary",
                           error=HostSpeedError)  # fmt: skip


def parse(text: str) -> list[tuple[float, float]]:
    """(monotonic seconds, work ns) per complete line; a partial last line is left out."""
    out = []
    for line in text.splitlines(keepends=True):
        parts = line.split()
        if not line.endswith("\n") or len(parts) != 2:
            continue
        try:
            at, work = float(parts[0]), float(parts[1])
        except ValueError:
            continue
        if work > 0:
            out.append((at, work))
    return out


def window_fields(samples: list[tuple[float, float]], start: float, end: float) -> dict[str, Any]:
    """The cell's `host_speed` from the canary's samples inside [start, end]."""
    inside = [(at - start, work) for at, work in samples if start <= at <= end]
    works = sorted(work for _, work in inside)
    fields: dict[str, Any] = {"work_ns": None, "samples": len(works), "period_ms": PERIOD_MS, "spread": None,
                              "seconds": []}  # fmt: skip
    if len(works) < MIN_SAMPLES:
        return fields
    median = statistics.median(works)
    deciles = statistics.quantiles(works, n=10)
    by_second: dict[int, list[float]] = {}
    for t, work in inside:
        by_second.setdefault(math.floor(t), []).append(work)
    fields.update(
        work_ns=round(median, 1),
        spread=round((deciles[-1] - deciles[0]) / median, 4),
        seconds=[[s, round(statistics.median(w), 1)] for s, w in sorted(by_second.items())],
    )
    return fields


class HostSpeed:
    """The canary as a child process for one cell, its samples in `log`."""

    def __init__(self, cache: Path, log: Path, period_ms: int = PERIOD_MS) -> None:
        self.binary = build(cache)
        self.log = log
        self.period_ms = period_ms
        self._out: IO[str] | None = None
        self._child: Child | None = None
        self._stopped = False

    def __enter__(self) -> HostSpeed:
        self._out = self.log.open("w", encoding="ascii")
        try:
            self._child = Child([str(self.binary), str(self.period_ms)], env=clean_env(), stdout=self._out,
                                stderr=self._out)  # fmt: skip
        except BaseException:
            self._out.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._child is not None:
            self._stopped = True
            self._child.kill()
        if self._out is not None:
            self._out.close()

    def fields(self, start: float, end: float) -> dict[str, Any]:
        """The window's figure (after the canary stopped, or while it runs); HostSpeedError if it
        died on its own (its output says why)."""
        text = self.log.read_text(encoding="ascii", errors="replace")
        if self._child is not None and not self._stopped and self._child.poll() is not None:
            tail = text.strip().splitlines()[-1:] or ["no output"]
            raise HostSpeedError(f"the host-speed canary exited with code {self._child.poll()}: {tail[0]}",
                                 f"see {self.log}; or set host_speed = false under [observe]")  # fmt: skip
        return window_fields(parse(text), start, end)
