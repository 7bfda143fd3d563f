"""The allocation tracer's window: the counts, the sampled stacks and the allocator's syscalls
cover the same span. perf's start-up reads every process's maps (seconds on a busy machine: CI
2026-11-28 sampled 17% of a 4 s window's sort buffers) so armed() starts it before the window,
its events off, and window() only switches the three on and off."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import pytest

from perflab.observers import alloc, syscalls
from perflab.observers.alloc import tracer as tracer_module
from perflab.observers.alloc.tracer import AllocTracer
from perflab.places.here import HERE
from perflab.spec.observe import AllocObserve


class Recorder:
    """What a SyscallRecorder did, in order, and the counter file's sampling period at each step."""

    events: ClassVar[list[tuple[str, int]]] = []
    file: ClassVar[Path]

    def __init__(self, pid: int, workdir: Path, *, enabled: bool = True, tree: bool = False, place: Any = None) -> None:
        assert not enabled, "started with its events on: it would count before the window"
        assert place is HERE, "perf where the server runs: this machine's"
        assert not tree, "one process's calls (MariaDB's); a PostgreSQL tracer's are its tree's"
        self.seconds = 0.0

    def _log(self, what: str) -> None:
        Recorder.events.append((what, int(np.fromfile(Recorder.file, dtype="<u8")[alloc._PERIOD])))

    def __enter__(self) -> Self:
        self._log("start")
        return self

    def resume(self) -> None:
        self._log("resume")
        self.seconds = 4.0

    def __exit__(self, *exc: object) -> None:
        self._log("stop")

    def counts(self) -> syscalls.SyscallCounts:
        self._log("counts")
        return syscalls.SyscallCounts()


@pytest.fixture
def tracer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AllocTracer:
    monkeypatch.setattr(alloc, "build", lambda cache: tmp_path / "shim.so")
    monkeypatch.setattr(tracer_module, "SyscallRecorder", Recorder)
    made = AllocTracer(AllocObserve(period="256K"), tmp_path, tmp_path)
    Recorder.events, Recorder.file = [], made.file
    return made


def test_armed_perf_starts_before_the_window_and_stops_at_its_end(tracer: AllocTracer, tmp_path: Path) -> None:
    with tracer.armed(1):
        assert Recorder.events == [("start", 0)]
        with tracer.window(1):
            # perf counts and stacks are sampled from here: the recorder resumed before sampling began
            assert Recorder.events == [("start", 0), ("resume", 0)]
            assert alloc.samples(tracer.file, 1)[0] == [] and _period(tracer) == 256 * 1024
        assert Recorder.events[2:] == [("stop", 0), ("counts", 0)]  # sampling off, then perf stopped
        assert tracer.syscalls is not None and tracer.counts is not None and tracer.seconds == 4.0
    assert len(Recorder.events) == 4  # leaving armed() stops nothing twice


def test_a_window_not_armed_arms_itself(tracer: AllocTracer, tmp_path: Path) -> None:
    with tracer.window(1):
        assert [e for e, _ in Recorder.events] == ["start", "resume"]
    assert [e for e, _ in Recorder.events] == ["start", "resume", "stop", "counts"]


def test_leaving_armed_without_a_window_stops_perf_and_counts_nothing(tracer: AllocTracer, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), tracer.armed(1):
        raise RuntimeError("the client failed in its warm-up")
    assert [e for e, _ in Recorder.events] == ["start", "stop"]
    assert tracer.syscalls is None


def test_without_syscalls_nothing_is_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alloc, "build", lambda cache: tmp_path / "shim.so")
    monkeypatch.setattr(tracer_module, "SyscallRecorder", Recorder)
    made = AllocTracer(AllocObserve(syscalls=False), tmp_path, tmp_path)
    Recorder.events, Recorder.file = [], made.file
    with made.armed(1), made.window(1):
        pass
    assert Recorder.events == [] and made.syscalls is None and made.counts is not None


def _period(tracer: AllocTracer) -> int:
    return int(np.fromfile(tracer.file, dtype="<u8")[alloc._PERIOD])


def test_threads_that_take_a_slot_within_the_window_are_counted(tracer: AllocTracer, tmp_path: Path) -> None:
    """A process forked in the window (PostgreSQL's autovacuum worker) or a thread started there takes
    a slot of its own: its one-off allocations are in the counts, and `threads_started` says how many."""
    def calls(words: np.ndarray, slot: int, op: str, n: int) -> None:
        words[alloc.HEADER_WORDS + slot * alloc.SLOT_WORDS + alloc.OPS.index(op) * alloc.CLASSES + 3] += n

    words = np.fromfile(tracer.file, dtype="<u8")
    words[alloc._SLOTS_USED] = 5  # slot 0 (shared) and four threads before the window
    calls(words, 4, "malloc", 1000)  # before the window: not the window's
    words.tofile(tracer.file)
    with tracer.window(1):
        words = np.fromfile(tracer.file, dtype="<u8")
        words[alloc._SLOTS_USED] = 7  # two more while it ran
        calls(words, 4, "malloc", 600)  # a thread there before
        calls(words, 5, "malloc", 300)  # the new ones: a worker's mallocs, and frees of its parent's memory
        calls(words, 6, "free", 100)
        words.tofile(tracer.file)
    fields = tracer.fields(100)
    assert (fields["threads"], fields["threads_started"]) == (6, 2)
    assert fields["calls_per_txn"]["malloc"] == 9.0 and fields["started_calls_share"] == 0.4  # 400 of 1000
