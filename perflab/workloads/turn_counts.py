"""Throughput per turn counted by the client, for a server without statement counters read per
turn (PostgreSQL: its statistics reach pg_stat_database at most once a second per backend).

The interleaved design samples a seat's counters at every turn that ends a second of its running
time (run/interleave.py). On MariaDB those are the server's own (`SHOW GLOBAL STATUS`). Here they
come from the client's wrapper, turns.lua (workloads/turn_latency.py), which counts every event each
client thread finished, in the histogram and apart from it ("spanned"): the transactions, exact at
any moment. Queries are events times the run's queries per event, which sysbench's own per-second
reports give (reads, writes and other, summed by turns.lua's report hook; a report loses no count
while its client is stopped). A test whose every event makes the same statements (every sysbench
OLTP test at fixed options) gets its queries per event to within the events in flight at the last
report (their queries are counted, the events not yet: 16.0004 for oltp_read_only's 16 over 3 s);
one whose events vary gets their mean.

The samples carry the names the statement counters have (`Com_commit` the events, `Questions`,
`Com_select` the reads, `Com_insert` the writes), so a seat's intervals and summary are computed alike; `finish()` sets the
query counts from the ratio over the whole run, once its reports are in.

    counts = ClientCounts(clock)       # the seat's TurnClock
    counts.start_clock(); counts.sample()  ... ; counts.finish()
"""

from __future__ import annotations

import time
from typing import Any

from perflab.errors import WorkloadError
from perflab.workloads.turn_latency import TurnClock


class ClientCounts:
    """A seat's counters from its client (the StatusSampler interface run/interleave.py uses)."""

    statements = selects = 0  # it makes no statements of its own
    pid = None  # and runs no process of its own
    gauges: frozenset[str] = frozenset()

    def __init__(self, clock: TurnClock) -> None:
        self.clock = clock
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._start = time.monotonic()

    def start_clock(self) -> None:
        self._start = time.monotonic()

    def sample(self) -> None:
        """The events every client thread has finished, now."""
        hist = self.clock.read()
        self.samples.append((round(time.monotonic() - self._start, 3), {"Com_commit": hist.events + hist.spanned}))

    def finish(self) -> dict[str, Any]:
        """Queries and reads at every sample, from the run's queries per event; the ratios."""
        reads, writes, other, events = self.clock.reported()
        if events <= 0:
            raise WorkloadError(
                "sysbench reported no events: the queries per transaction are unknown",
                "the client's per-second reports (--report-interval=1) did not reach perflab's wrapper",
            )
        per_event = (reads + writes + other) / events
        for _, values in self.samples:
            values["Questions"] = values["Com_commit"] * per_event
            values["Com_select"] = values["Com_commit"] * reads / events
            values["Com_insert"] = values["Com_commit"] * writes / events  # the writes, as one of WRITES
        return {
            "source": "client",
            "queries_per_event": round(per_event, 4),
            "reads_per_event": round(reads / events, 4),
        }

    def abort(self) -> None:
        """Nothing to kill: reading the shared file cannot hang."""

    def close(self) -> None:
        """The clock belongs to the seat, which closes it."""
