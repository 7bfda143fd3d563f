"""perf and the stack sampler where a remote server runs (`[observe] perf`, `pmp` with `server_host`,
docs/hosts.md): `perf record` (PerfRecorder on the host's place) and an `eu-stack` loop run on the
server's host, in the run directory's wrapper (tagged, stopped with the run), against the server's
pid there. perf's times are put on the host's wall clock by its reference time, and the sampler
stamps each sample with the host's `$EPOCHREALTIME`; a kind whose
server is a process tree (PostgreSQL: Kind.profiles_tree) has the tree's profiles, as locally; the cell's
window reads the host's clock at its start and end (hosts/clock.WindowClock), and the samples are put
on this machine's CLOCK_MONOTONIC with those readings, so the phases (window, warm-up, stalls) are
cut as locally. The recording is folded on the host by `perf script` (the host's binaries name the
frames) and its text fetched back; the folded stacks go through the same pipeline as a local
profile (Profilers.store: profiles/ and the profiles table), so `perflab profile` and `perflab diff`
read them alike. Frames the host's tools cannot name (a stripped binary) are named from its function
starts as locally (`mariadbd+0xSTART`): the same file here, else a copy fetched once per run.

    with RemoteProfilers(spec.observe, pid, local_dir, place.rundir, remote_dir, clock, binary) as prof:
        prof.workload_starting(); ...; prof.window_started(); run_window()
    prof.store(results, cell_id, spans)
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from perflab.errors import HostLostError, PerflabError
from perflab.hosts.clock import WindowClock
from perflab.hosts.place import HostPlace
from perflab.hosts.rundir import RunDir
from perflab.observers.elf import FunctionStarts
from perflab.observers.host_binaries import HostStarts, unnamed
from perflab.observers.perf import PerfRecorder
from perflab.observers.phases import Spans
from perflab.observers.pmp import ModuleMap, parse_eu_stack
from perflab.observers.profilers import Profilers
from perflab.spec.observe import ObserveSection

# $0: the pid, $1: the interval. Each sample: its time on the host's clock, eu-stack's text, an end mark
_SAMPLER = (
    'while [ -d "/proc/$0" ]; do echo "T $EPOCHREALTIME"; eu-stack -m -p "$0" 2>/dev/null; echo E; sleep "$1"; done'
)
# the same over a process tree (PostgreSQL: the postmaster and its children, listed by the kernel's
# /proc/PID/task/TID/children at each sample); eu-stack heads each process's stacks with "PID N"
_TREE_SAMPLER = (
    'while [ -d "/proc/$0" ]; do echo "T $EPOCHREALTIME"; '
    'for p in "$0" $(cat /proc/"$0"/task/*/children 2>/dev/null); do eu-stack -m -p "$p" 2>/dev/null; done; '
    'echo E; sleep "$1"; done'
)


class RemoteStackSampler:
    """StackSampler's interface (observers/pmp.py, tool eu-stack) for the server on its host: a
    loop there runs `eu-stack -m -p PID` every `interval`, each sample stamped with the host's clock;
    with `tree`, of PID and each of its children at that sample (PostgreSQL's backends: forked
    from the postmaster without exec, they map what it maps, so its maps name their frames)."""

    tool = "eu-stack"

    def __init__(
        self,
        rundir: RunDir,
        pid: int,
        clock: WindowClock,
        interval: float,
        starts: Callable[[str], FunctionStarts] = unnamed,
        tree: bool = False,
    ) -> None:
        self.rundir, self.pid, self.clock, self.interval, self.starts = rundir, pid, clock, interval, starts
        self.tree = tree
        self.processes: list[int] = []  # with tree: the members sampled, in order of appearance
        self.dsos: dict[str, str] = {}
        self.waiting = False
        self.origin = 0.0
        self.span = (0.0, 0.0)
        self._samples: list[tuple[float, str]] = []  # (host's wall clock, eu-stack's text)
        self._thread = threading.Thread(target=self._read, name="remote-pmp", daemon=True)

    def __enter__(self) -> Self:
        maps = self.rundir.link.run(["cat", f"/proc/{self.pid}/maps"], timeout=60)
        if maps.status != 0:
            raise PerflabError(f"host {self.rundir.link.name}: pid {self.pid}'s maps are unreadable", maps.stderr)
        self._modules = ModuleMap(maps.stdout, self.starts)
        self._started = time.monotonic()
        loop = _TREE_SAMPLER if self.tree else _SAMPLER
        self._proc, self._loop_pid = self.rundir.start(["bash", "-c", loop, str(self.pid), f"{self.interval:g}"])
        self._thread.start()
        return self

    def _read(self) -> None:
        stamp, text = None, []
        with contextlib.suppress(HostLostError, TimeoutError):
            for line in self._proc.lines():
                if line.startswith("T "):
                    stamp, text = float(line[2:]), []
                elif line.strip() == "E" and stamp is not None:
                    self._samples.append((stamp, "".join(text)))
                    stamp = None
                else:
                    text.append(line)

    def resume(self) -> None:
        pass  # started when its phase begins: never paused

    def __exit__(self, *exc: object) -> None:
        self.span = (self._started, time.monotonic())
        with contextlib.suppress(HostLostError):
            self.rundir.signal(self._loop_pid, "KILL")
        self._thread.join(10)

    def covered(self) -> tuple[float, float]:
        return self.span

    def rows(self) -> list[tuple[float, int, list[str]]]:
        """(t, tid, frames root first) per thread per sample; t in seconds since `origin` (the span's
        start on this machine's CLOCK_MONOTONIC), each sample's host time aligned."""
        aligned = self.clock.require()
        self.origin = self.span[0]
        if self.tree:
            seen = (
                int(line.split()[1])
                for _, text in self._samples
                for line in text.splitlines()
                if line.startswith("PID ")
            )
            self.processes = list(dict.fromkeys(seen))
        return [
            (round(aligned.monotonic(stamp) - self.origin, 3), tid, frames)
            for stamp, text in self._samples
            for tid, frames in parse_eu_stack(text, self._modules, self.dsos)
        ]

    def cost(self) -> None:
        return None  # eu-stack's own cost is not measured (the libdw sampler's is, locally)


class RemoteProfilers(Profilers):
    """Profilers for a process on its host: perf and pmp (eu-stack) run there, of one target: the
    server's (here), or the workload's client's (remote_client_profilers.ClientHostProfilers). `clock`:
    the host's clock read over the window (the server's RSS sampler's), else one of its own, read when
    the workload starts and when the profilers stop."""

    target = "server"

    def __init__(
        self,
        observe: ObserveSection,
        pid: int | None,
        workdir: Path,
        rundir: RunDir,
        remote_dir: str,
        clock: WindowClock | None,
        tree: bool = False,
    ) -> None:
        super().__init__(observe, pid or 0, workdir, tree=tree)  # tree: the server's process tree (PostgreSQL)
        self.rundir, self.remote_dir = rundir, remote_dir
        self.own_clock = clock is None
        self.clock = clock if clock is not None else WindowClock(rundir.link)
        self.pids, self.binaries, self.exe = {}, {}, None
        self.starts = HostStarts(rundir.link, self.workdir.parent / "host-binaries")  # once per run
        if pid is not None:
            self._target_is(pid)

    def _target_is(self, pid: int) -> None:
        """The target's pid on the host, and its program there (`binary`: HOST:PATH)."""
        self.pids[self.target] = pid
        self.exe = self.rundir.link.run(["readlink", f"/proc/{pid}/exe"]).stdout.strip() or None
        self.binaries[self.target] = f"{self.rundir.link.name}:{self.exe}" if self.exe else None

    def __enter__(self) -> Self:
        perf = self.observe.perf
        if perf is not None:  # system-wide, not recording; folded by the target's pid at the end
            recorder = PerfRecorder(
                self.pids.get(self.target, 0), self.remote_dir, frequency=perf.frequency, call_graph=perf.call_graph,
                enabled=False, place=HostPlace(self.rundir.link.name, self.rundir), clock=self.clock, starts=self.starts,
            )  # fmt: skip
            self.perf = self._stack.enter_context(recorder)
        return self

    def workload_starting(self) -> None:
        if self.own_clock:
            self.clock.begin()  # before the first sample (perf's warm-up); again when the profilers stop
        super().workload_starting()

    def __exit__(self, *exc: object) -> None:
        try:
            if self.own_clock:
                with contextlib.suppress(HostLostError):
                    self.clock.finish()  # at the window's end, before perf's stop takes its seconds
        finally:
            super().__exit__(*exc)

    def store(self, results: Any, cell_id: int, spans: Spans) -> list[dict[str, Any]]:
        """Profilers.store; the stack quality inspects the host's binary as a file here (HostStarts)."""
        self.inspect = {self.target: self.starts.local(self.exe) if self.exe else None}
        return super().store(results, cell_id, spans)

    def _begin(self, warmup: bool) -> None:
        try:
            perf, pmp, target = self.observe.perf, self.observe.pmp, self.target
            if self.perf is not None and perf is not None and not self.perf.enabled and (perf.warmup or not warmup):
                self.perf.resume()
            if pmp is not None and target in self.pids and target not in self.pmp and (pmp.warmup or not warmup):
                tree = self.tree and target == "server"
                sampler = RemoteStackSampler(
                    self.rundir, self.pids[target], self.clock, pmp.interval, self.starts, tree=tree
                )
                self.pmp[target] = self._stack.enter_context(sampler)  # type: ignore[assignment]
        except BaseException:
            self._stack.close()
            raise

    def remove(self) -> None:
        """The profilers' directory on the host (perf.data, its FIFOs and logs)."""
        with contextlib.suppress(HostLostError):
            self.rundir.link.run(["rm", "-rf", "--one-file-system", self.remote_dir], timeout=120)


class NoProfilers:
    """A cell without [observe] perf or pmp: the same calls, nothing run."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def workload_starting(self) -> None:
        pass

    def workload_started(self, client_pid: int | None = None) -> None:
        pass

    def window_started(self) -> None:
        pass


def of_cell(
    observe: ObserveSection, rundir: RunDir, tree: bool, cell: Any, server: Any, clock: WindowClock | None
) -> RemoteProfilers | NoProfilers:
    """The profilers of a cell whose server runs on a server host (`rundir`: the run's directory there);
    `observe`: [observe] of the server alone (remote_client_profilers.of_target); `tree`: its process tree's."""
    if observe.perf is None and observe.pmp is None:
        return NoProfilers()
    remote_dir = f"{rundir.path}/profile-{cell.order:04d}"
    return RemoteProfilers(observe, server.pid, server.rundir, rundir, remote_dir, clock, tree)

