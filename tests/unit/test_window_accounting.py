"""The window's CPU accounting (run/accounting.py): a client that runs on past the window's end
(pgbench's tail, run/pgcell.py) counts its CPU up to the window's end, not to its exit, or the
CPU of everything else on the machine (other_cpu_cores) is under-counted to 0."""

from __future__ import annotations

import resource
import types

import pytest

from perflab.run import accounting
from perflab.run.observers.resources import ProcCounters

ZERO = ProcCounters(0.0, 0.0, 0, 0, 0, 0)


def rusage(cpu_s: float) -> resource.struct_rusage:
    return resource.struct_rusage((cpu_s, 0.0) + (0,) * 14)


def start() -> accounting.WindowStart:
    # the client had used 2 s of CPU in its warm-up when the window began
    return accounting.WindowStart(ZERO, rusage(0), rusage(0), 0.0, 2.0, 0.0)


def figures(end: accounting.WindowEnd, client_at_exit: float) -> dict:
    rss = types.SimpleNamespace(end=0, peak=0)
    return accounting.resources(start(), end, rusage(client_at_exit), 1000, rss)  # type: ignore[arg-type]


def test_a_client_alive_at_the_window_end_counts_to_the_window_end() -> None:
    # 10 s window, 12 busy CPU-s: server 8, client 3 (5 at the end less 2 before), others 1;
    # the client ran 1.5 s more after the window (its tail) before it exited at 6.5 s
    server = ProcCounters(6.0, 2.0, 0, 0, 0, 0)
    end = accounting.WindowEnd(server, 0.0, 0.0, 12.0, 10.0, client_s=5.0)
    out = figures(end, client_at_exit=6.5)
    assert out["other_cpu_cores"] == 0.1
    assert out["profiler_cpu_s"] == 0.0


def test_a_client_that_ended_with_the_window_counts_to_its_exit() -> None:
    server = ProcCounters(6.0, 2.0, 0, 0, 0, 0)
    # reaped during the window: its rusage at exit (5 s) is in children_s, with 0.5 s of profilers
    end = accounting.WindowEnd(server, 0.0, 5.5, 12.0, 10.0)
    out = figures(end, client_at_exit=5.0)
    assert out["other_cpu_cores"] == 0.05
    assert out["profiler_cpu_s"] == 0.5


def test_steal_is_the_hypervisors_share_of_the_window_in_cores() -> None:
    server = ProcCounters(6.0, 2.0, 0, 0, 0, 0)
    end = accounting.WindowEnd(server, 0.0, 5.5, 12.0, 10.0, steal_s=1.5)
    assert figures(end, client_at_exit=5.0)["steal_cpu_cores"] == 0.15
    assert figures(accounting.WindowEnd(server, 0.0, 5.5, 12.0, 10.0), 5.0)["steal_cpu_cores"] == 0.0


def test_machine_steal_is_read_from_proc_stat_and_only_grows() -> None:
    from perflab.run.observers.resources import machine_steal_s

    first = machine_steal_s()
    with open("/proc/stat", encoding="ascii") as f:
        fields = f.readline().split()
    assert first >= 0.0 and machine_steal_s() >= first
    assert len(fields) < 9 or abs(int(fields[8]) / 100 - first) < 1.0  # USER_HZ is 100 on Linux


def test_a_thread_that_ends_while_its_status_is_read_is_left_out(monkeypatch) -> None:
    # 2026-11-26: a server thread exited between the open and the read of its status file; the
    # read raised ESRCH (ProcessLookupError) and took the whole run down with it
    import builtins
    import os

    real_open, tids = builtins.open, os.listdir(f"/proc/{os.getpid()}/task")
    gone = f"/proc/{os.getpid()}/task/{tids[0]}/status"

    class Ending:
        def __init__(self, *args, **kwargs) -> None:
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            return None

        def __iter__(self):
            raise ProcessLookupError(3, "No such process")

    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: Ending() if path == gone else real_open(path, *a, **k))
    counters = ProcCounters.read(os.getpid())
    assert counters.user_s >= 0 and counters.voluntary_ctx >= 0  # the other threads (or none) counted


def test_a_read_without_threads_touches_no_thread_status_file(monkeypatch) -> None:
    """ProcCounters.read(pid, threads=False), what run/interleave.py reads between turns: the
    process's CPU and faults from /proc/PID/stat alone, no context switches (reading every
    thread's status file between 100 ms turns disturbed the servers: docs/methodology.md)."""
    import builtins
    import os
    import time

    time.sleep(0.01)  # at least one voluntary switch of this thread
    full = ProcCounters.read(os.getpid())
    opened: list[str] = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k))
    light = ProcCounters.read(os.getpid(), threads=False)
    assert opened == [f"/proc/{os.getpid()}/stat"]
    assert light.voluntary_ctx == light.involuntary_ctx == 0 < full.voluntary_ctx
    assert light.user_s >= full.user_s and light.minor_faults >= full.minor_faults


def test_scaled_counters_are_a_sampled_rate_over_a_longer_time() -> None:
    """What run/interleave.py does with a server's idle work sampled on one turn a second."""
    sampled = ProcCounters(0.02, 0.01, 7, 1, 3, 2)
    assert sampled.scaled(10) == ProcCounters(pytest.approx(0.2), pytest.approx(0.1), 70, 10, 30, 20)
    assert sampled.scaled(0) == ProcCounters.zero()
    assert sampled.scaled(0.5).minor_faults == 4  # counts rounded


def test_server_resources_unread_are_null_not_zero() -> None:
    """A server whose counters could not be read at the window's end (run/interleave.py):
    its counter fields are null, its memory samples kept."""
    rss = types.SimpleNamespace(end=5, peak=7)
    read = accounting.server_resources(ProcCounters.zero(), 10, rss)  # type: ignore[arg-type]
    unread = accounting.server_resources(None, 10, rss)  # type: ignore[arg-type]
    assert list(unread) == list(read) and unread["rss_end_bytes"] == 5 and unread["rss_peak_bytes"] == 7
    assert all(v is None for k, v in unread.items() if not k.startswith("rss_"))
