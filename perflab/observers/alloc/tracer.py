"""`[observe] alloc`: what the server asks of its allocator over the measured window.

Set up before the server starts (the counter must be first in LD_PRELOAD), read around the
window:

    tracer = AllocTracer(spec.observe.alloc, rundir, cache)
    server = Mysqld(..., env={**cell.env, **tracer.env()}, tracer=tracer.shim)
    tracer.check_started(server.pid)               # loaded once, into the server, and counting
    with tracer.armed(server.pid, rundir):          # before the window: what takes seconds to start
        ...
        with tracer.window(server.pid, rundir):
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
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from perflab import allocators
from perflab.observers import alloc
from perflab.observers.syscalls import SYSCALLS, SyscallCounts, SyscallRecorder
from perflab.spec.observe import AllocObserve
from perflab.units import size_class_label

ALLOCATING = ("malloc", "calloc", "realloc", "memalign", "new")
SYSCALL_FIGURES = ("syscalls_per_txn", "syscall_bytes_per_txn")
PER_TXN = ("calls_per_txn", "bytes_per_txn", *SYSCALL_FIGURES, "by_size_class")
NO_TRANSACTIONS = "no transactions in the window"

# return addresses, leaf first -> frame names, root first, without the counter's own frames
Symbolize = Callable[[list[int]], list[str]]


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole > 0 else None


def lost_reason(chunks: int) -> str:
    return (
        f"perf lost {chunks} chunk(s) of the syscall tracepoints' events (its buffer was full): the counts "
        "would be too low. Remedy: fewer threads, or syscalls = false under [observe] alloc"
    )


class AllocTracer:
    def __init__(self, spec: AllocObserve, rundir: Path, cache: Path, tree: bool = False) -> None:
        self.spec = spec
        self.tree = tree  # the server is a process tree (a postmaster): its children's syscalls too
        self.shim = alloc.build(cache)
        self.file = self._created(Path(rundir))
        self.counts: alloc.Counts | None = None
        self.syscalls: SyscallCounts | None = None
        self.seconds = 0.0
        self.span: tuple[float, float] | None = None  # the window's counts, from and to (time.monotonic())
        self._records: tuple[list[alloc.Sample], int] | None = None
        self._perf: Any = None  # armed(): its SyscallRecorder, started, its events off
        self._stop = contextlib.ExitStack()

    def env(self) -> dict[str, str]:
        return {allocators.TRACER_ENV: str(self.file)}

    # where the counter file is and how it is reached: here; on a server host, over its SSH link
    # (observers/alloc/remote.py replaces these)
    def _created(self, rundir: Path) -> Path:
        """The counter file, made (before the server starts)."""
        path = rundir / "alloc-counters.bin"
        alloc.create(path, sample_capacity=self.spec.samples)
        return path

    def _loaded(self, pid: int) -> bool:
        return allocators.is_mapped(self.shim, allocators.mapped_libraries(pid))

    def _claim(self) -> alloc.Claim:
        return alloc.claim(self.file)

    def _read(self) -> alloc.Counts:
        return alloc.read(self.file)

    def _sample(self, period: int) -> None:
        alloc.sample(self.file, period)

    def _samples(self) -> tuple[list[alloc.Sample], int]:
        return alloc.samples(self.file, self.spec.period)

    def naming(self, pid: int) -> tuple[Any, str | None]:
        """How the server's sampled stacks are named: (a symbolizer, its binary's name); (None,
        None): from the local process's maps (alloc/profile.store_alloc)."""
        return None, None

    def _recorder(self, pid: int, workdir: Path) -> Any:
        """perf of the allocator's syscalls, started with its events off (SyscallRecorder's interface)."""
        return SyscallRecorder(pid, workdir, enabled=False, tree=self.tree)

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
        state = self._claim()
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
    def armed(self, pid: int, workdir: Path) -> Iterator[AllocTracer]:
        """Starts before the window what takes seconds to start: `perf record` of the allocator's
        syscalls, its events off (perf reads every process's maps at its start: seconds on a busy
        machine, which the window's counts would not cover). Stopped by window() or on leaving."""
        with contextlib.ExitStack() as stack:
            if self.spec.syscalls:
                self._perf = stack.enter_context(self._recorder(pid, workdir))
            self._stop = stack.pop_all()
        try:
            yield self
        finally:
            self._perf = None
            self._stop.close()

    @contextlib.contextmanager
    def window(self, pid: int, workdir: Path) -> Iterator[AllocTracer]:
        """The measured window: the counts, the sampled stacks and the syscalls (perf enabled)
        from its start to its end, all three over the same span."""
        with contextlib.ExitStack() as armed:
            if self._perf is None:  # not armed before the window: armed now
                armed.enter_context(self.armed(pid, workdir))
            recorder = self._perf
            # the counts' snapshots are taken as each read starts (on a host its command runs there at
            # once; the transfer of the counts back, tenths of a second under load, follows): the
            # middle of the read put the opening 0.28 s late in CI where the counts said 0.1 s
            opened = time.monotonic()
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
                self._perf = None
                self._stop.close()  # perf stops: its data is whole only then
        if recorder is not None:
            self.syscalls = recorder.counts()
            self.seconds = recorder.seconds

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
        missing = {} if per else dict.fromkeys(PER_TXN, NO_TRANSACTIONS)
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
