"""Latency under the interleaved design, from the requests that start and end within one turn.

sysbench's own latency would count the other servers' turns: a request in flight when its client
is stopped (SIGSTOP) ends only after them. So the interleaved design runs the test through
`workloads/turns.lua`, which times each event (CLOCK_MONOTONIC) and, after it, reads the time of
the client's last resume, which perflab writes just before every turn's SIGCONT
(`TurnClock.advance`). An event that started before that resume was stopped while it ran: it is
counted as "spanned", not in the histogram. The histogram has sysbench
1.0's buckets (1024, log-spaced from 0.001 ms to 100000 ms), so p50/p95/p99 are computed as the
sequential design's are (sysbench_output.histogram_percentile).

What it leaves out: at most one event per client thread per turn. Events near the turn's length
are the likeliest to span one, so a latency close to `slice` is undercounted; the cell records the
spanned share (`design.latency_spanned`) and the report can say so.

    clock = TurnClock.create(rundir / "turns", threads)   # before the client starts
    env = {**env, **clock.environment(test)}; argv = sysbench.argv(WRAPPER, ...)
    clock.advance(); resume(); ...; pause()
    hist = clock.read()                                    # at any time; cumulative
    (hist - before).summary()                              # min avg max p50 p95 p99, ms
"""

from __future__ import annotations

import math
import mmap
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from perflab.workloads.sysbench_output import histogram_percentile

WRAPPER = Path(__file__).with_name("turns.lua")
LAYOUT = 2  # shared[1]: the layout turns.lua writes
BUCKETS = 1024
HEADER = 16  # doubles before the first thread's part (turns.lua's layout)
STRIDE = BUCKETS + 2  # per thread: the counts, the sum of latencies (ms), the spanned events
_LOG_MIN = math.log(0.001)
_MULT = (BUCKETS - 1) / (math.log(100000) - _LOG_MIN)
VALUES = [round(math.exp(i / _MULT + _LOG_MIN), 3) for i in range(BUCKETS)]  # a bucket's latency, ms


@dataclass(frozen=True)
class Histogram:
    """Events that ran within one turn, by sysbench bucket; their latency sum; spanned events."""

    counts: tuple[float, ...]
    sum_ms: float
    spanned: float

    @property
    def events(self) -> int:
        return int(sum(self.counts))

    def __sub__(self, other: Histogram) -> Histogram:
        return Histogram(
            tuple(a - b for a, b in zip(self.counts, other.counts, strict=True)),
            self.sum_ms - other.sum_ms,
            self.spanned - other.spanned,
        )

    def percentile(self, pct: float) -> float | None:
        return histogram_percentile(self.rows(), pct)

    def rows(self) -> list[tuple[float, int]]:
        return [(VALUES[i], int(c)) for i, c in enumerate(self.counts) if c > 0]

    def summary(self) -> dict[str, float | None]:
        """min avg max p50 p95 p99 in ms, as sysbench's summary names them (min and max are
        bucket values: within 1.8% of the event's); all None without events."""
        rows = self.rows()
        n = self.events
        if not n:
            return dict.fromkeys(("min", "avg", "max", "p50", "p95", "p99"))
        return {
            "min": rows[0][0],
            "avg": round(self.sum_ms / n, 3),
            "max": rows[-1][0],
            "p50": histogram_percentile(rows, 50),
            "p95": histogram_percentile(rows, 95),
            "p99": histogram_percentile(rows, 99),
        }

    def spanned_share(self) -> float | None:
        total = self.events + self.spanned
        return round(self.spanned / total, 6) if total else None


class TurnClock:
    """The file a seat's client and perflab share (on the run directory's tmpfs)."""

    def __init__(self, path: Path, threads: int) -> None:
        self.path, self.threads = path, threads
        self.size = size_of(threads)
        self._fd = os.open(path, os.O_RDWR)
        self._map = mmap.mmap(self._fd, self.size)
        self.turn = 0

    @classmethod
    def create(cls, path: Path, threads: int) -> TurnClock:
        with path.open("wb") as f:
            f.truncate(size_of(threads))
        clock = cls(path, threads)
        struct.pack_into("<4d", clock._map, 8, LAYOUT, BUCKETS, STRIDE, 0)
        return clock

    def environment(self, test: str) -> dict[str, str]:
        """What turns.lua reads: the test it runs, the shared file and its size."""
        return {"PERFLAB_TEST": test, "PERFLAB_TURNS": str(self.path), "PERFLAB_TURNS_BYTES": str(self.size)}

    def advance(self) -> None:
        """A new turn: call it just before the client's SIGCONT (an event that started before
        the time written here was stopped while it ran)."""
        self.turn += 1
        struct.pack_into("<d", self._map, 4 * 8, float(self.turn))
        # time.monotonic() is CLOCK_MONOTONIC, the clock turns.lua times events with
        struct.pack_into("<d", self._map, 0, time.monotonic() * 1000.0)

    def read(self) -> Histogram:
        """The cumulative histogram of every thread, now."""
        values = struct.unpack_from(f"<{self.threads * STRIDE}d", self._map, HEADER * 8)
        parts = [values[t * STRIDE : (t + 1) * STRIDE] for t in range(self.threads)]
        total = tuple(map(sum, zip(*parts, strict=True)))  # every thread's counts, sum and spanned
        return Histogram(total[:BUCKETS], total[BUCKETS], total[BUCKETS + 1])

    def reported(self) -> tuple[float, float, float, float]:
        """sysbench's own reads, writes, other queries and events, summed over its reports so
        far (turns.lua's report hook): the run's queries per event."""
        return struct.unpack_from("<4d", self._map, 5 * 8)

    def close(self) -> None:
        self._map.close()
        os.close(self._fd)


def size_of(threads: int) -> int:
    """The shared file's bytes: the header and one part a thread (turns.lua's layout)."""
    return (HEADER + threads * STRIDE) * 8
