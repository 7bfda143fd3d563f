"""A remote host's clock against this machine's: offset and round-trip time, as NTP estimates them.

A small loop on the host answers each line sent to it with its wall clock (bash's $EPOCHREALTIME, no
process started per answer). For each of SAMPLES exchanges, sent at local t0 and answered at t1 with
remote time r: offset = r - (t0 + t1) / 2, known within (t1 - t0) / 2. The exchange with the shortest
round trip is kept. A run measures every host at its start and at its end (meta `hosts`); the
series of several hosts are put on one clock only when both errors and the drift between them stay
within MAX_ERROR_S (align()).

    reading = measure(link)   # ClockReading(offset_s=0.0012, rtt_s=0.0004, error_s=0.0002, at=...)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from perflab.errors import ClockAlignmentError, HostLostError
from perflab.hosts.transport import Connection

SAMPLES = 12
MAX_ERROR_S = 0.050  # issue 36: alignment across hosts is refused past 50 ms
_ECHO = "while read -r _; do echo $EPOCHREALTIME; done"


@dataclass(frozen=True)
class ClockReading:
    offset_s: float  # remote clock minus this machine's
    rtt_s: float  # the shortest round trip of the exchanges
    error_s: float  # half of it: the offset is known within this
    at: float  # this machine's wall clock when measured


def best_exchange(exchanges: list[tuple[float, float, float]]) -> ClockReading:
    """The reading from (t0, remote, t1) triples: the one with the shortest round trip."""
    t0, remote, t1 = min(exchanges, key=lambda e: e[2] - e[0])
    return ClockReading(remote - (t0 + t1) / 2, t1 - t0, (t1 - t0) / 2, t1)


def measure(link: Connection, samples: int = SAMPLES) -> ClockReading:
    proc = link.start(["bash", "-c", _ECHO])
    exchanges = []
    try:
        for _ in range(samples):
            t0 = time.time()
            proc.write("\n")
            answer = proc.readline(timeout=10).strip()
            t1 = time.time()
            if not answer.replace(".", "", 1).isdigit():
                raise HostLostError(
                    f"host {link.name}: its clock could not be read ({answer!r})",
                    f"perflab needs bash >= 5 on {link.name}",
                )
            exchanges.append((t0, float(answer), t1))
    finally:
        proc.close()
    return best_exchange(exchanges)


def align(host: str, start: ClockReading, end: ClockReading) -> float:
    """The offset to add to `host`'s timestamps to put them on this machine's clock (the mean of the
    run's start and end offsets); ClockAlignmentError when it is known only within more than 50 ms."""
    error = max(start.error_s, end.error_s) + abs(end.offset_s - start.offset_s) / 2
    if error > MAX_ERROR_S:
        raise ClockAlignmentError(
            f"host {host}: its clock is known only within {error * 1000:.0f} ms over the run "
            f"(round trips {start.rtt_s * 1000:.0f} / {end.rtt_s * 1000:.0f} ms, drift "
            f"{abs(end.offset_s - start.offset_s) * 1000:.0f} ms): its series are not put on this machine's clock",
            "a nearer host, or NTP (chrony) on both machines; the per-host series are still stored",
        )
    return -(start.offset_s + end.offset_s) / 2
