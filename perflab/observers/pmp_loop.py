"""pmp's eu-stack tool as a `bash` loop where the process runs (here, or a server's or a client's host:
docs/hosts.md, "Profiles on the server host"): `eu-stack -m -p PID` every `interval`, each sample headed by the
place's wall clock ($EPOCHREALTIME) and closed by an end mark, its output streamed back as it comes.
With `tree`, PID and each of its children at that sample (PostgreSQL's backends: forked from the
postmaster without exec, they map what it maps, so its maps name their frames). The samples' times
are put on this machine's CLOCK_MONOTONIC with `clock` (a host's, read over the window) and cut
into phases as StackSampler's (observers/pmp.py), whose interface this has (tool eu-stack).

    with LoopSampler(place, pid, clock, interval=0.25, paused=True) as pmp:   # maps read, not sampling
        warm_up(); pmp.resume(); run_window()
    pmp.rows()   # [(t, tid, frames root first)], t in seconds since pmp.origin
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Self

from perflab.errors import PerflabError
from perflab.observers.elf import FunctionStarts
from perflab.observers.pmp import ModuleMap, parse_eu_stack
from perflab.places import Clock, Followed, Place

# $0: the pid, $1: the interval. Each sample: its time on the place's wall clock, eu-stack's text, an end
# mark; one every interval (the sleep runs beside the sample: a sample that takes longer delays the next)
_SAMPLER = (
    'while [ -d "/proc/$0" ]; do sleep "$1" & s=$!; echo "T $EPOCHREALTIME"; eu-stack -m -p "$0" 2>/dev/null; '
    'echo E; wait $s; done'
)
# the same over a process tree (the children the kernel lists in /proc/PID/task/TID/children at each
# sample); eu-stack heads each process's stacks with "PID N"
_TREE_SAMPLER = (
    'while [ -d "/proc/$0" ]; do sleep "$1" & s=$!; echo "T $EPOCHREALTIME"; '
    'for p in "$0" $(cat /proc/"$0"/task/*/children 2>/dev/null); do eu-stack -m -p "$p" 2>/dev/null; done; '
    'echo E; wait $s; done'
)


class LoopSampler:
    """StackSampler's interface (tool eu-stack) for a process on `place`: started paused (`paused`:
    its maps read, the loop started at the first resume()) or sampling at once."""

    tool = "eu-stack"

    def __init__(
        self,
        place: Place,
        pid: int,
        clock: Clock | None,
        interval: float,
        starts: Callable[[str], FunctionStarts],
        tree: bool = False,
        paused: bool = False,
    ) -> None:
        self.place, self.pid, self.clock, self.interval, self.starts = place, pid, clock, interval, starts
        self.tree = tree
        self.waiting = paused  # not sampling until resume()
        self.processes: list[int] = []  # with tree: the members sampled, in order of appearance
        self.dsos: dict[str, str] = {}
        self.origin = 0.0
        self.span = (0.0, 0.0)
        self._samples: list[tuple[float, str]] = []  # (the place's wall clock, eu-stack's text)
        self._loop: Followed | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        maps = self.place.run(["cat", f"/proc/{self.pid}/maps"], timeout=60)
        if maps.status != 0:
            raise PerflabError(f"pid {self.pid}'s maps are unreadable{self.place.where}", maps.stderr)
        self._modules = ModuleMap(maps.stdout, self.starts)
        self._started = time.monotonic()
        if not self.waiting:
            self._start()
        return self

    def _start(self) -> None:
        script = _TREE_SAMPLER if self.tree else _SAMPLER
        self._loop = loop = self.place.follow(["bash", "-c", script, str(self.pid), f"{self.interval:g}"])
        self._thread = threading.Thread(target=self._read, args=(loop,), name="pmp-loop", daemon=True)
        self._thread.start()

    def _stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.stop()
            self._thread.join(10)
        self._loop = self._thread = None

    def _read(self, loop: Followed) -> None:
        stamp: float | None = None
        text: list[str] = []
        for line in loop.lines():
            if line.startswith("T "):
                stamp, text = float(line[2:]), []
            elif line.strip() == "E" and stamp is not None:
                self._samples.append((stamp, "".join(text)))
                stamp = None
            else:
                text.append(line)

    def pause(self) -> None:
        """No samples until resume() (bench/profile_overhead.py toggles it second by second)."""
        self._stop()

    def resume(self) -> None:
        if self.waiting:  # its span begins here
            self.waiting, self._started = False, time.monotonic()
        if self._loop is None:
            self._start()

    def __exit__(self, *exc: object) -> None:
        self.span = (self._started, time.monotonic())
        self._stop()

    def covered(self) -> tuple[float, float]:
        return self.span

    def rows(self) -> list[tuple[float, int, list[str]]]:
        """(t, tid, frames root first) per thread per sample; t in seconds since `origin` (the span's
        start on this machine's CLOCK_MONOTONIC), each sample's time put on this machine's clock."""
        if self.clock is not None:
            here = self.clock.require().monotonic
        else:
            offset = time.time() - time.monotonic()
            here = lambda remote: remote - offset  # noqa: E731  (this machine's own wall clock)
        self.origin = self.span[0]
        if self.tree:
            seen = (int(line.split()[1]) for _, text in self._samples for line in text.splitlines() if line.startswith("PID "))
            self.processes = list(dict.fromkeys(seen))
        return [
            (round(here(stamp) - self.origin, 3), tid, frames)
            for stamp, text in self._samples
            for tid, frames in parse_eu_stack(text, self._modules, self.dsos)
        ]

    def cost(self) -> None:
        return None  # eu-stack's own cost is not measured (the libdw sampler's is, locally)
