"""A host over SSH as a place (perflab/places/__init__.py): a process there read from the host's /proc
over the link: its CPU, faults and context switches (the ProcCounters a process here gives,
places/procfs.py), those of a process tree (a postmaster and its backends, and the children they
reaped), and its resident memory once a second from a small loop on the host, tagged and stopped like
every remote process, its samples stamped with the host's clock and put on this machine's. Its
commands run over the link, its processes in the run directory's wrapper (hosts/rundir.Tracked), a
FIFO's words written and answered by a shell there.

    place = HostPlace("db1", rundir)
    before = place.counters(pid); ...; used = place.counters(pid).minus(before)
    with place.rss_sampler(pid) as rss: ...    # rss.samples -> [(0.0, 123456789), ...]
"""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self, TypeVar

from perflab.errors import ClockAlignmentError, HostLostError, PerflabError
from perflab.hosts.clock import Alignment, WindowClock
from perflab.hosts.rundir import RunDir, Tracked
from perflab.hosts.transport import Connection, RemoteProcess
from perflab.places import Clock, Done, Process
from perflab.places.procfs import ProcCounters

T = TypeVar("T")

# $0: the pid. Its stat line, the clock tick, then every thread's context switches
_COUNTERS = "cat /proc/$0/stat && getconf CLK_TCK && cat /proc/$0/task/*/status 2>/dev/null | grep ctxt_switches"
# $0: the pid. Once a second: the host's wall clock and the resident pages (statm's second field) times the
# page size, until it is gone (bash: $EPOCHREALTIME, as hosts/clock.py reads the host's clock)
_RSS = (
    'p=$(getconf PAGESIZE); while read -r _ r _ < "/proc/$0/statm"; do echo "$EPOCHREALTIME $((r * p))"; sleep 1; done'
)
# $0: a log (its directory made); "$@": the argv, its output into the log
_LOGGED = 'mkdir -p "${0%/*}" && exec "$@" > "$0" 2>&1'
# $0: the word, $1 the control FIFO, $2 the acknowledgement FIFO (the process holds both open)
_CONTROL = 'echo "$0" > "$1" && head -n 1 "$2"'
# $0: a tree's root pid. Its stat and every child's (a backend), each followed by the clock tick,
# and their threads' context switches: parsed by `parse_tree`
_TREE = (
    't=$(getconf CLK_TCK); for p in "$0" $(cat "/proc/$0/task/$0/children" 2>/dev/null); do '
    's=$(cat "/proc/$p/stat" 2>/dev/null) || continue; echo "$s"; echo "$t"; '
    "cat /proc/$p/task/*/status 2>/dev/null | grep ctxt_switches; echo .; done"
)
# $0: a tree's root pid. The tree's resident bytes: the root's and each child's (a backend)
_TREE_BYTES = (
    's=0; for p in "$0" $(cat "/proc/$0/task/$0/children" 2>/dev/null); do '
    'read -r _ r _ 2>/dev/null < "/proc/$p/statm" && s=$((s + r)); done; echo $((s * g))'
)
# bash, $0: a tree's root pid. Once a second, until it is gone: the host's wall clock ($EPOCHREALTIME,
# as hosts/clock.py reads it) and the tree's resident bytes
_TREE_RSS = (
    'g=$(getconf PAGESIZE); while [ -d "/proc/$0" ]; do echo -n "$EPOCHREALTIME "; ' + _TREE_BYTES + "; sleep 1; done"
)
# $0: a file; $1: its first bytes (base64); $2: its size (the rest sparse). Its directory made first
_CREATE = 'mkdir -p "${0%/*}" && printf %s "$1" | base64 -d > "$0" && truncate -s "$2" "$0"'
# $0: a file; $1: from this byte (1 = the first); $2: this many. The host's wall clock first, on a line
# of its own: when they were read (the span of [observe] alloc's counts)
_RANGE = 'date +%s.%N && tail -c +"$1" "$0" | head -c "$2" | base64 -w0'
# $0: a file; $1: bytes (base64) written whole at block $2 of their own length ($3), never through a link
_WRITE = 'printf %s "$1" | base64 -d | dd of="$0" oflag=nofollow bs="$3" seek="$2" conv=notrunc status=none'

_INSTALLED: set[tuple[str, str]] = set()  # (a host's run directory, a program's name): copied there this run


def cpu_list(text: str) -> list[int]:
    """The CPUs of a kernel CPU list ("0-3,6", /proc/PID/status' Cpus_allowed_list)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        low, _, high = part.strip().partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            cpus.update(range(int(low), int(high or low) + 1))
    return sorted(cpus)


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
        self._loop = Following(self.rundir, *self.rundir.start(["bash", "-c", self.LOOP, str(self.pid)]))
        self._thread.start()
        return self

    def _read(self) -> None:
        for line in self._loop.lines():
            stamp, _, value = line.strip().partition(" ")
            if value.isdigit() and stamp.replace(".", "", 1).isdigit():
                self._stamped.append((float(stamp), time.monotonic(), int(value)))

    def __exit__(self, *exc: object) -> None:
        value, ended = None, time.monotonic()
        self._loop.stop()
        with contextlib.suppress(HostLostError):
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


def parse_tree(text: str) -> ProcCounters:
    """The tree's counters from _TREE's output: each process's own, plus the children it reaped
    (stat's cutime, cstime, cminflt, cmajflt). ProcessLookupError when the root is gone."""
    blocks = [b.strip() for b in text.split("\n.\n") if b.strip() and b.strip() != "."]
    total = ProcCounters(0.0, 0.0, 0, 0, 0, 0)
    for number, block in enumerate(blocks):
        try:
            own = parse_counters(block)
        except ProcessLookupError:
            if number == 0:
                raise
            continue
        fields, tick = block.splitlines()[0].rsplit(")", 1)[1].split(), int(block.splitlines()[1])
        reaped = ProcCounters(int(fields[13]) / tick, int(fields[14]) / tick, int(fields[8]), int(fields[10]), 0, 0)
        total = total.plus(own).plus(reaped)
    if not blocks:
        raise ProcessLookupError("the tree's root is gone")
    return total


def read_tree(link: Connection, pid: int) -> ProcCounters:
    return parse_tree(link.run(["sh", "-c", _TREE, str(pid)]).stdout)


class TreeRssSampler(RemoteRssSampler):
    """A tree's RSS (a postmaster's backends included) once a second, read on its host and stamped
    with the host's clock, put on this machine's with the window's readings as a single process's."""

    LOOP = _TREE_RSS

    def end_bytes(self) -> int | None:
        done = self.rundir.link.run(["sh", "-c", "g=$(getconf PAGESIZE); " + _TREE_BYTES, str(self.pid)])
        return int(done.stdout) if done.status == 0 and done.stdout.strip().isdigit() else None


@dataclass(frozen=True)
class HostPlace:
    """A host of the run (`name` as in [hosts]), reached through its run directory's link. Counters
    threads: the host's script always reads every thread's switches (one round trip either way)."""

    name: str
    rundir: RunDir

    def counters(self, pid: int, threads: bool = True) -> ProcCounters:
        return read_counters(self.rundir.link, pid)

    def tree_counters(self, pid: int, threads: bool = True) -> ProcCounters:
        return read_tree(self.rundir.link, pid)

    def rss_sampler(self, pid: int, tree: bool = False) -> RemoteRssSampler:
        """Stamped with the host's clock, read at the window's start and end (hosts/clock.py)."""
        sampler = TreeRssSampler if tree else RemoteRssSampler
        return sampler(self.rundir, pid, WindowClock(self.rundir.link))

    @property
    def where(self) -> str:
        return f" on host {self.name}"

    def run(self, argv: Sequence[str], timeout: float = 60.0) -> Done:
        done = self.rundir.link.run(list(argv), timeout=timeout)
        return Done(done.status, done.stdout, done.stderr)

    def consume(self, argv: Sequence[str], reader: Callable[[Iterable[str]], T], timeout: float) -> tuple[T, Done]:
        done = self.run(argv, timeout)
        return reader(done.stdout.splitlines(keepends=True)), Done(done.status, "", done.stderr)

    def fifos(self, *paths: str | Path) -> None:
        script = 'for f; do mkdir -p "${f%/*}" && rm -f "$f" && mkfifo "$f" || exit 1; done'
        done = self.run(["sh", "-c", script, "fifos", *map(str, paths)])
        if done.status != 0:
            raise HostLostError(f"host {self.name}: cannot make FIFOs: {done.stderr.strip()[-300:]}")

    def spawn(self, argv: Sequence[str], log: str | Path, env: dict[str, str] | None = None) -> Tracked:
        return Tracked(self.rundir, ["sh", "-c", _LOGGED, str(log), *argv])  # the run directory's environment

    def install(self, program: Path) -> str:
        there = f"{self.rundir.path}/{program.name}"
        if (self.rundir.path, program.name) not in _INSTALLED:
            self.rundir.link.put(program, there)
            self.rundir.link.run(["chmod", "0755", there])  # SFTP keeps the mode; said, not assumed
            _INSTALLED.add((self.rundir.path, program.name))
        return there

    def fetch(self, path: str | Path, into: Path) -> None:
        self.rundir.link.get(str(path), into)

    def make_file(self, path: str, head: bytes, size: int) -> None:
        self._file(_CREATE, "make", path, base64.b64encode(head).decode(), size)

    def read_bytes(self, path: str, offset: int, length: int) -> tuple[bytes, float | None]:
        wall, _, text = self._file(_RANGE, "read", path, offset + 1, length).partition("\n")
        try:
            stamp: float | None = float(wall)
        except ValueError:  # a date without %N: no stamp (the span as sent)
            stamp = None
        return base64.b64decode(text), stamp

    def write_bytes(self, path: str, offset: int, data: bytes) -> None:
        assert data and offset % len(data) == 0, (offset, len(data))
        self._file(_WRITE, "write", path, base64.b64encode(data).decode(), offset // len(data), len(data))

    def _file(self, script: str, verb: str, path: str, *args: object) -> str:
        done = self.run(["sh", "-c", script, path, *map(str, args)], timeout=120)
        if done.status != 0:
            raise PerflabError(f"host {self.name}: cannot {verb} {path}: {done.stderr.strip()[-300:]}")
        return done.stdout

    def cpus(self, pid: int) -> list[int]:
        status = self.run(["cat", f"/proc/{pid}/status"]).stdout
        line = next((ln for ln in status.splitlines() if ln.startswith("Cpus_allowed_list:")), "")
        return cpu_list(line.partition(":")[2])

    def follow(self, argv: Sequence[str]) -> Following:
        proc, pid = self.rundir.start(list(argv))
        return Following(self.rundir, proc, pid)

    def control(self, ctl: str | Path, ack: str | Path, process: Process) -> ShellControl:
        return ShellControl(self.rundir.link, str(ctl), str(ack))

    def monotonic(self, clock: Clock | None, wall_minus_monotonic: Callable[[], float | None]) -> Callable[[float], float]:
        if clock is None:
            raise ClockAlignmentError(f"host {self.name}: its clock was not read over the window")
        wall = wall_minus_monotonic()
        if wall is None:
            raise ClockAlignmentError(
                f"host {self.name}: the recording holds no reference time: its times cannot be put on this machine's",
                "perf 5.10 or later writes one (`perf report --header-only` there)",
            )
        aligned = clock.require()
        return lambda t: aligned.monotonic(t + wall)

    def program(self, pid: int) -> str | None:
        """`HOST:PATH` (db:/usr/sbin/mariadbd): a profile's binary says where it ran (docs/hosts.md)."""
        exe = self.run(["readlink", f"/proc/{pid}/exe"]).stdout.strip()
        return f"{self.name}:{exe}" if exe else None

    def debug_files(self, pid: int) -> dict[str, Path]:
        return {}  # perf there finds the host's own; a private root copied there keeps its -dbgsym unread


@dataclass(frozen=True)
class Following:
    """A process in the run directory there, its output streamed back (HostPlace.follow)."""

    rundir: RunDir
    proc: RemoteProcess
    pid: int

    def lines(self) -> Iterable[str]:
        with contextlib.suppress(HostLostError, TimeoutError):
            yield from self.proc.lines()

    def stop(self) -> None:
        with contextlib.suppress(HostLostError):
            self.rundir.kill(self.pid)


@dataclass(frozen=True)
class ShellControl:
    """A FIFO's words written by a shell on the host, each answered within 30 s (`timeout` there)."""

    link: Connection
    ctl: str
    ack: str

    def send(self, word: str) -> bool:
        with contextlib.suppress(TimeoutError):  # a host that dropped off says so (HostLostError)
            done = self.link.run(["timeout", "30", "sh", "-c", _CONTROL, word, self.ctl, self.ack], timeout=40)
            return "ack" in done.stdout
        return False

    def close(self) -> None:
        pass
