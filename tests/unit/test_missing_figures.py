"""Figures that cannot be had are missing, with their reason, or the cell fails; never a silent
0 or a partial figure (issue 33, item 4): a perf recording that ended early or lost events, a
host-speed canary that died in the window, an allocation trace of a window without
transactions, a clean shutdown that did not finish (a snapshot or a PGO profile written then)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perflab.errors import PerflabError, ServerStopError
from perflab.observers import alloc, host_speed, syscalls
from perflab.observers.alloc.tracer import AllocTracer
from perflab.observers.host_speed import HostSpeed, HostSpeedError
from perflab.observers.perf import PerfRecorder
from perflab.places.proc import Child
from perflab.servers.mysqld import Mysqld
from perflab.servers.postgresql.server import PostgreSQL
from perflab.spec.observe import AllocObserve

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
    from perflab.observers.perf import lost_chunks

    assert lost_chunks(PERF_LOST) == 27
    assert lost_chunks("") == 0 and lost_chunks("Warning:\nsomething else\n") == 0


@pytest.fixture
def tracer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """tracer(syscall counts or None): one whose window counted 500 mallocs of 64 bytes (no shim built)."""
    monkeypatch.setattr(alloc, "build", lambda cache: tmp_path / "shim.so")
    monkeypatch.setattr(alloc, "create", lambda path, **_: None)
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


CANARY = r"""#!/usr/bin/env python3
import sys, time
period, cpus, samples = int(sys.argv[1]) / 1000, sys.argv[2:], int("{samples}")
n = 0
while samples < 0 or n < samples:
    for cpu in cpus:
        print(f"{{time.monotonic():.6f}} 800000.0 {{cpu}} 1000000.0", flush=True)
    n += 1
    time.sleep(period)
print("canary: lost its CPU", flush=True)
sys.exit(1)
"""


def _canary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, samples: int) -> tuple[HostSpeed, float, float]:
    """A stand-in canary (20 ms period, 2 CPUs) that stops after `samples` rounds (-1: runs on),
    run over a 0.6 s window; the canary and the window's start and end."""
    binary = tmp_path / "canary"
    binary.write_text(CANARY.format(samples=samples), encoding="ascii")
    binary.chmod(0o755)
    monkeypatch.setattr(host_speed, "build", lambda cache, static=False: binary)
    canary = HostSpeed(tmp_path, tmp_path / "host-speed.txt", period_ms=20, cpus=[0, 1])
    with canary:
        start = time.monotonic()
        time.sleep(0.6)
        end = time.monotonic()
    return canary, start, end


def test_a_canary_that_ran_through_the_window_gives_its_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    canary, start, end = _canary(tmp_path, monkeypatch, -1)
    assert canary.fields(start, end)["work_ns"] == 800000.0


def test_a_canary_that_died_in_the_window_fails_the_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its 10 rounds cover a third of the window: enough samples for a figure, of the wrong span.
    The figure is read after the profilers stopped it (run/cell.py, servers/postgresql/cell.py), where its
    death went unseen."""
    canary, start, end = _canary(tmp_path, monkeypatch, 10)
    with pytest.raises(HostSpeedError, match="exited with code 1 before it was stopped: canary: lost its CPU"):
        canary.fields(start, end)


# a server stand-in: `exit` on the signal its clean shutdown sends (or ignores it: None)
SERVER = r"""
import signal, sys, time
code = {code}
signal.signal(signal.{sig}, signal.SIG_IGN if code is None else lambda *_: sys.exit(code))
print("ready", flush=True)
time.sleep(60)
"""


def _server(kind: type, tmp_path: Path, code: int | None, stop_s: float = 30.0):
    """A fake server that exits with `code` when asked to stop (None: never). `stop_s`: its clean
    stop's deadline; long where the test is not about the deadline, since a fake that exits at once
    still took over 1 s on a busy machine (CI sim, unit tests beside the integration tests' start)."""
    sig = "SIGTERM" if kind is Mysqld else "SIGINT"
    server = kind(tmp_path / "run", tmp_path / "data", {})
    server.CLEAN_STOP_S = stop_s
    server.child = Child([sys.executable, "-c", SERVER.format(code=code, sig=sig)], stdout=subprocess.PIPE)
    with server.child.popen.stdout as out:  # its handler is set
        assert out.readline() == b"ready\n"
    return server


@pytest.mark.parametrize("kind", [Mysqld, PostgreSQL])
def test_a_clean_shutdown_that_finished_is_quiet(tmp_path: Path, kind: type) -> None:
    server = _server(kind, tmp_path, 0)
    server.stop(clean=True)
    assert server.child.poll() == 0


@pytest.mark.parametrize("kind", [Mysqld, PostgreSQL])
def test_a_clean_shutdown_that_timed_out_fails(tmp_path: Path, kind: type) -> None:
    """Was ignored: the server killed, its datadir snapshotted (or its PGO profile used) as if whole."""
    server = _server(kind, tmp_path, None, stop_s=1.0)
    with pytest.raises(ServerStopError, match="did not finish its clean shutdown within 1 s and was killed"):
        server.stop(clean=True)
    assert server.child.poll() is not None


@pytest.mark.parametrize("kind", [Mysqld, PostgreSQL])
def test_a_clean_shutdown_that_failed_or_came_too_late_fails(tmp_path: Path, kind: type) -> None:
    with pytest.raises(ServerStopError, match="exited with code 1 from its clean shutdown"):
        _server(kind, tmp_path, 1).stop(clean=True)
    server = _server(kind, tmp_path, 0)
    server.child.kill()  # it died before the shutdown was asked for
    with pytest.raises(ServerStopError, match="had already exited"):
        server.stop(clean=True)
