"""On-CPU call graphs of the server over the measured window: `perf record`, then folded stacks.

Why system-wide: `perf record -p PID` opens one event and one ring buffer per server thread
and CPU; every context switch of a server thread then switches perf events in and out,
which an OLTP server does tens of thousands of times a second (the issue measured 13% QPS
lost at 99 Hz, perf itself 5.2 s of system CPU in 8.6 s). `-a` opens one event per CPU, so
context switches cost nothing extra; samples of other processes are dropped when folding
(`perf script --pid`). perf starts with its events disabled (`-D -1`) and is enabled and
disabled through its control FIFO, so the profile covers exactly the window and perf's
start-up (reading every process's memory maps) happens before it.

    with PerfRecorder(pid, workdir, frequency=99, call_graph="fp") as rec:
        run_window()
    stacks, dsos, stats = rec.fold()

The recording is folded by observers/perf_script.py.
"""

from __future__ import annotations

import contextlib
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self

from perflab.errors import PerflabError
from perflab.observers.perf_script import MEASURED, FoldStats, PhasesAt, StartsLoader, fold_perf_phases
from perflab.places import Clock, Control, Place, Process
from perflab.places.here import HERE

DWARF_STACK_BYTES = 16384
STOP_DEADLINE_S = 60.0
LOST = re.compile(r"Processed \d+ events and lost (\d+) chunks")


class PerfRecorder:
    """`perf record` system-wide at `frequency` Hz (or of a subclass's `events()`), enabled for the
    window only, on `place`: here, or a server's host (hosts/place.py: perf runs there in the run
    directory's wrapper, its FIFOs driven by a shell there, `perf script` run there; `clock`, the
    host's clock read over the window, puts its samples' times on this machine's). `starts`: names
    the frames of a binary the place's tools cannot name (observers/host_binaries.HostStarts)."""

    def __init__(
        self,
        pid: int,
        workdir: Path | str,
        *,
        frequency: int = 99,
        call_graph: str = "fp",
        enabled: bool = True,
        place: Place = HERE,
        clock: Clock | None = None,
        starts: StartsLoader | None = None,
    ) -> None:
        self.pid = pid
        self.enabled = enabled  # False: recording starts at the first resume()
        self.workdir = Path(workdir)  # on the place
        self.frequency = frequency
        self.call_graph = call_graph
        self.place, self.clock, self.starts = place, clock, starts
        self.data = self.workdir / f"perf-{pid}.data"
        self.log = self.workdir / f"perf-{pid}.log"
        self.child: Process | None = None
        self._control: Control | None = None
        self.seconds = 0.0
        self._started = 0.0
        self.span = (0.0, 0.0)  # CLOCK_MONOTONIC seconds recorded: from the first enable to the stop
        self.failure: str | None = None  # why the recording does not cover its span (check() raises it)
        self.buildid_dir: Path | None = None  # perf's build-ID directory: a private root's debug files
        self.lost = 0  # runs of events perf lost (its buffer full), as `perf script` said

    def events(self) -> list[str]:
        """What to record: cpu-clock samples at the frequency, with call graphs."""
        graph = ["-g"] if self.call_graph == "fp" else ["--call-graph", f"dwarf,{DWARF_STACK_BYTES}", "-m", "16M"]
        return ["-e", "cpu-clock", "-F", str(self.frequency), *graph]

    def argv(self, ctl: Path, ack: Path) -> list[str]:
        # -B -N: no build-id work at the end (perflab folds right away, where it recorded);
        # --no-bpf-event: no side-band thread, whose 1 s poll timeout made every stop take ~0.9 s;
        # -k CLOCK_MONOTONIC: sample times on time.monotonic()'s clock (phases are cut by time; on a
        # host, put on this machine's by perf's reference time and the window's clock readings: tracepoints
        # refuse CLOCK_REALTIME, "wrong clockid (0)")
        return [
            *("perf", "record", "-a", *self.events(), "-o", str(self.data), "-B", "-N", "--no-bpf-event", "-q"),
            *("-k", "CLOCK_MONOTONIC", "-D", "-1", "--control", f"fifo:{ctl},{ack}"),
        ]

    def __enter__(self) -> Self:
        ctl, ack = self.workdir / f"perf-{self.pid}.ctl", self.workdir / f"perf-{self.pid}.ack"
        self.place.fifos(ctl, ack)
        self.buildid_dir = buildid_dir(self.place.debug_files(self.pid), self.workdir / f"perf-{self.pid}.debug")
        self.child = self.place.spawn(self.argv(ctl, ack), log=self.log)
        try:
            self._control = self.place.control(ctl, ack, self.child)
            # answered once perf has started (it reads every process's maps first): before the workload
            self._command("enable" if self.enabled else "disable")
        except BaseException:
            self.child.kill()
            raise
        self._started = time.monotonic()
        return self

    def pause(self) -> None:
        """Stop sampling until resume() (bench/profile_overhead.py toggles it second by second)."""
        self._command("disable")

    def resume(self) -> None:
        self._command("enable")
        if not self.enabled:  # the deferred start: the span begins here
            self.enabled, self._started = True, time.monotonic()

    def _command(self, word: str) -> None:
        assert self._control is not None
        if not self._control.send(word):
            raise PerflabError(
                f"perf record{self.place.where} did not acknowledge '{word}': {self._log_tail()}",
                f"is linux-perf installed{self.place.where}, and kernel.perf_event_paranoid low enough? "
                "(`perflab doctor`; `perflab docs hosts`)",
            )

    def _log_tail(self) -> str:
        with contextlib.suppress(PerflabError, TimeoutError):
            return self.place.run(["tail", "-c", "400", str(self.log)]).stdout.strip()
        return "(its log is unreadable)"

    def __exit__(self, *exc: object) -> None:
        assert self.child is not None
        try:
            stopped = time.monotonic()
            self.seconds = stopped - self._started if self.enabled else 0.0
            self.span = (self._started, stopped) if self.enabled else (stopped, stopped)
            self.failure = self._stop()
        except PerflabError as stopping:  # its host dropped off, or perf no longer answers
            self.failure = stopping.message
        finally:
            self.child.kill()
            if self._control is not None:
                self._control.close()

    def _stop(self) -> str | None:
        """Stop perf; why its recording is not whole, if it is not (an early exit, a failed
        or unfinished write). Not raised here: an exception may be on its way out already."""
        assert self.child is not None
        where = self.place.where
        code = self.child.poll()
        if code is not None:
            return f"perf record{where} exited (code {code}) before it was stopped: its recording does not cover the window"
        self._command("disable")
        self.child.signal_group(signal.SIGINT)  # perf writes its header and exits
        try:
            code = self.child.wait(STOP_DEADLINE_S)
        except TimeoutError:
            return f"perf record{where} did not finish writing {self.data.name} within {STOP_DEADLINE_S:.0f} s of its stop"
        if code not in (0, -signal.SIGINT, 128 + signal.SIGINT):  # perf re-raises the SIGINT it stopped on
            return f"perf record{where} exited with code {code} when stopped: {self.data.name} may be incomplete"
        return None

    def check(self) -> None:
        """PerflabError if the recording does not cover what it was to (see _stop)."""
        if self.failure is not None:
            raise PerflabError(self.failure, f"see {self.log}{self.place.where}; run `perflab doctor`")

    def script_argv(self, pid: int | Sequence[int] | None = None, timed: bool = False) -> list[str]:
        """`perf script` of one process's samples (default: the server's), or of several (a
        PostgreSQL server's tree), only the fields folding needs (less text to parse), with each
        sample's time when `timed`."""
        fields = "tid,time,ip,sym,dso" if timed else "tid,ip,sym,dso"
        found = ["--buildid-dir", str(self.buildid_dir)] if self.buildid_dir is not None else []
        return ["perf", *found, "script", "-i", str(self.data), "--pid", self._pids(pid), "-F", fields]

    def _pids(self, pid: int | Sequence[int] | None) -> str:
        return ",".join(map(str, pid)) if isinstance(pid, Sequence) else str(pid or self.pid)

    def _perf(self, argv: list[str], what: str) -> str:
        """perf's output of `argv` where it recorded; PerflabError when it fails. `lost` counts the
        chunks of events it says were lost."""
        self.check()
        done = self.place.run(argv, timeout=STOP_DEADLINE_S * 10)
        if done.status != 0:
            raise PerflabError(
                f"perf {what}{self.place.where} failed (exit {done.status}): {done.stderr.strip()[-400:]}",
                f"perf.data: {self.data}",
            )
        self.lost = max(self.lost, lost_chunks(done.stderr))
        return done.stdout

    def descendants(self, pid: int | None = None) -> list[int]:
        """`pid` (default: the server) and every process it forked, as the recording saw them:
        perf tracks forks system-wide even while sampling is disabled, and lists the tasks
        of existing processes at its start, so a backend forked at any time before the stop is
        found, even one that exited before anyone listed /proc (`perf report --tasks`)."""
        tasks = self._perf(["perf", "report", "-i", str(self.data), "--tasks", "-q"], "report --tasks")
        return descendants(tasks, pid or self.pid)

    def on_this_clock(self) -> Callable[[float], float]:
        """The recording's times (its place's CLOCK_MONOTONIC) on this machine's time.monotonic()."""

        def wall() -> float | None:
            return wall_minus_monotonic(self._perf(["perf", "report", "-i", str(self.data), "--header-only"], "report"))

        return self.place.monotonic(self.clock, wall)

    def fold(self) -> tuple[Counter, FoldStats]:
        """Fold the server's samples; perf script streams into the parser (no temporary text file)."""
        return self.fold_phases().get(MEASURED) or (Counter(), FoldStats())

    def fold_phases(
        self, pid: int | Sequence[int] | None = None, phases_at: PhasesAt | None = None
    ) -> dict[str, tuple[Counter, FoldStats]]:
        """Fold one process's samples (default: the server's), or several processes' as one
        profile, per phase (fold_perf_phases). PerflabError when the recording does not cover
        its span, or perf lost events: the profile would undercount per transaction."""
        self.check()
        at = None
        if phases_at is not None:
            here = self.on_this_clock()
            at = lambda t: phases_at(here(t))  # noqa: E731
        starts = {"starts": self.starts} if self.starts is not None else {}
        argv = self.script_argv(pid, timed=phases_at is not None)
        folds, done = self.place.consume(argv, lambda lines: fold_perf_phases(lines, at, **starts), STOP_DEADLINE_S)
        if done.status != 0 and not folds:
            raise PerflabError(
                f"perf script{self.place.where} failed (exit {done.status}): {done.stderr.strip()[-400:]}",
                f"perf.data: {self.data}",
            )
        if lost := lost_chunks(done.stderr):
            raise PerflabError(
                f"perf lost {lost} chunk(s) of samples{self.place.where} (its buffer was full): "
                "the profile would undercount",
                'set a lower frequency under [observe.perf], or call_graph = "fp" (dwarf copies 16 KiB per sample)',
            )
        return folds


def buildid_dir(debug_files: dict[str, Path], into: Path) -> Path | None:
    """A build-ID directory for `perf --buildid-dir` that holds the debug files of a private root's
    binaries (their -dbgsym's, unpacked in the root: perf looks only in the system's
    /usr/lib/debug and its own cache), as `.build-id/XX/REST` links; None when there are none.
    perf reads the binary's build ID itself (the recording has none: -B)."""
    if not debug_files:
        return None
    for ident, path in debug_files.items():
        link = into / ".build-id" / ident[:2] / ident[2:]
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(path)
    return into


def lost_chunks(stderr: str) -> int:
    """The runs of events perf lost, from the warning `perf script` prints on stderr:
    "Processed 22269 events and lost 27 chunks!" (0: none lost)."""
    found = LOST.search(stderr)
    return int(found.group(1)) if found else 0


def descendants(tasks: str, pid: int) -> list[int]:
    """`pid` and its descendants (sorted) from `perf report --tasks` text, whose lines are
    `pid tid ppid |comm` (a thread's line has its process's pid; `#` lines are headers)."""
    parent: dict[int, int] = {}
    for line in tasks.splitlines():
        fields = line.split(None, 3)
        if len(fields) >= 3 and not line.lstrip().startswith("#") and fields[0] == fields[1]:
            with contextlib.suppress(ValueError):
                parent[int(fields[0])] = int(fields[2])
    children: dict[int, list[int]] = {}
    for child, ppid in parent.items():
        children.setdefault(ppid, []).append(child)
    found, todo = {pid}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return sorted(found)


# perf report --header-only, with `-k`: `# reference time: 2026-11-28 11:58:18.436076 = 1795867098.436076
# (TOD) = 84599.324839524 (monotonic)`, both clocks read at perf's start
_REFERENCE = re.compile(r"# reference time: .* = (\d+\.\d+) \(TOD\) = (\d+\.\d+) \(monotonic\)")


def wall_minus_monotonic(header: str) -> float | None:
    """The wall clock minus CLOCK_MONOTONIC where perf recorded, from its reference time (None: none)."""
    found = _REFERENCE.search(header)
    return float(found.group(1)) - float(found.group(2)) if found else None
