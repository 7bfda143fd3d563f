"""`[observe] alloc` of a server on a server host (`[experiment] server_host`, docs/hosts.md).

The counter (perflab_alloc.so) is built here, as for a local server, and copied into the host's run
directory once per run (SFTP). The cell's counter file is made in the cell's directory there (the
host's tmpfs): its header sent, the rest left sparse. The server there starts with the counter first
in LD_PRELOAD and PERFLAB_ALLOC_FILE naming that file (servers/mysqld_host.py). The window is the
local one (AllocTracer.armed, window): the file is read over the SSH link at its start and end (the
header and the slots in use, base64 on the wire), sampling is switched on and off by writing its
period word there, and the allocator's syscalls are counted by `perf record` of their tracepoints
on the host (SyscallRecorder on the host's place: its control FIFOs driven there), listed there by
`perf script`. The sampled stacks are
named here from the server's maps there and the host's binaries (the same files, or the run's
copies: host_binaries.HostStarts), and stored as a local cell's (alloc/profile.store_alloc).

    tracer = of_cell(observe.alloc, kind.profiles_tree, place, rundir)   # before the server (alloc=tracer)
    tracer.check_started(server.pid)                  # loaded there, once, and counting
    with tracer.armed(server.pid, rundir):            # perf started there, its events off
        read, sampler = server_reads(runner, server)  # the window: spanning(sampler, tracer, pid)
    observed(runner, cell.order, server, measured)    # the cell's `alloc`, its stacks stored
"""

from __future__ import annotations

import base64
import contextlib
import math
import os
from pathlib import Path, PurePosixPath
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from perflab.hosts.clock import WindowClock
from perflab.hosts.place import HostPlace
from perflab.hosts.rundir import RunDir
from perflab.observers import alloc
from perflab.observers.alloc.tracer import AllocTracer
from perflab.observers.host_binaries import HostStarts, HostSymbolizer
from perflab.observers.syscalls import SyscallRecorder
from perflab.spec.observe import AllocObserve

if TYPE_CHECKING:
    from perflab.servers.kind import ServerHostPlace

EXTRA_SLOTS = 64  # read beyond the slots in use: a thread that takes one between the reads is counted
# $0: the file; $1: the header's base64; $2: the file's size. The cell's directory made first
_CREATE = 'mkdir -p "${0%/*}" && printf %s "$1" | base64 -d > "$0" && truncate -s "$2" "$0"'
# $0: the file; $1: byte offset of slots_used; $2: slots read beyond it; $3: a slot's bytes; $4: the header's.
# The host's wall clock first, on a line of its own: the snapshot's time (aligned_span)
_SLOTS = 'date +%s.%N && u=$(od -An -tu8 -j "$1" -N 8 "$0") && head -c $(($4 + (u + $2) * $3)) "$0" | base64 -w0'
# $0: the file; $1: from this byte (1 = the first); $2: this many bytes
_RANGE = 'tail -c +"$1" "$0" | head -c "$2" | base64 -w0'
# $0: the file; $1: 8 bytes (base64) written at word $2
_WORD = 'printf %s "$1" | base64 -d | dd of="$0" oflag=nofollow bs=8 seek="$2" conv=notrunc status=none'


class RemoteAllocTracer(AllocTracer):
    """AllocTracer whose counter file is on the server's host (`remote_dir`: the cell's directory
    there), read and written over the host's SSH link; `there`: the counter's copy on the host."""

    def __init__(
        self, spec: AllocObserve, rundir: RunDir, remote_dir: str, local: Path, cache: Path, tree: bool = False
    ) -> None:
        self.host, self.remote_dir, self.link, self.local = rundir, remote_dir, rundir.link, local
        super().__init__(spec, local, cache, tree)
        self.there = HostPlace(self.link.name, rundir).install(self.shim)  # 0755: loaded by the postgres account too
        self._walls: list[float] = []  # the host's wall clock at each read of the window (_read)
        self.walls: tuple[float, float] | None = None

    def _created(self, rundir: Path) -> Any:
        path = PurePosixPath(self.remote_dir) / "alloc-counters.bin"
        header = base64.b64encode(alloc.header(sample_capacity=self.spec.samples)).decode()
        done = self.link.run(
            ["sh", "-c", _CREATE, str(path), header, str(alloc.file_bytes(sample_capacity=self.spec.samples))]
        )
        if done.status != 0:
            raise alloc.AllocTracerError(
                f"host {self.link.name}: cannot make the counter file {path}: {done.stderr.strip()[-300:]}",
                f"free space in {self.host.path} there (its tmpfs)",
            )
        return path

    def _run(self, script: str, *args: object) -> np.ndarray:
        return self._words(self._ran(script, *args))

    def _ran(self, script: str, *args: object) -> str:
        done = self.link.run(["sh", "-c", script, str(self.file), *map(str, args)], timeout=120)
        if done.status != 0:
            raise alloc.AllocTracerError(
                f"host {self.link.name}: reading the counter file {self.file} failed: {done.stderr.strip()[-300:]}",
                "was the cell's directory there removed?",
            )
        return done.stdout

    @staticmethod
    def _words(text: str) -> np.ndarray:
        data = base64.b64decode(text)
        return np.frombuffer(data[: len(data) // 8 * 8], dtype="<u8")

    def _header(self) -> np.ndarray:
        return alloc.checked(self._run(_RANGE, 1, alloc.HEADER_BYTES), f"{self.link.name}:{self.file}")

    def _loaded(self, pid: int) -> bool:
        maps = self.link.run(["cat", f"/proc/{pid}/maps"], timeout=60).stdout.splitlines()
        return any(os.path.basename(line.rstrip()) == self.shim.name for line in maps)

    def _claim(self) -> alloc.Claim:
        return alloc.claim_of(self._header())

    def _read(self) -> alloc.Counts:
        out = self._ran(_SLOTS, alloc._SLOTS_USED * 8, EXTRA_SLOTS, alloc.SLOT_WORDS * 8, alloc.HEADER_BYTES)
        wall, _, text = out.partition("\n")
        try:
            self._walls.append(float(wall))
        except ValueError:  # a date without %N: the span as sent (aligned_span)
            self._walls.append(math.nan)
        return alloc.counts_of(alloc.checked(self._words(text), f"{self.link.name}:{self.file}"))

    @contextlib.contextmanager
    def window(self, pid: int, workdir: Path) -> Iterator[AllocTracer]:
        """AllocTracer.window, the host's wall clock at its two reads kept (`walls`)."""
        self._walls = []
        with super().window(pid, workdir) as tracer:
            yield tracer
        first, last = self._walls[0], self._walls[-1]
        self.walls = None if math.isnan(first) or math.isnan(last) else (first, last)

    def aligned_span(self, clock: WindowClock | None) -> tuple[float, float] | None:
        """The counts' span on this machine's clock: the host's times of its two snapshots put on it by
        the window's readings of the host's clock (`clock`: the RSS sampler's). Without them, `span`:
        from before the first read was sent to before the last one was (each snapshot is taken half a
        round trip later, on a loaded machine tenths of a second: pgbench runs on past the end mark,
        and its transactions of that stretch were counted, not covered)."""
        alignment = clock.alignment if clock is not None else None
        if alignment is None or self.walls is None:
            return self.span
        return alignment.monotonic(self.walls[0]), alignment.monotonic(self.walls[1])

    def _sample(self, period: int) -> None:
        word = base64.b64encode(int(period).to_bytes(8, "little")).decode()
        self._run(_WORD, word, alloc._PERIOD)

    def _samples(self) -> tuple[list[alloc.Sample], int]:
        header = self._header()
        size = alloc.ring_used(header) * alloc.SAMPLE_WORDS * 8
        ring = self._run(_RANGE, alloc.ring_start(header) * 8 + 1, size) if size else np.zeros(0, dtype="<u8")
        return alloc.samples_of(header, ring, self.spec.period)

    def naming(self, pid: int) -> tuple[HostSymbolizer, str]:
        """The server's maps there, named from the host's binaries (the same files here, or the run's
        copies: HostStarts, once per run) and the counter's copy there as the one built here."""
        link = self.link
        maps = link.run(["cat", f"/proc/{pid}/maps"], timeout=60).stdout
        starts = HostStarts(link, self.local.parent / "host-binaries")
        exe = link.run(["readlink", f"/proc/{pid}/exe"]).stdout.strip()
        return HostSymbolizer(maps, starts, {self.there: str(self.shim)}), f"{link.name}:{exe}"

    def _recorder(self, pid: int, workdir: Path) -> SyscallRecorder:
        """perf of the allocator's syscalls on the host, started with its events off."""
        return SyscallRecorder(pid, self.remote_dir, enabled=False, tree=self.tree, place=HostPlace(self.link.name, self.host))


class Spanning:
    """A window's RSS sampler (its samples, its clock) whose span is also the counter's window:
    entered at the window's start, left at its end (run/window.py, hosts/client.py), or
    at the end mark (end_mark: pgbench's windows, which its tail outlasts).
    The counter's window opens first: the sampler's start there (its loop, the host's clock) takes
    round trips the window's counts would otherwise miss."""

    def __init__(self, sampler: Any, tracer: AllocTracer, pid: int, workdir: Path) -> None:
        self.sampler, self.tracer, self.pid, self.workdir = sampler, tracer, pid, workdir
        self._stack = contextlib.ExitStack()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sampler, name)

    def __enter__(self) -> Self:
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.tracer.window(self.pid, self.workdir))
            self._counting = stack.pop_all()
        try:
            self.inner = self.sampler.__enter__()
        except BaseException:
            self._counting.close()
            raise
        return self.inner

    def end_mark(self) -> None:
        """The window ends now (perflab's end mark: pgbench's window is cut there, and it runs on for
        its tail): the counts stop here, the sampler runs on to its own end."""
        self._counting.close()

    def __exit__(self, *exc: object) -> bool | None:
        try:
            return self.sampler.__exit__(*exc)  # type: ignore[no-any-return]
        finally:
            self._counting.close()


def of_cell(spec: AllocObserve | None, tree: bool, place: ServerHostPlace, rundir: Path) -> RemoteAllocTracer | None:
    """The cell's tracer on the server host (`place`: hosts/server.ServerHost), None without
    [observe] alloc (`spec`); the counter built once per run into the local work directory. `tree`:
    the server is a process tree (PostgreSQL: the postmaster's backends count, and make syscalls, too)."""
    if spec is None:
        return None
    remote_dir = f"{place.rundir.path}/{rundir.name}"
    return RemoteAllocTracer(spec, place.rundir, remote_dir, rundir, rundir.parent / "alloc-build", tree)


def alloc_span(server: Any, clock: WindowClock | None) -> tuple[float, float] | None:
    """The span of the server's [observe] alloc counts on this machine's clock (aligned_span: `clock`,
    the window's readings of the host's), None without them."""
    tracer: RemoteAllocTracer | None = getattr(server, "alloc", None)
    return tracer.aligned_span(clock) if tracer is not None else None


def end_mark(sampler: Any) -> None:
    """[observe] alloc's counts end at the window's end mark when `sampler` spans them (Spanning)."""
    if isinstance(sampler, Spanning):
        sampler.end_mark()


def spanning(sampler: Any, server: Any) -> Any:
    """`sampler` (the server's RSS over the window), with [observe] alloc's window as its span."""
    tracer = getattr(server, "alloc", None)
    return sampler if tracer is None else Spanning(sampler, tracer, server.pid, server.rundir)


@contextlib.contextmanager
def armed(server: Any) -> Any:
    """The cell's tracer armed (perf started there) from the server's start to the window's end."""
    tracer = getattr(server, "alloc", None)
    if tracer is None:
        yield None
        return
    with tracer.armed(server.pid, server.rundir):
        yield tracer


def observed(results: Any, cell_id: int, server: Any, measured: dict[str, Any], covered: Any = None) -> None:
    """The cell's `alloc` into `measured`, and its sampled stacks stored (named while the server runs:
    its maps are read there). `covered`: the window's transactions -> those its counts cover (over their
    own span: accounting.share); None: all of them."""
    from perflab.observers.alloc.profile import alloc_figures, store_alloc

    tracer: RemoteAllocTracer | None = getattr(server, "alloc", None)
    if tracer is None:
        return
    transactions = alloc_figures(tracer, measured, covered)
    if tracer.spec.stacks:
        store_alloc(results, cell_id, transactions, tracer, server.pid)
