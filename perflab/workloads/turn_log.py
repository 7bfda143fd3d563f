"""pgbench's counts per turn, from its per-transaction log (the interleaved design).

pgbench keeps no counter another process can read while it runs, and PostgreSQL's statistics
reach pg_stat_database at most once a second. Its per-transaction log does hold every
transaction: its latency and the epoch time it ended (workloads/pgbench.py). So a seat
records the wall time of every sample and the span of every turn (from just before its SIGCONT
to just after its SIGSTOP; the first from the client's launch), and once the window has ended,
pgbench is ended the way its -T ends it (SIGALRM: each client finishes its transaction, the
logs are flushed; `Pgbench.seat_end`). From the log then:
- at every sample, the transactions that had ended by then (`Com_commit`; `Questions` is that
  times the script's statements): the points the server's counters give on MariaDB, so a
  seat's intervals and summary are computed alike (run/turn_series.py);
- at every sample, the latency histogram of the transactions that started and ended within one
  turn (start = end - latency), in sysbench's buckets as turns.lua's are; the others spanned a
  pause, are counted as "spanned" and left out, as under sysbench (workloads/turn_latency.py).
A transaction whose result arrived while its client was stopped is logged when pgbench reads
it, after the next SIGCONT: it counts in that turn, as sysbench's events do. Failed
transactions (after their tries) are not counted.

    counts = LogCounts(rundir / "pgbench_log", statements=1, spans=seat.spans)
    counts.start_clock(); counts.sample() ...; Pgbench.seat_end(seat); counts.finish()
    counts.latency   # one cumulative Histogram per sample
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

import numpy as np

from perflab.errors import WorkloadError
from perflab.workloads.turn_latency import _LOG_MIN, _MULT, BUCKETS, Histogram


class LogCounts:
    """A seat's counters from its client's transaction log (the StatusSampler interface)."""

    statements = selects = 0  # it makes no statements of its own
    pid = None  # and runs no process of its own
    gauges: frozenset[str] = frozenset()

    def __init__(
        self, prefix: Path, statements: int, spans: list[list[float]], fetched: Callable[[], float] | None = None
    ) -> None:
        self.prefix, self.per_txn = prefix, statements
        # the log made complete here once the client has ended; the shift from this machine's epochs
        # to those of the clock that stamped it (a client host's; 0 here)
        self.fetched = fetched
        self.spans = spans  # the seat's turns: [resume epoch, pause epoch (inf while it runs)]
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.latency: list[Histogram] = []  # filled by finish(): one per sample
        self._at: list[float] = []  # the epoch time of each sample
        self._start = time.monotonic()

    def start_clock(self) -> None:
        self._start = time.monotonic()

    def sample(self) -> None:
        """The time now: the transactions ended by then are counted once the log is complete."""
        self._at.append(time.time())
        self.samples.append((round(time.monotonic() - self._start, 3), {"Com_commit": 0.0, "Questions": 0.0}))

    def finish(self) -> dict[str, Any]:
        """The counts and latency at every sample, from the log (the client has ended)."""
        from perflab.workloads.pgbench_log import load_log

        shift = self.fetched() if self.fetched is not None else 0.0
        log = load_log(self.prefix)
        ok = log[log[:, 0] >= 0]
        if not len(ok):
            raise WorkloadError(
                "pgbench logged no transaction", f"its per-transaction log {self.prefix}.* is empty or missing"
            )
        ok = ok[np.argsort(ok[:, 1], kind="stable")]
        ends = ok[:, 1]
        done = np.searchsorted(ends, np.array(self._at) - shift, side="right")  # transactions ended by each sample
        for (_, values), n in zip(self.samples, done, strict=True):
            values["Com_commit"] = float(n)
            values["Questions"] = float(n * self.per_txn)
        spans = [[a - shift, b - shift] for a, b in self.spans]  # on the log's clock (inf stays inf)
        self.latency = histograms(ok[:, 0] / 1000.0, within_turn(ends, ok[:, 0] / 1e6, spans), done)
        return {
            "source": "client log",
            "queries_per_event": float(self.per_txn),
            "failed": int((log[:, 0] == -1).sum()),
        }

    def abort(self) -> None:
        """Nothing to kill: no process of its own."""

    def close(self) -> None:
        """Nothing held open."""


def within_turn(ends: np.ndarray, latency_s: np.ndarray, spans: list[list[float]]) -> np.ndarray:
    """True for each transaction that started and ended inside one turn's span."""
    if not spans:
        return np.zeros(len(ends), dtype=bool)
    starts = np.array([s[0] for s in spans])
    stops = np.array([s[1] if s[1] != math.inf else np.inf for s in spans])
    turn = np.searchsorted(starts, ends, side="right") - 1  # the last turn begun before its end
    valid = turn >= 0
    index = np.clip(turn, 0, len(spans) - 1)
    return valid & (ends <= stops[index]) & (ends - latency_s >= starts[index])


def histograms(lat_ms: np.ndarray, inside: np.ndarray, done: np.ndarray) -> list[Histogram]:
    """The cumulative histogram at each sample: the transactions ended by it (`done`: how many
    of them, the arrays sorted by end), in-turn ones by bucket, the others as spanned."""
    bucket = np.clip(np.floor((np.log(np.maximum(lat_ms, 1e-9)) - _LOG_MIN) * _MULT + 0.5), 0, BUCKETS - 1)
    bucket = bucket.astype(np.int64)
    out = []
    counts = np.zeros(BUCKETS)
    sum_ms = spanned = 0.0
    last = 0
    for n in done:
        part = slice(last, int(n))
        mine = inside[part]
        counts = counts + np.bincount(bucket[part][mine], minlength=BUCKETS)
        sum_ms += float(lat_ms[part][mine].sum())
        spanned += float((~mine).sum())
        out.append(Histogram(tuple(counts.tolist()), sum_ms, spanned))
        last = max(last, int(n))
    return out
