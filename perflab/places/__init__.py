"""Where perflab's processes run: a place. Here (this machine, places/here.py) or a host over SSH
(perflab/hosts/place.py), behind one interface, so that what observes a process is written once
and only the SSH place knows it is remote (issue 47).

What a place gives: a process's CPU, faults and context switches (`counters`), the same over a
process tree (`tree_counters`: every live member plus the children it reaped, as PostgreSQL's
postmaster and its backends), and its resident memory once a second over a window (`rss_sampler`,
stamped on this machine's clock); a command's output (`run`, `consume`: streamed here), a process
started with its output in a log (`spawn`), FIFOs (`fifos`) and a command channel through them
(`control`), its CLOCK_MONOTONIC put on this machine's (`monotonic`), and a file's bytes read and
written in place (`make_file`, `read_bytes`, `write_bytes`: [observe] alloc's counter file). perf's
recorders are written once against these (observers/perf.py).

    place = HERE                                 # or server_host.place
    before = place.counters(pid); ...; used = place.counters(pid).minus(before)
    with place.rss_sampler(pid) as rss: ...       # rss.samples -> [(0.0, 123456789), ...]; rss.end, rss.peak
    child = place.spawn(["perf", "record", ...], log="/dir/perf.log"); child.poll(); child.kill()
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from perflab.errors import PerflabError

if TYPE_CHECKING:
    from perflab.places.procfs import ProcCounters

T = TypeVar("T")


@dataclass(frozen=True)
class Done:
    """A command's end: its exit status (None: killed, or its host dropped off), its output."""

    status: int | None
    stdout: str
    stderr: str


class Process(Protocol):
    """A process a place started (places/proc.Child here, hosts/rundir.Tracked on a host); `lost`:
    why its host dropped off before it ended (never here)."""

    pid: int
    lost: str | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def signal_group(self, sig: int) -> None: ...

    def kill(self) -> None: ...


class Followed(Protocol):
    """A process started for its output: its lines as they come, until it is stopped."""

    def lines(self) -> Iterable[str]: ...

    def stop(self) -> None: ...


class Control(Protocol):
    """Words written to a process's command FIFO, each answered on its acknowledgement FIFO (perf's
    --control fifo:CTL,ACK)."""

    def send(self, word: str) -> bool:
        """True once the process acknowledged `word`; False when it did not within 30 s, or died."""
        ...

    def close(self) -> None: ...


class Aligned(Protocol):
    def monotonic(self, remote: float) -> float:
        """A host's wall-clock time on this machine's time.monotonic()."""
        ...


class Clock(Protocol):
    """A host's clock read over a window (hosts/clock.WindowClock): read at its start (`begin`) and its
    end (`finish`: the alignment, or None with why it is refused), `require()` its alignment."""

    def begin(self) -> None: ...

    def finish(self) -> Aligned | None: ...

    def require(self) -> Aligned: ...


class RssSeries(AbstractContextManager["RssSeries"], Protocol):
    """Resident bytes over a window: `samples` [(seconds since it began, bytes)], and the last and the
    largest of them."""

    samples: list[tuple[float, int]]

    @property
    def end(self) -> int | None: ...

    @property
    def peak(self) -> int | None: ...


class Place(Protocol):
    """A machine where a measured process runs; `name` is "here" or the host's name in [hosts]."""

    @property
    def name(self) -> str: ...

    def counters(self, pid: int, threads: bool = True) -> ProcCounters:
        """The process's counters now (`threads`: its context switches too, read from every thread's
        status file: never between turns). ProcessLookupError once it is gone."""
        ...

    def tree_counters(self, pid: int, threads: bool = True) -> ProcCounters:
        """The counters of `pid` and its descendants, and of the children they reaped.
        ProcessLookupError once `pid` is gone."""
        ...

    def rss_sampler(self, pid: int, tree: bool = False) -> RssSeries:
        """`pid`'s resident memory (`tree`: summed over its descendants) once a second while it is entered."""
        ...

    @property
    def where(self) -> str:
        """For messages: "" here, " on host NAME" there."""
        ...

    def run(self, argv: Sequence[str], timeout: float = 60.0) -> Done:
        """`argv` to its end (TimeoutError past `timeout`)."""
        ...

    def consume(self, argv: Sequence[str], reader: Callable[[Iterable[str]], T], timeout: float) -> tuple[T, Done]:
        """`reader` of `argv`'s output lines (streamed here: no copy of a long output held), and its end
        (`stdout` empty)."""
        ...

    def fifos(self, *paths: str | Path) -> None:
        """Fresh FIFOs at `paths`, their directories made."""
        ...

    def spawn(self, argv: Sequence[str], log: str | Path, env: dict[str, str] | None = None) -> Process:
        """`argv` started in its own process group, its output into `log`, stopped with the run (`env`:
        its whole environment here; a host's run directory gives its own)."""
        ...

    def install(self, program: Path) -> str:
        """`program` (a file here) as an executable there, copied once per run; its path there."""
        ...

    def fetch(self, path: str | Path, into: Path) -> None:
        """The file `path` there into `into` here (nothing to do when it is that file)."""
        ...

    def make_file(self, path: str, head: bytes, size: int) -> None:
        """A file of `size` bytes at `path` there, its directory made: `head`, then zeros (sparse)."""
        ...

    def read_bytes(self, path: str, offset: int, length: int) -> tuple[bytes, float | None]:
        """Up to `length` bytes of `path` there from `offset`, and the place's wall clock as they were
        read (None here, where this machine's clock is the window's)."""
        ...

    def write_bytes(self, path: str, offset: int, data: bytes) -> None:
        """`data` into `path` there at `offset` (a multiple of its length: a word written whole), never
        through a symbolic link (the file is in a server's directory, its account's: issue 48)."""
        ...

    def cpus(self, pid: int) -> list[int]:
        """The CPUs `pid` may run on there (its affinity)."""
        ...

    def follow(self, argv: Sequence[str]) -> Followed:
        """`argv` started, its output read line by line as it comes (a sampling loop), killed by stop()."""
        ...

    def control(self, ctl: str | Path, ack: str | Path, process: Process) -> Control:
        """The command channel of `process`, which holds the FIFOs `ctl` and `ack` open."""
        ...

    def monotonic(self, clock: Clock | None, wall_minus_monotonic: Callable[[], float | None]) -> Callable[[float], float]:
        """Times on this place's CLOCK_MONOTONIC put on this machine's time.monotonic(): as they are here;
        on a host, through its wall clock (`wall_minus_monotonic()`: there, as a recording read it) and
        `clock`'s alignment (ClockAlignmentError without one)."""
        ...

    def program(self, pid: int) -> str | None:
        """The program `pid` runs there (through a private root's loader: the program it loads)."""
        ...

    def debug_files(self, pid: int) -> dict[str, Path]:
        """Build ID -> debug file of the private root `pid` runs from (a glibc variant's, a sid build's)
        that perf would not find itself; none on a host."""
        ...


@dataclass(frozen=True)
class Site:
    """Where a recording is made (a stage's: run/stage.py): its place, its directory there, the place's
    clock read over the window (a host's: hosts/clock.WindowClock; None here), what names the frames
    of the binaries there (observers/host_binaries.HostStarts; None: read here), and a binary there
    as a file here (None: the same path)."""

    place: Place
    dir: Path
    clock: Clock | None = None
    starts: Callable[[str], Any] | None = None  # -> observers.elf.FunctionStarts (places import no observer)
    local: Callable[[str], str | None] | None = None
    loop: bool = False  # pmp as an eu-stack loop there (observers/pmp_loop.py: perflab's libdw sampler is here)
    own_dir: bool = False  # `dir` is the recordings' alone: removed once they are stored

    def remove(self) -> None:
        """The recordings' own directory where they were made (a host's perf.data, its FIFOs and logs:
        not left to fill its tmpfs); nothing when `dir` is not theirs alone."""
        if self.own_dir:
            with contextlib.suppress(PerflabError, TimeoutError):
                self.place.run(["rm", "-rf", "--one-file-system", str(self.dir)], timeout=120)
