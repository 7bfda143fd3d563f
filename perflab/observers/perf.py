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
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from perflab import debuginfo
from perflab.errors import PerflabError
from perflab.observers.perf_script import MEASURED, FoldStats, PhasesAt, fold_perf_phases
from perflab.places.proc import Child, guarded

DWARF_STACK_BYTES = 16384
STOP_DEADLINE_S = 60.0
LOST = re.compile(r"Processed \d+ events and lost (\d+) chunks")


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
        self.buildid_dir: Path | None = None  # perf's build-ID directory: a private root's debug files

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
        self.buildid_dir = buildid_dir(debuginfo.root_debug_files(self.pid), self.workdir / f"perf-{self.pid}.debug")
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
        found = ["--buildid-dir", str(self.buildid_dir)] if self.buildid_dir is not None else []
        return ["perf", *found, "script", "-i", str(self.data), "--pid", pids, "-F", fields]

    def descendants(self, pid: int | None = None) -> list[int]:
        """`pid` (default: the server) and every process it forked, as the recording saw them:
        perf tracks forks system-wide even while sampling is disabled, and lists the tasks
        of existing processes at its start, so a backend forked at any time before the stop is
        found, even one that exited before anyone listed /proc (`perf report --tasks`)."""
        argv = guarded(["perf", "report", "-i", str(self.data), "--tasks", "-q"])
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=STOP_DEADLINE_S)
        if done.returncode != 0:
            raise PerflabError(
                f"perf report --tasks failed (exit {done.returncode}): {done.stderr.strip()[-400:]}",
                f"perf.data: {self.data}",
            )
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
