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

`perf script -F tid,ip,sym,dso` prints, per sample, a header line then one line per frame,
leaf first (user addresses are relative to their binary), and a blank line:
    mariadbd 30391
    \t          8a78c9 [unknown] (/usr/sbin/mariadbd)
    \tffffffff82265df3 schedule ([kernel.kallsyms])
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from perflab.errors import PerflabError
from perflab.run.observers.elf import FunctionStarts
from perflab.run.proc import Child, guarded
from perflab.store.folded import KERNEL_MARK

# Frames a complete stack starts from; a stack whose root is anything else was cut short.
ROOTS = frozenset(
    {
        "start_thread",
        "__clone3",
        "__clone",
        "clone",
        "clone3",
        "_start",
        "__libc_start_main",
        "__libc_start_call_main",
        "ret_from_fork_k",
        "ret_from_fork" + KERNEL_MARK,
    }
)
KERNEL_DSOS = ("[kernel.kallsyms]", "[guest.kernel.kallsyms]")
DWARF_STACK_BYTES = 16384
STOP_DEADLINE_S = 60.0
LOST = re.compile(r"Processed \d+ events and lost (\d+) chunks")


@dataclass
class FoldStats:
    samples: int = 0
    complete: int = 0  # stacks that reach a thread's entry point
    unnamed_frames: int = 0  # frames named binary+0xSTART (no symbol)
    frames: int = 0
    unknown_frames: int = 0  # no binary either
    dsos: dict[str, str] = field(default_factory=dict)


StartsLoader = Callable[[str], FunctionStarts]


class FrameNamer:
    """Turns one `perf script` frame line into a frame name, caching by line text. `starts`
    gives a binary's function starts (tests pass recorded ones)."""

    def __init__(self, starts: StartsLoader = FunctionStarts.load) -> None:
        self.starts = starts
        self.cache: dict[str, tuple[str, str, int]] = {}  # line -> (frame, dso, kind 0 named/1 unnamed/2 unknown)

    def __call__(self, line: str) -> tuple[str, str, int]:
        hit = self.cache.get(line)
        if hit is None:
            hit = self.cache[line] = self._name(line)
        return hit

    def _name(self, line: str) -> tuple[str, str, int]:
        addr, _, rest = line.strip().partition(" ")
        sym, _, dso = rest.rpartition(" (")
        dso = dso.removesuffix(")")
        if not sym:  # no "(dso)" part
            sym, dso = rest, "[unknown]"
        sym = sym.replace(";", ":")
        if dso in KERNEL_DSOS:
            return sym + KERNEL_MARK, "[kernel]", 0
        if sym != "[unknown]":
            return sym, os.path.basename(dso), 0
        if dso.startswith("/"):
            try:
                return self.starts(dso).name(int(addr, 16)), os.path.basename(dso), 1
            except ValueError:
                pass
        return "[unknown]", dso, 2


def fold_perf_script(lines: Iterable[str], starts: StartsLoader = FunctionStarts.load) -> tuple[Counter, FoldStats]:
    """Folded stacks (root first) and statistics from `perf script -F tid,ip,sym,dso` text."""
    return fold_perf_phases(lines, None, starts).get(MEASURED) or (Counter(), FoldStats())


PhasesAt = Callable[[float], tuple[str, ...]]
MEASURED = "measured"


def fold_perf_phases(
    lines: Iterable[str], phases_at: PhasesAt | None = None, starts: StartsLoader = FunctionStarts.load
) -> dict[str, tuple[Counter, FoldStats]]:
    """Per phase, folded stacks (root first) and statistics from `perf script -F tid,time,ip,sym,dso`
    text: `phases_at(t)` names the phases a sample taken at `t` (the header's time) belongs to;
    without it every sample is "measured" (and the text needs no time field).

    The hot loop does one dict lookup per frame line: a line's text maps to a frame number
    (perf prints the same line for the same address), a sample is a tuple of numbers, and
    names, binaries and statistics are worked out once per unique stack at the end.
    """
    namer = FrameNamer(starts)
    index: dict[str, int] = {}
    table: list[tuple[str, str, int]] = []
    counts: dict[tuple[tuple[str, ...], tuple[int, ...]], int] = {}
    frames: list[int] = []
    phases: tuple[str, ...] = (MEASURED,)
    get = index.get
    for line in lines:
        if line[:1] == "\t":
            i = get(line)
            if i is None:
                i = index[line] = len(table)
                table.append(namer(line))
            frames.append(i)
            continue
        if frames:  # a blank line or the next header ends the sample
            key = (phases, tuple(reversed(frames)))
            counts[key] = counts.get(key, 0) + 1
            frames.clear()
        if phases_at is not None and line.strip():  # "27048 24280.313358: ": the time ends the header
            phases = phases_at(float(line.split()[-1].rstrip(":")))
    if frames:
        key = (phases, tuple(reversed(frames)))
        counts[key] = counts.get(key, 0) + 1
    by_phase: dict[str, dict[tuple[int, ...], int]] = {}
    for (names, key), n in counts.items():
        for phase in names:
            into = by_phase.setdefault(phase, {})
            into[key] = into.get(key, 0) + n
    return {phase: _summarise(c, table) for phase, c in by_phase.items()}


def _summarise(counts: dict[tuple[int, ...], int], table: list[tuple[str, str, int]]) -> tuple[Counter, FoldStats]:
    stacks: Counter = Counter()
    stats = FoldStats()
    kinds = [0, 0, 0]
    for key, n in counts.items():
        stacks[";".join(table[i][0] for i in key)] += n
        stats.samples += n
        stats.complete += n if table[key[0]][0] in ROOTS else 0
        for i in key:
            kinds[table[i][2]] += n
    for frame, dso, _kind in table:
        stats.dsos.setdefault(frame, dso)
    stats.frames, stats.unnamed_frames, stats.unknown_frames = sum(kinds), kinds[1], kinds[2]
    return stacks, stats


class PerfRecorder:
    """`perf record` system-wide at `frequency` Hz, enabled for the window only."""

    def __init__(
        self, pid: int, workdir: Path, *, frequency: int = 99, call_graph: str = "fp", enabled: bool = True
    ) -> None:
        self.pid = pid
        self.enabled = enabled  # False: recording starts at the first resume()
        self.workdir = Path(workdir)
        self.frequency = frequency
        self.call_graph = call_graph
        self.data = self.workdir / f"perf-{pid}.data"
        self.child: Child | None = None
        self.seconds = 0.0
        self._started = 0.0
        self.span = (0.0, 0.0)  # CLOCK_MONOTONIC seconds recorded: from the first enable to the stop
        self.failure: str | None = None  # why the recording does not cover its span (check() raises it)

    def events(self) -> list[str]:
        """What to record: cpu-clock samples at the frequency, with call graphs."""
        graph = ["-g"] if self.call_graph == "fp" else ["--call-graph", f"dwarf,{DWARF_STACK_BYTES}", "-m", "16M"]
        return ["-e", "cpu-clock", "-F", str(self.frequency), *graph]

    def argv(self, ctl: Path, ack: Path) -> list[str]:
        # -B -N: no build-id work at the end (perflab folds right away, on this machine);
        # --no-bpf-event: no side-band thread, whose 1 s poll timeout made every stop take ~0.9 s
        return [
            "perf",
            "record",
            "-a",
            *self.events(),
            "-o",
            str(self.data),
            "-B",
            "-N",
            "--no-bpf-event",
            "-q",
            "-k",
            "CLOCK_MONOTONIC",  # sample times on time.monotonic()'s clock: phases are cut by time
            "-D",
            "-1",
            "--control",
            f"fifo:{ctl},{ack}",
        ]

    def __enter__(self) -> Self:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ctl, ack = self.workdir / f"perf-{self.pid}.ctl", self.workdir / f"perf-{self.pid}.ack"
        for fifo in (ctl, ack):
            fifo.unlink(missing_ok=True)
            os.mkfifo(fifo)
        self._log = (self.workdir / f"perf-{self.pid}.log").open("w", encoding="utf-8")
        self.child = Child(self.argv(ctl, ack), stdout=self._log, stderr=subprocess.STDOUT)
        try:
            # opening blocks until perf opens its end: a perf that dies first would hang us
            self._ctl = _open_fifo(ctl, os.O_WRONLY, self.child)
            self._ack = _open_fifo(ack, os.O_RDONLY, self.child)
            if self.enabled:
                self._command("enable")
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
        os.write(self._ctl, f"{word}\n".encode())
        deadline = time.monotonic() + 30
        reply = b""
        while b"ack" not in reply:
            if time.monotonic() > deadline or self.child is None or self.child.poll() is not None:
                raise PerflabError(f"perf record did not acknowledge '{word}'", f"see {self._log.name}")
            try:
                chunk = os.read(self._ack, 64)
            except BlockingIOError:
                chunk = b""
            if not chunk:  # nothing yet (or perf has not opened its end)
                time.sleep(0.005)
            reply += chunk

    def __exit__(self, *exc: object) -> None:
        assert self.child is not None
        try:
            stopped = time.monotonic()
            self.seconds = stopped - self._started if self.enabled else 0.0
            self.span = (self._started, stopped) if self.enabled else (stopped, stopped)
            self.failure = self._stop()
        finally:
            self.child.kill()
            for fd in (getattr(self, "_ctl", None), getattr(self, "_ack", None)):
                if fd is not None:
                    os.close(fd)
            self._log.close()

    def _stop(self) -> str | None:
        """Stop perf; why its recording is not whole, if it is not (an early exit, a failed
        or unfinished write). Not raised here: an exception may be on its way out already."""
        assert self.child is not None
        code = self.child.poll()
        if code is not None:
            return f"perf record exited (code {code}) before it was stopped: its recording does not cover the window"
        self._command("disable")
        self.child.signal_group(signal.SIGINT)  # perf writes its header and exits
        try:
            code = self.child.wait(STOP_DEADLINE_S)
        except TimeoutError:
            return f"perf record did not finish writing {self.data.name} within {STOP_DEADLINE_S:.0f} s of its stop"
        if code not in (0, -signal.SIGINT):  # perf re-raises the SIGINT it stopped on
            return f"perf record exited with code {code} when stopped: {self.data.name} may be incomplete"
        return None

    def check(self) -> None:
        """PerflabError if the recording does not cover what it was to (see _stop)."""
        if self.failure is not None:
            raise PerflabError(self.failure, f"see {self._log.name}; run `perflab doctor`")

    def script_argv(self, pid: int | Sequence[int] | None = None, timed: bool = False) -> list[str]:
        """`perf script` of one process's samples (default: the server's), or of several (a
        PostgreSQL server's tree), only the fields folding needs (less text to parse), with each
        sample's time when `timed`."""
        fields = "tid,time,ip,sym,dso" if timed else "tid,ip,sym,dso"
        pids = ",".join(map(str, pid)) if isinstance(pid, Sequence) else str(pid or self.pid)
        return ["perf", "script", "-i", str(self.data), "--pid", pids, "-F", fields]

    def descendants(self, pid: int | None = None) -> list[int]:
        """`pid` (default: the server) and every process it forked, as the recording saw them:
        perf tracks forks system-wide even while sampling is disabled, and lists the tasks
        of existing processes at its start, so a backend forked at any time before the stop is
        found, even one that exited before anyone listed /proc (`perf report --tasks`)."""
        argv = guarded(["perf", "report", "-i", str(self.data), "--tasks", "-q"])
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=STOP_DEADLINE_S)
        if done.returncode != 0:
            raise PerflabError(f"perf report --tasks failed (exit {done.returncode}): {done.stderr.strip()[-400:]}",
                               f"perf.data: {self.data}")  # fmt: skip
        return descendants(done.stdout, pid or self.pid)

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
        if not self.data.is_file():
            raise PerflabError(f"perf record wrote no {self.data.name}", f"see {self._log.name}")
        argv = guarded(self.script_argv(pid, timed=phases_at is not None))
        first = pid[0] if isinstance(pid, Sequence) and pid else pid
        errors = self.workdir / f"perf-{self.pid}.script.{first or self.pid}.log"
        with (
            errors.open("w", encoding="utf-8") as err,
            subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=err,
                encoding="utf-8",
                errors="replace",
                bufsize=1 << 20,
                start_new_session=True,
            ) as proc,
        ):
            try:
                assert proc.stdout is not None
                folds = fold_perf_phases(proc.stdout, phases_at)
                code = proc.wait(STOP_DEADLINE_S)
            finally:
                proc.kill()
        said = errors.read_text(encoding="utf-8", errors="replace")
        if code != 0 and not folds:
            raise PerflabError(f"perf script failed (exit {code}): {said.strip()[-400:]}", f"perf.data: {self.data}")
        if lost := lost_chunks(said):
            raise PerflabError(
                f"perf lost {lost} chunk(s) of samples (its buffer was full): the profile would undercount",
                'set a lower frequency under [observe.perf], or call_graph = "fp" (dwarf copies 16 KiB per sample)',
            )
        return folds


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


def _open_fifo(path: Path, flags: int, child: Child) -> int:
    """Open a FIFO whose other end `child` opens, without hanging if the child dies first."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return os.open(path, flags | os.O_NONBLOCK)
        except OSError:  # ENXIO: perf has not opened its end yet
            if child.poll() is not None or time.monotonic() > deadline:
                raise PerflabError(
                    "perf record exited before it opened its control FIFO",
                    "run `perflab doctor`; perf_event_paranoid or a missing linux-perf",
                ) from None
            time.sleep(0.02)
