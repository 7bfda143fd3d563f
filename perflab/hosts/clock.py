"""A remote host's clock against this machine's: offset and round-trip time, as NTP estimates them.

A small loop on the host answers each line sent to it with its wall clock (bash's $EPOCHREALTIME, no
process started per answer). For each of SAMPLES exchanges, sent at local t0 and answered at t1 with
remote time r: offset = r - (t0 + t1) / 2, known within (t1 - t0) / 2. The exchange with the shortest
round trip is kept. A run measures every host at its start and at its end (meta `hosts`); the
series of several hosts are put on one clock only when both errors and the drift between them stay
within MAX_ERROR_S (align()). A cell's window reads the server host's clock at its start and its end
(WindowClock): the series stamped there are aligned with those two readings.

    reading = measure(link)   # ClockReading(offset_s=0.0012, rtt_s=0.0004, error_s=0.0002, at=...)
    align("db", start, end).monotonic(remote_wall_time)   # on this machine's time.monotonic()
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

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


@dataclass(frozen=True)
class Alignment:
    """How to put a host's wall-clock timestamps on this machine's clocks."""

    host: str
    shift_s: float  # add to the host's wall clock: this machine's wall clock (minus the mean offset)
    error_s: float  # known within this: the larger error of the two readings, plus half the drift
    wall_minus_monotonic: float  # this machine's time.time() - time.monotonic() when aligned

    def wall(self, remote: float) -> float:
        return remote + self.shift_s

    def monotonic(self, remote: float) -> float:
        """A host's wall-clock time as this machine's time.monotonic() (the clock phases are cut on)."""
        return remote + self.shift_s - self.wall_minus_monotonic

    def to_dict(self) -> dict[str, float]:
        return {"shift_s": round(self.shift_s, 6), "error_s": round(self.error_s, 6)}


def align(host: str, start: ClockReading, end: ClockReading) -> Alignment:
    """How to put `host`'s timestamps taken between two readings on this machine's clock: shifted by
    the mean of the two offsets; ClockAlignmentError when that is known only within more than 50 ms."""
    error = max(start.error_s, end.error_s) + abs(end.offset_s - start.offset_s) / 2
    if error > MAX_ERROR_S:
        raise ClockAlignmentError(
            f"host {host}: its clock is known only within {error * 1000:.0f} ms over the run "
            f"(round trips {start.rtt_s * 1000:.0f} / {end.rtt_s * 1000:.0f} ms, drift "
            f"{abs(end.offset_s - start.offset_s) * 1000:.0f} ms): its series are not put on this machine's clock",
            "a nearer host, or NTP (chrony) on both machines; the per-host series are still stored",
        )
    return Alignment(host, -(start.offset_s + end.offset_s) / 2, error, time.time() - time.monotonic())


class WindowClock:
    """A host's clock read at the start and the end of a cell's window: the series stamped there (the
    server's RSS, perf's and the stack sampler's samples) are aligned with these two readings, since a
    cell is stored before the run's end reading exists. `refused`: why they are not (over 50 ms)."""

    def __init__(self, link: Connection) -> None:
        self.link = link
        self.start: ClockReading | None = None
        self.end: ClockReading | None = None
        self.alignment: Alignment | None = None
        self.refused: str | None = None

    def begin(self) -> None:
        """The start reading (once: the RSS sampler and the window may both ask for it)."""
        if self.start is None:
            self.start = measure(self.link)

    def finish(self) -> Alignment | None:
        """The end reading (once) and the alignment, or None with `refused` set."""
        if self.start is not None and self.end is None:
            self.end = measure(self.link)
            try:
                self.alignment = align(self.link.name, self.start, self.end)
            except ClockAlignmentError as exc:
                self.refused = exc.message
        return self.alignment

    def require(self) -> Alignment:
        """The alignment, or ClockAlignmentError (a series that cannot be had unaligned)."""
        if self.finish() is None:
            raise ClockAlignmentError(
                self.refused or f"host {self.link.name}: its clock was not read over the window",
                "a nearer host, or NTP (chrony) on both machines (`perflab docs hosts#clocks`)",
            )
        assert self.alignment is not None
        return self.alignment

    def record(self) -> dict[str, Any]:
        """The cell's `build.host.clock`: both readings, and the shift applied or why none was."""
        return {
            "start": asdict(self.start) if self.start else None,
            "end": asdict(self.end) if self.end else None,
            **(self.alignment.to_dict() if self.alignment else {"shift_s": None, "error_s": None}),
            "aligned": self.alignment is not None,
            "refused": self.refused,
        }
