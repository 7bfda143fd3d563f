"""A process on a remote host, read from that host's /proc over SSH: its CPU, faults and context
switches (the ProcCounters a local process gives, observers/resources.py), and its resident
memory once a second from a small loop on the host, tagged and stopped like every remote process.

    before = read_counters(link, pid); ...; used = read_counters(link, pid).minus(before)
    with RemoteRssSampler(rundir, pid, WindowClock(link)) as rss: ...    # rss.samples -> [(0.0, 123456789), ...]
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Self

from perflab.errors import HostLostError
from perflab.hosts.clock import Alignment, WindowClock
from perflab.hosts.rundir import RunDir
from perflab.hosts.transport import Connection
from perflab.observers.resources import ProcCounters

# $0: the pid. Its stat line, the clock tick, then every thread's context switches
_COUNTERS = "cat /proc/$0/stat && getconf CLK_TCK && cat /proc/$0/task/*/status 2>/dev/null | grep ctxt_switches"
# $0: the pid. Once a second: the host's wall clock and the resident pages (statm's second field) times the
# page size, until it is gone (bash: $EPOCHREALTIME, as hosts/clock.py reads the host's clock)
_RSS = (
    'p=$(getconf PAGESIZE); while read -r _ r _ < "/proc/$0/statm"; do echo "$EPOCHREALTIME $((r * p))"; sleep 1; done'
)


def parse_counters(text: str) -> ProcCounters:
    """ProcCounters from _COUNTERS' output; ProcessLookupError when the process is gone."""
    lines = text.strip().splitlines()
    if len(lines) < 2 or ")" not in lines[0] or not lines[1].isdigit():
        raise ProcessLookupError("the process is gone")
    fields, tick = lines[0].rsplit(")", 1)[1].split(), int(lines[1])
    switches = {"voluntary_ctxt_switches": 0, "nonvoluntary_ctxt_switches": 0}
    for line in lines[2:]:
        name, _, value = line.partition(":")
        if name.strip() in switches and value.strip().isdigit():
            switches[name.strip()] += int(value)
    return ProcCounters(
        user_s=int(fields[11]) / tick,
        sys_s=int(fields[12]) / tick,
        minor_faults=int(fields[7]),
        major_faults=int(fields[9]),
        voluntary_ctx=switches["voluntary_ctxt_switches"],
        involuntary_ctx=switches["nonvoluntary_ctxt_switches"],
    )


def read_counters(link: Connection, pid: int) -> ProcCounters:
    return parse_counters(link.run(["sh", "-c", _COUNTERS, str(pid)]).stdout)


def rss_bytes(link: Connection, pid: int) -> int | None:
    done = link.run(["sh", "-c", 'read -r _ r _ < "/proc/$0/statm" && echo $((r * $(getconf PAGESIZE)))', str(pid)])
    return int(done.stdout) if done.status == 0 and done.stdout.strip().isdigit() else None


class RemoteRssSampler:
    """RssSampler's interface (samples, end, peak) for a process on a host: a loop there prints its
    RSS once a second, stamped with the host's wall clock; `clock` reads the host's clock at the
    window's start and end, and the samples are put on this machine's clock with those readings
    (seconds since the sampler started, as RssSampler's). When the alignment is refused (over 50 ms),
    each sample keeps the time it arrived here (`clock.refused` says why; the cell's build.host.clock).
    A subclass measures something else with the same stamps: its `LOOP` (a bash script of the pid,
    printing "EPOCHREALTIME BYTES" lines) and `end_bytes` (the figure once, at the window's end)."""

    LOOP = _RSS

    def __init__(self, rundir: RunDir, pid: int, clock: WindowClock | None = None) -> None:
        self.rundir, self.pid, self.clock = rundir, pid, clock
        self.samples: list[tuple[float, int]] = []
        self._stamped: list[tuple[float, float, int]] = []  # (host's wall clock, arrival here, bytes)
        self._start = 0.0
        self._thread = threading.Thread(target=self._read, name="remote-rss", daemon=True)

    def __enter__(self) -> Self:
        if self.clock is not None:
            self.clock.begin()
        self._start = time.monotonic()
        self._proc, self._loop_pid = self.rundir.start(["bash", "-c", self.LOOP, str(self.pid)])
        self._thread.start()
        return self

    def _read(self) -> None:
        with contextlib.suppress(HostLostError, TimeoutError):
            for line in self._proc.lines():
                stamp, _, value = line.strip().partition(" ")
                if value.isdigit() and stamp.replace(".", "", 1).isdigit():
                    self._stamped.append((float(stamp), time.monotonic(), int(value)))

    def __exit__(self, *exc: object) -> None:
        value, ended = None, time.monotonic()
        with contextlib.suppress(HostLostError):
            self.rundir.signal(self._loop_pid, "KILL")
            value = self.end_bytes()  # the end of the window, exactly
            self._thread.join(10)
            if self.clock is not None:
                self.clock.finish()
        alignment = self.clock.alignment if self.clock is not None else None
        self.samples = aligned_samples(self._stamped, self._start, alignment)
        if value:
            self.samples.append((round(ended - self._start, 3), value))

    def end_bytes(self) -> int | None:
        return rss_bytes(self.rundir.link, self.pid)

    @property
    def end(self) -> int | None:
        return self.samples[-1][1] if self.samples else None

    @property
    def peak(self) -> int | None:
        return max((v for _, v in self.samples), default=None)


def aligned_samples(
    stamped: list[tuple[float, float, int]], start: float, alignment: Alignment | None
) -> list[tuple[float, int]]:
    """(t, bytes) with t in seconds since `start` (this machine's time.monotonic()): each sample's host
    stamp put on this machine's clock, or, without an alignment, the time it arrived here."""
    return [
        (round((alignment.monotonic(host) if alignment else arrived) - start, 3), value)
        for host, arrived, value in stamped
    ]
