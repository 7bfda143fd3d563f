"""The phases a cell's profiles are cut into, on one clock: CLOCK_MONOTONIC seconds
(`time.monotonic()`, `perf record -k CLOCK_MONOTONIC`, the pmp sampler's header).

  measured  the measured window (the span the cell's figures cover)
  warmup    from the client's start of work (sysbench's "Threads started!", pgbench's clients
            connected: the workload's start_watch) to the window
  stall     the seconds of the cell's detected stalls (analyze/steady.py), warm-up or window
  connect   from sysbench's process start until its threads have all connected (seconds at
            1024 threads: its threads wait in sb_barrier_wait meanwhile, which would otherwise
            dominate the warm-up's wall-clock stacks)

Phases overlap: a stall inside the window is in "measured" too, so the window's profile stays
the one the cell's figures describe. sysbench's per-second reports (and so its stalls) count
from when its threads started, after they all connected (2-3 s at 1024 threads on 2 vCPUs),
not from its process start: `workload` is that moment (workloads/client.StartWatch).

    spans = Spans(workload=100.0, window=110.0, end=130.0, stalls=[(102.0, 105.0)], started=99.0)
    spans.phases_at(103.0)       -> ("warmup", "stall")
    spans.phases_at(99.5)        -> ("connect",)
    spans.seconds("stall", (101.5, 131.0)) -> 3.0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MEASURED, WARMUP, STALL, CONNECT = "measured", "warmup", "stall", "connect"
PHASES = (MEASURED, WARMUP, STALL, CONNECT)
Range = tuple[float, float]


@dataclass
class Spans:
    workload: float  # sysbench's t = 0 (its threads started)
    window: float  # the measured window's start
    end: float  # the workload's end
    stalls: list[Range] = field(default_factory=list)
    tps: list[tuple[float, float]] = field(default_factory=list)  # (t since workload start, tps) per second
    window_transactions: float = 0.0  # sysbench's count over the window
    started: float = 0.0  # when perflab started the client (workload - started: connecting its threads)

    @classmethod
    def of_cell(
        cls,
        started: float,
        origin: float,
        end: float,
        window_start_s: float,
        stalls: list[dict[str, Any]],
        intervals: list[dict[str, Any]],
        window_transactions: float,
    ) -> Spans:
        """From a cell's run (CLOCK_MONOTONIC: process start, threads started, end), its stalls and
        intervals (seconds since its threads started) and its window's transactions."""
        return cls(
            workload=origin,
            window=origin + window_start_s,
            end=end,
            stalls=[(origin + s["start_s"], origin + s["end_s"]) for s in stalls],
            tps=[(iv["t"], iv.get("tps") or 0.0) for iv in intervals],
            window_transactions=window_transactions,
            started=started,
        )

    def ranges(self, phase: str) -> list[Range]:
        if phase == MEASURED:
            return [(self.window, self.end)]
        if phase == WARMUP:
            return [(self.workload, self.window)] if self.window > self.workload else []
        if phase == CONNECT:
            return [(self.started, self.workload)] if self.started and self.workload > self.started else []
        return list(self.stalls)

    def phases_at(self, t: float) -> tuple[str, ...]:
        found = tuple(p for p in PHASES if any(a <= t < b for a, b in self.ranges(p)))
        return found

    def covered(self, phase: str, span: Range) -> list[Range]:
        """The parts of `phase` a profiler that ran over `span` saw."""
        out = [(max(a, span[0]), min(b, span[1])) for a, b in self.ranges(phase)]
        return [(a, b) for a, b in out if b > a]

    def seconds(self, phase: str, span: Range) -> float:
        return sum(b - a for a, b in self.covered(phase, span))

    def start(self, phase: str, span: Range) -> float:
        """Where the profile of `phase` begins (its timed rows count from here)."""
        parts = self.covered(phase, span)
        return parts[0][0] if parts else span[0]

    def transactions(self, phase: str, span: Range) -> float:
        """The transactions of the seen part of `phase`: the window's count scaled by the share
        seen, or (warm-up, stalls) sysbench's per-second rates over the seconds seen."""
        if phase == MEASURED:
            whole = self.end - self.window
            return self.window_transactions * min(1.0, self.seconds(phase, span) / whole) if whole > 0 else 0.0
        total = 0.0
        for a, b in self.covered(phase, span):
            for t, tps in self.tps:
                lo, hi = max(a, self.workload + t - 1), min(b, self.workload + t)
                total += tps * max(0.0, hi - lo)
        return total
