"""Figures that cannot be had are missing, with their reason, or the cell fails; never a silent
0 or a partial figure (issue 33, item 4): a perf recording that ended early or lost events, a
host-speed canary that died in the window, an allocation trace of a window without
transactions, a clean shutdown that did not finish."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from perflab.errors import PerflabError
from perflab.run.observers import alloc, syscalls
from perflab.run.observers.alloc.tracer import AllocTracer
from perflab.run.observers.perf import PerfRecorder
from perflab.spec.schema import AllocObserve

FAKES = Path(__file__).resolve().parent.parent / "data" / "fakes"
PERF_LOST = "Warning:\nProcessed 22269 events and lost 27 chunks!\n\nCheck IO/CPU overload!\n\n"  # perf 6.1


@pytest.fixture
def fake_perf(monkeypatch: pytest.MonkeyPatch):
    """`perf` is tests/data/fakes/perf; the mode (FAKE_PERF) is set by the test."""
    monkeypatch.setenv("PATH", f"{FAKES}:{os.environ['PATH']}")
    return lambda mode: monkeypatch.setenv("FAKE_PERF", mode)


def _record(tmp_path: Path, seconds: float = 0.5) -> PerfRecorder:
    with PerfRecorder(12345, tmp_path) as rec:
        time.sleep(seconds)
    return rec


def test_a_whole_recording_folds(tmp_path: Path, fake_perf) -> None:
    fake_perf("")
    rec = _record(tmp_path)
    assert rec.fold()[1].samples == 1


def test_a_perf_that_exited_before_its_stop_fails_the_profile(tmp_path: Path, fake_perf) -> None:
    """Its samples end where it died: a profile of part of the window, per transaction of all of it."""
    fake_perf("die")
    rec = _record(tmp_path)
    with pytest.raises(PerflabError, match=r"exited \(code 3\) before it was stopped"):
        rec.fold()


def test_lost_events_fail_the_profile(tmp_path: Path, fake_perf) -> None:
    fake_perf("lost")
    rec = _record(tmp_path, 0.1)
    with pytest.raises(PerflabError, match="lost 27 chunk"):
        rec.fold()


def test_lost_syscall_events_leave_the_syscall_figures_missing_with_the_reason(
    tmp_path: Path, fake_perf, tracer
) -> None:
    fake_perf("lost")
    with syscalls.SyscallRecorder(12345, tmp_path) as rec:
        time.sleep(0.1)
    counts = rec.counts()
    assert counts.lost_chunks == 27
    fields = tracer(counts).fields(1000)
    assert fields["syscalls_per_txn"] is None and fields["syscall_bytes_per_txn"] is None
    assert "lost 27 chunk" in fields["missing"]["syscalls_per_txn"]
    assert fields["calls_per_txn"]["malloc"] == 0.5  # the allocator's own counts are whole


def test_perfs_lost_events_warning_is_read() -> None:
    from perflab.run.observers.perf import lost_chunks

    assert lost_chunks(PERF_LOST) == 27
    assert lost_chunks("") == 0 and lost_chunks("Warning:\nsomething else\n") == 0


@pytest.fixture
def tracer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """tracer(syscall counts or None): one whose window counted 500 mallocs of 64 bytes (no shim built)."""
    monkeypatch.setattr(alloc, "build", lambda cache: tmp_path / "shim.so")
    monkeypatch.setattr(alloc, "create", lambda path: None)
    return lambda calls: _tracer(tmp_path, calls)


def _tracer(tmp_path: Path, calls: syscalls.SyscallCounts | None) -> AllocTracer:
    tracer = AllocTracer(AllocObserve(stacks=False), tmp_path, tmp_path)
    zero = {op: [0] * alloc.CLASSES for op in alloc.OPS}
    counted = {op: list(v) for op, v in zero.items()}
    counted["malloc"][7] = 500
    sizes = {op: list(v) for op, v in zero.items()}
    sizes["malloc"][7] = 500 * 64
    tracer.counts = alloc.Counts(counted, sizes, threads=4)
    tracer.syscalls = calls
    return tracer


def test_a_window_without_transactions_has_no_figures_per_transaction(tracer) -> None:
    """Was 0.0 for each: a figure nobody could tell from 'no calls'."""
    counts = syscalls.SyscallCounts()
    counts.add("mmap", 1 << 20)
    fields = tracer(counts).fields(0)
    for name in ("calls_per_txn", "bytes_per_txn", "syscalls_per_txn", "syscall_bytes_per_txn"):
        assert fields[name] is None
        assert fields["missing"][name] == "no transactions in the window"
    assert fields["by_size_class"] == [] and fields["transactions"] == 0


def test_a_window_with_transactions_has_its_figures_and_nothing_missing(tracer) -> None:
    fields = tracer(None).fields(1000)
    assert fields["calls_per_txn"]["malloc"] == 0.5 and fields["bytes_per_txn"] == 32.0
    assert fields["syscalls_per_txn"] is None and "missing" not in fields  # syscalls = false: not counted
