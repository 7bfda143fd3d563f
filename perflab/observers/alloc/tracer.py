"""`[observe] alloc`: what the server asks of its allocator over the measured window.

Set up before the server starts (the counter must be first in LD_PRELOAD), read around the
window, here or on the server's host (its place: the counter copied there, its file made, read and
written there, perf of the allocator's syscalls run there):

    tracer = AllocTracer(spec.observe.alloc, rundir, cache)   # on a host: place=, there=, naming=
    server = Mysqld(..., env={**cell.env, **tracer.env()}, tracer=tracer.shim)
    tracer.check_started(server.pid)               # loaded once, into the server, and counting
    with tracer.armed(server.pid):                  # before the window: what takes seconds to start
        ...
        with tracer.window(server.pid):
            run_window()
    tracer.check_window(transactions)              # it saw the window's allocations
    row["alloc"] = tracer.fields(transactions)      # per-transaction figures (the cell's `alloc`)
    stacks = tracer.stacks(symbolize)              # folded allocation stacks, weighted in bytes

The cell's `alloc` (export format perflab-results, docs/results-format.md):
    {"calls_per_txn": {"malloc": .., "calloc": .., "realloc": .., "free": .., "memalign": ..,
                       "new": .., "delete": ..},
     "bytes_per_txn": ..,                       # requested by malloc, calloc, realloc, memalign, new
     "syscalls_per_txn": {"mmap": .., "munmap": .., "mprotect": .., "madvise": .., "brk": ..},
     "syscall_bytes_per_txn": {"mmap": .., ...},
     "by_size_class": [{"class": c, "low": bytes, "high": bytes, "calls_per_txn": {op: ..},
                        "bytes_per_txn": ..}, ...],              # classes with any call only
     "transactions": .., "threads": .., "threads_started": .., "started_calls_share": ..,
     "shared_slot_threads": .., "samples": .., "dropped_samples": .., "period": ..}
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import numpy as np

from perflab import allocators
from perflab.errors import PerflabError
from perflab.observers import alloc
from perflab.observers.pmp_sampler import Symbolizer
from perflab.observers.syscalls import SYSCALLS, SyscallCounts, SyscallRecorder
from perflab.places import Aligned, Place
from perflab.places.here import HERE
from perflab.spec.observe import AllocObserve
from perflab.units import size_class_label

ALLOCATING = ("malloc", "calloc", "realloc", "memalign", "new")
SYSCALL_FIGURES = ("syscalls_per_txn", "syscall_bytes_per_txn")
PER_TXN = ("calls_per_txn", "bytes_per_txn", *SYSCALL_FIGURES, "by_size_class")
NO_TRANSACTIONS = "no transactions in the window"

EXTRA_SLOTS = 64  # read beyond the slots in use: a thread that takes one meanwhile is counted
# return addresses, leaf first -> frame names, root first, without the counter's own frames
Symbolize = Callable[[list[int]], list[str]]


def _words(data: bytes) -> np.ndarray:
    return np.frombuffer(data[: len(data) // 8 * 8], dtype="<u8")


def _failed(exc: PerflabError, hint: str) -> alloc.AllocTracerError:
    return alloc.AllocTracerError(f"[observe] alloc: {exc.message}", hint)


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole > 0 else None


def lost_reason(chunks: int) -> str:
    return (
        f"perf lost {chunks} chunk(s) of the syscall tracepoints' events (its buffer was full): the counts "
        "would be too low. Remedy: fewer threads, or syscalls = false under [observe] alloc"
    )


class AllocTracer:
    """The counter of a cell's server, wherever it runs (`place`: here, or its server host, reached
    through the place's file reads and writes: hosts/place.py). `rundir`: the cell's directory here;
    `there`: the cell's directory where the server runs (its counter file's; `rundir` here);
    `naming(pid)`: what names its sampled stacks (None: the process's maps here, Symbolizer)."""

    def __init__(
        self,
        spec: AllocObserve,
        rundir: Path,
        cache: Path,
        tree: bool = False,
        *,
        place: Place = HERE,
        there: str | None = None,
        naming: Callable[[int], Any] | None = None,
    ) -> None:
        self.spec, self.place, self._naming = spec, place, naming
        self.tree = tree  # the server is a process tree (a postmaster): its children's syscalls too
        self.dir = there if there is not None else str(rundir)
        self.shim = alloc.build(cache)
        self.there = place.install(self.shim)  # the counter where the server loads it (a copy on a host)
        self.file = f"{self.dir}/alloc-counters.bin"
        try:
            head, size = alloc.header(sample_capacity=spec.samples), alloc.file_bytes(sample_capacity=spec.samples)
            place.make_file(self.file, head, size)
        except PerflabError as exc:
            raise _failed(exc, f"free space in {self.dir}{place.where}") from None
        self._slots = 1  # slots in use at the last read: the next reads that many and EXTRA_SLOTS more
        self.counts: alloc.Counts | None = None
        self.syscalls: SyscallCounts | None = None
        self.seconds = 0.0
        self.span: tuple[float, float] | None = None  # the window's counts, from and to (time.monotonic())
        self.walls: tuple[float, float] | None = None  # the same, the place's wall clock (a host's)
        self._walls: list[float | None] = []  # at each read of the window's counts (read_bytes')
        self._wall: float | None = None
        self._records: tuple[list[alloc.Sample], int] | None = None
        self._perf: Any = None  # armed(): its SyscallRecorder, started, its events off
        self._stop = contextlib.ExitStack()

    def env(self) -> dict[str, str]:
        return {allocators.TRACER_ENV: self.file}

    def _bytes(self, offset: int, length: int) -> bytes:
        try:
            data, wall = self.place.read_bytes(self.file, offset, length)
        except PerflabError as exc:
            raise _failed(exc, "was the cell's directory removed?") from None
        self._wall = wall
        return data

    def _header(self) -> np.ndarray:
        words = alloc.checked(_words(self._bytes(0, alloc.HEADER_BYTES)), f"{self.file}{self.place.where}")
        self._slots = alloc.slots_used(words)
        return words

    def _loaded(self, pid: int) -> bool:
        maps = self.place.run(["cat", f"/proc/{pid}/maps"], timeout=60).stdout.splitlines()
        return any(os.path.basename(line.rstrip()) == self.shim.name for line in maps)

    def _read(self) -> alloc.Counts:
        """The counts now, in one read of the slots in use (and EXTRA_SLOTS more: a thread that takes
        one meanwhile is counted); read again when more threads took one since the last read."""
        while True:
            present = self._slots + EXTRA_SLOTS
            words = _words(self._bytes(0, alloc.HEADER_BYTES + present * alloc.SLOT_WORDS * 8))
            alloc.checked(words, f"{self.file}{self.place.where}")
            self._slots = alloc.slots_used(words)
            if self._slots <= present:
                self._walls.append(self._wall)
                return alloc.counts_of(words)

    def _sample(self, period: int) -> None:
        try:
            self.place.write_bytes(self.file, alloc._PERIOD * 8, period.to_bytes(8, "little"))
        except PerflabError as exc:
            raise _failed(exc, "was the cell's directory removed?") from None

    def _samples(self) -> tuple[list[alloc.Sample], int]:
        header = self._header()
        size = alloc.ring_used(header) * alloc.SAMPLE_WORDS * 8
        ring = _words(self._bytes(alloc.ring_start(header) * 8, size)) if size else np.zeros(0, dtype="<u8")
        return alloc.samples_of(header, ring, self.spec.period)

    def naming(self, pid: int) -> tuple[Any, str | None]:
        """How the server's sampled stacks are named (a symbolizer: `naming`'s, else its maps here) and
        its binary's name where it runs (a host's: `db:/usr/sbin/mariadbd`)."""
        return (self._naming(pid) if self._naming is not None else Symbolizer(pid)), self.place.program(pid)

    def _recorder(self, pid: int) -> Any:
        """perf of the allocator's syscalls where the server runs, started with its events off."""
        return SyscallRecorder(pid, self.dir, enabled=False, tree=self.tree, place=self.place)

    def check_started(self, pid: int) -> None:
        """The server `pid`, started with env(), runs the counter, once, and counts its calls;
        else AllocTracerError (a cell error: the figures would be zeros or doubled, not measured)."""
        if not self._loaded(pid):
            raise alloc.AllocTracerError(
                f"[observe] alloc: the allocation counter ({self.shim.name}) is not loaded into the server "
                f"(pid {pid}); it would count nothing. The server binary may be static, or something between "
                "perflab and the server dropped LD_PRELOAD (a wrapper script, a setuid binary): run this server "
                "without [observe] alloc"
            )
        state = alloc.claim_of(self._header())
        if state.extra_copies:
            raise alloc.AllocTracerError(
                f"[observe] alloc: the allocation counter is loaded {1 + state.extra_copies} times into the server "
                f"(pid {pid}); each copy would count every call. Remove the other copy (/etc/ld.so.preload, or a "
                "preload that links against perflab_alloc.so)"
            )
        if state.pid != pid:
            raise alloc.AllocTracerError(
                f"[observe] alloc: the allocation counter is loaded into the server (pid {pid}) but "
                + ("has counted no call since it started" if not state.pid else f"counts for process {state.pid}")
                + ": the server does not call malloc through the dynamic linker (an allocator linked in "
                "statically?); run this server without [observe] alloc"
            )

    def check_window(self, transactions: int) -> None:
        """The window's transactions called the allocator: a server that allocates nothing for a
        transaction does not exist, so zero calls mean the counter did not see them."""
        assert self.counts is not None
        if transactions > 0 and not any(self.counts.total_calls(op) for op in alloc.OPS):
            raise alloc.AllocTracerError(
                f"[observe] alloc: the allocation counter counted no call over {transactions} transactions: "
                "the server's allocations do not go through the dynamic linker (an allocator linked in "
                "statically?); run this server without [observe] alloc"
            )

    @contextlib.contextmanager
    def armed(self, pid: int) -> Iterator[AllocTracer]:
        """Starts before the window what takes seconds to start: `perf record` of the allocator's
        syscalls, its events off (perf reads every process's maps at its start: seconds on a busy
        machine, which the window's counts would not cover). Stopped by window() or on leaving."""
        with contextlib.ExitStack() as stack:
            if self.spec.syscalls:
                self._perf = stack.enter_context(self._recorder(pid))
            self._stop = stack.pop_all()
        try:
            yield self
        finally:
            self._perf = None
            self._stop.close()

    @contextlib.contextmanager
    def window(self, pid: int) -> Iterator[AllocTracer]:
        """The measured window: the counts, the sampled stacks and the syscalls (perf enabled)
        from its start to its end, all three over the same span (`walls`: on the place's wall clock)."""
        with contextlib.ExitStack() as armed:
            if self._perf is None:  # not armed before the window: armed now
                armed.enter_context(self.armed(pid))
            recorder = self._perf
            # the counts' snapshots are taken as each read starts (on a host its command runs there at
            # once; the transfer of the counts back, tenths of a second under load, follows): the
            # middle of the read put the opening 0.28 s late in CI where the counts said 0.1 s
            opened, self._walls = time.monotonic(), []
            before = self._read()
            started = time.monotonic()
            try:
                if recorder is not None:
                    recorder.resume()
                if self.spec.stacks:
                    self._sample(self.spec.period)
                yield self
            finally:
                self._sample(0)
                asked = time.monotonic()
                self.seconds = asked - started
                self.counts = self._read().minus(before)
                self.span = (opened, asked)
                first, last = self._walls[0], self._walls[-1]
                self.walls = (first, last) if first is not None and last is not None else None
                self._perf = None
                self._stop.close()  # perf stops: its data is whole only then
        if recorder is not None:
            self.syscalls = recorder.counts()
            self.seconds = recorder.seconds

    def aligned_span(self, clock: Any) -> tuple[float, float] | None:
        """The counts' span on this machine's clock: on a host, its times of the two snapshots put on
        it by the window's readings of its clock (`clock`: the RSS sampler's, hosts/clock.WindowClock).
        Without them, `span`: from before the first read was sent to before the last one was (on a
        host each snapshot is taken half a round trip later, on a loaded machine tenths of a second:
        pgbench runs on past the end mark, and its transactions of that stretch were counted)."""
        alignment: Aligned | None = getattr(clock, "alignment", None)
        if alignment is None or self.walls is None:
            return self.span
        return alignment.monotonic(self.walls[0]), alignment.monotonic(self.walls[1])

    def records(self) -> tuple[list[alloc.Sample], int]:
        """The window's sampled allocations and how many the full ring dropped (read once)."""
        if self._records is None:
            self._records = self._samples() if self.spec.stacks else ([], 0)
        return self._records

    def fields(self, transactions: int) -> dict[str, Any]:
        """The cell's `alloc`. A figure per transaction that cannot be had is null, not 0, and
        `missing` says why: no transactions in the window (then every one of them), or syscalls
        not all counted (perf lost events). With `syscalls = false` the syscall figures are null
        without an entry: not counted, as configured."""
        assert self.counts is not None
        counts, calls = self.counts, self.syscalls
        per = 1 / transactions if transactions else None
        missing: dict[str, Any] = {} if per else dict.fromkeys(PER_TXN, NO_TRANSACTIONS)
        if calls is not None and calls.lost_chunks and per:
            missing.update(dict.fromkeys(SYSCALL_FIGURES, lost_reason(calls.lost_chunks)))
        syscalls = calls if calls is not None and "syscalls_per_txn" not in missing else None
        records, dropped = self.records()
        out = {
            "calls_per_txn": {op: counts.total_calls(op) * per for op in alloc.OPS} if per else None,
            "bytes_per_txn": sum(counts.total_bytes(op) for op in ALLOCATING) * per if per else None,
            "syscalls_per_txn": {n: syscalls.calls[n] * per for n in SYSCALLS} if syscalls and per else None,
            "syscall_bytes_per_txn": {n: syscalls.bytes[n] * per for n in SYSCALLS} if syscalls and per else None,
            "by_size_class": _by_class(counts, per) if per else [],
            "transactions": transactions,
            "threads": counts.threads,
            "threads_started": counts.started,
            "started_calls_share": _share(counts.started_calls, sum(counts.total_calls(op) for op in alloc.OPS)),
            "shared_slot_threads": counts.overflow,
            "samples": len(records),
            "dropped_samples": dropped,
            "period": self.spec.period if self.spec.stacks else None,
        }
        if missing:
            out["missing"] = missing
        return out

    def stacks(self, symbolize: Symbolize) -> Counter:
        """Folded allocation stacks (`frame;frame;op:class count`), weighted in bytes requested:
        the leaf frame is the op and its size class, so one flame graph shows who asks for what."""
        out: Counter = Counter()
        records, _ = self.records()
        for record in records:
            frames = symbolize(record.pcs)
            low, high = alloc.size_class_bounds(min(record.size.bit_length(), alloc.CLASSES - 1))
            leaf = f"{record.op}:{size_class_label(low, high)}"
            out[";".join([*frames, leaf])] += round(record.weight * record.size)
        return out


class Spanning:
    """A window's RSS sampler (its samples, its clock) whose span is also the counter's window:
    entered at the window's start, left at its end (run/window.py), or at the end mark (`end_mark`:
    pgbench's windows, which its tail outlasts). The counter's window opens first: the sampler's
    start on a host (its loop, the host's clock) takes round trips the window's counts would miss."""

    def __init__(self, sampler: Any, tracer: AllocTracer, pid: int) -> None:
        self.sampler, self.tracer, self.pid = sampler, tracer, pid
        self._counting = contextlib.ExitStack()

    @classmethod
    def over(cls, sampler: Any, tracer: AllocTracer | None, pid: int) -> Any:
        """`sampler` (the server's RSS over the window), with [observe] alloc's window (if any) as its span."""
        return sampler if tracer is None else cls(sampler, tracer, pid)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sampler, name)

    def __enter__(self) -> Self:
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.tracer.window(self.pid))
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
            return self.sampler.__exit__(*exc)
        finally:
            self._counting.close()


def end_mark(sampler: Any) -> None:
    """[observe] alloc's counts end at the window's end mark when `sampler` spans them (Spanning)."""
    if isinstance(sampler, Spanning):
        sampler.end_mark()


def _by_class(counts: alloc.Counts, per: float) -> list[dict[str, Any]]:
    rows = []
    for c in range(alloc.CLASSES):
        calls = {op: counts.calls[op][c] * per for op in alloc.OPS if counts.calls[op][c]}
        if not calls:
            continue
        low, high = alloc.size_class_bounds(c)
        rows.append(
            {
                "class": c,
                "low": low,
                "high": high,
                "calls_per_txn": calls,
                "bytes_per_txn": sum(counts.bytes[op][c] for op in ALLOCATING) * per,
            }
        )
    return rows
