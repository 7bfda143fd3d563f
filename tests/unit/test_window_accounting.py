"""The window's CPU accounting (run/accounting.py): a client that runs on past the window's end
(pgbench's tail, servers/postgresql/cell.py) counts its CPU up to the window's end, not to its exit, or the
CPU of everything else on the machine (other_cpu_cores) is under-counted to 0."""

from __future__ import annotations

import dataclasses
import os
import resource
import subprocess
import sys
import time
import types

import pytest

from perflab.run import accounting
from perflab.run.interleave import _Mark
from perflab.places.procfs import ProcCounters, process_cpu_s

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
    from perflab.observers.resources import machine_steal_s

    first = machine_steal_s()
    with open("/proc/stat", encoding="ascii") as f:
        fields = f.readline().split()
    assert first >= 0.0 and machine_steal_s() >= first
    assert len(fields) < 9 or abs(int(fields[8]) / 100 - first) < 1.0  # USER_HZ is 100 on Linux


def test_a_thread_that_ends_while_its_status_is_read_is_left_out(monkeypatch) -> None:
    # 2026-11-26: a server thread exited between the open and the read of its status file; the
    # read raised ESRCH (ProcessLookupError) and took the whole run down with it. The read goes
    # on: the threads before and after the gone one are counted, and the process's CPU is its own
    import builtins
    import threading

    pid, stop = os.getpid(), threading.Event()
    helpers = [threading.Thread(target=stop.wait, daemon=True) for _ in range(2)]  # blocked: their switches stay
    for helper in helpers:
        helper.start()
    time.sleep(0.05)
    try:
        real_open = builtins.open
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
        gone = f"/proc/{pid}/task/{tids[1]}/status"  # neither the first nor the last

        def switches() -> int:  # the other threads', read directly
            total = 0
            for tid in tids:
                with real_open(f"/proc/{pid}/task/{tid}/status", encoding="ascii") as f:
                    value = next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt"))
                total += value if tid != tids[1] else 0
            return total

        class Ending:
            def __init__(self, *args, **kwargs) -> None:
                pass

            def __enter__(self):
                return self

            def __exit__(self, *exc) -> None:
                return None

            def __iter__(self):
                raise ProcessLookupError(3, "No such process")

        before = switches()
        monkeypatch.setattr(
            builtins, "open", lambda path, *a, **k: Ending() if path == gone else real_open(path, *a, **k)
        )
        counters = ProcCounters.read(pid)
        monkeypatch.undo()
        assert len(tids) >= 3 and before > 0
        assert before <= counters.voluntary_ctx <= switches()
        assert (
            counters.cpu_s == pytest.approx(ProcCounters.read(pid, threads=False).cpu_s, abs=0.05)
            and counters.cpu_s > 0
        )
    finally:
        stop.set()
        for helper in helpers:
            helper.join()


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


def test_switches_a_tree_lost_are_unknown_not_negative() -> None:
    """A PostgreSQL tree whose backend exited inside the window: fewer switches at the end than
    at the start (seen in CI: -40355) are no figure; the CPU and faults, which the postmaster
    reaps, still are."""
    rss = types.SimpleNamespace(end=5, peak=7)
    lost = accounting.server_resources(ProcCounters(1.5, 0.5, 30, 0, -40355, 12), 100, rss)  # type: ignore[arg-type]
    assert lost["voluntary_ctx_switches"] is None and lost["involuntary_ctx_switches"] is None
    assert lost["ctx_switches_per_txn"] is None
    assert lost["server_cpu_s"] == 2.0 and lost["minor_faults_per_txn"] == 0.3
    kept = accounting.server_resources(ProcCounters(1.5, 0.5, 30, 0, 400, 12), 100, rss)  # type: ignore[arg-type]
    assert kept["voluntary_ctx_switches"] == 400 and kept["ctx_switches_per_txn"] == 4.12


def _gone_pid() -> int:
    """The pid of a process that has ended and been reaped (nothing in /proc)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_gone_process_has_no_cpu_figure_not_zero() -> None:
    assert process_cpu_s(_gone_pid()) is None
    assert process_cpu_s(os.getpid()) is not None


def test_a_client_reaped_before_the_window_end_counts_from_its_rusage() -> None:
    """pgcell takes the window's end with the client's pid (pgbench runs on past it); a client
    that exited early and was reaped is gone from /proc. Its rusage is then the end: read as 0 it
    was counted as a profiler (its whole CPU in profiler_cpu_s)."""
    taken = accounting.WindowEnd.take(start(), os.getpid(), read=lambda pid: ZERO, client_pid=_gone_pid())
    assert taken.client_s is None
    # 10 s window, 12 busy CPU-s: server 8, client 3 of its 5 at exit, profilers 0.5, others 0.5
    end = dataclasses.replace(taken, server=ProcCounters(6.0, 2.0, 0, 0, 0, 0), own_s=0.0, children_s=5.5,
                              busy_s=12.0, window_s=10.0, steal_s=0.0)  # fmt: skip
    out = figures(end, client_at_exit=5.0)
    assert out["profiler_cpu_s"] == 0.5
    assert out["other_cpu_cores"] == 0.05 and "missing" not in out


def test_a_client_without_rusage_leaves_other_cpu_cores_missing_with_its_reason() -> None:
    """A client that ended inside the window but was never reaped has no rusage: its CPU is
    unknown. Taken as 0, the 3 s it used counted as other processes' (0.3 cores: "busy")."""
    end = accounting.WindowEnd(ProcCounters(6.0, 2.0, 0, 0, 0, 0), 0.0, 0.0, 12.0, 10.0)
    rss = types.SimpleNamespace(end=0, peak=0)
    out = accounting.resources(start(), end, None, 1000, rss)  # type: ignore[arg-type]
    assert out["other_cpu_cores"] is None
    assert "not reaped" in out["missing"]["other_cpu_cores"]


def test_a_client_gone_before_the_window_used_none_of_it() -> None:
    """A client that ended (and was reaped) before the window's start: its rusage is all from
    before the window, none of it counts against the other processes' CPU."""
    taken = accounting.WindowStart.take(os.getpid(), _gone_pid(), read=lambda pid: ZERO)
    before = dataclasses.replace(taken, own=rusage(0), children=rusage(0), busy_s=0.0, at=0.0, steal_s=0.0)
    end = accounting.WindowEnd(ProcCounters(6.0, 2.0, 0, 0, 0, 0), 0.0, 0.0, 12.0, 10.0)
    rss = types.SimpleNamespace(end=0, peak=0)
    out = accounting.resources(before, end, rusage(5.0), 1000, rss)  # type: ignore[arg-type]
    assert out["other_cpu_cores"] == 0.4 and out["profiler_cpu_s"] == 0.0


def test_the_interleaved_groups_other_cores_are_missing_when_a_process_ended_in_the_window() -> None:
    """run/interleave.py's _Mark: a seat's process reaped during the window read as 0 CPU took
    all it had used before the window off ours, and showed it as other processes' (a false
    "busy machine"); the figure is now missing, with the pid that ended."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time\nwhile time.process_time() < 0.3: pass\ntime.sleep(60)"]
    )
    try:
        while (process_cpu_s(proc.pid) or 0.0) < 0.25:
            time.sleep(0.02)
        seat = types.SimpleNamespace(cpu_s=lambda: {f"client {proc.pid}": process_cpu_s(proc.pid)})
        mark = _Mark.take([seat])  # type: ignore[list-item]
        assert mark.other_cores([seat]) is not None  # type: ignore[list-item]
        proc.kill()
        proc.wait()
        assert mark.other_cores([seat]) is None  # type: ignore[list-item]
        assert mark.missing is not None and str(proc.pid) in mark.missing
    finally:
        proc.kill()
        proc.wait()


def test_counters_read_late_cover_the_share_of_the_window_left() -> None:
    """CI, 2026-11-28: a starved perflab read a 2 s window's start counters about 1.9 s late; sysbench's
    158 transactions were the whole window's, its client's 7 context switches the last 0.1 s's: 0.04 a
    transaction instead of about 3. Per transaction, the counters now cover their own share."""
    on_time = dataclasses.replace(start(), at=100.01, window=(100.0, 2.0))  # 10 ms: the reads themselves
    assert on_time.late_s == pytest.approx(0.01) and on_time.covered(158) == 158
    late = dataclasses.replace(start(), at=101.9, window=(100.0, 2.0))
    assert late.late_s == pytest.approx(1.9) and late.covered(158) == pytest.approx(7.9)
    assert dataclasses.replace(start(), at=103.0, window=(100.0, 2.0)).covered(158) == 0.0  # after its end
    assert start().late_s is None and start().covered(158) == 158  # no window given (pgbench: cut at the marks)
    # the figures per transaction follow: the server's CPU over the 0.1 s its counters saw, of 7.9 transactions
    server = ProcCounters(0.079, 0.0, 0, 0, 7, 0)
    end = accounting.WindowEnd(server, 0.0, 0.0, 0.2, 0.1)
    rss = types.SimpleNamespace(end=0, peak=0)
    out = accounting.resources(late, end, rusage(2.1), 158, rss)  # type: ignore[arg-type]
    assert out["window_start_late_s"] == 1.9 and out["server_cpu_us_per_txn"] == pytest.approx(10_000, rel=1e-3)
    assert accounting.resources(on_time, end, rusage(2.1), 158, rss)["window_start_late_s"] == 0.01  # type: ignore[arg-type]
    client = accounting.client_resources(
        dataclasses.replace(late, client=ZERO),
        resource.struct_rusage((0.0, 0.0) + (0,) * 12 + (6, 1)),  # ru_nvcsw, ru_nivcsw
        158,
        types.SimpleNamespace(end=0, peak=0),  # type: ignore[arg-type]
    )
    assert client["ctx_switches_per_txn"] == pytest.approx(7 / 7.9, abs=1e-3)


def test_counts_over_a_span_of_their_own_cover_their_overlap_with_the_window() -> None:
    """[observe] alloc's counts run over a span of their own ([observe] alloc on a server host: opened a
    round trip after the window began; CI, 2026-11-28: a PostgreSQL backend's one malloc a transaction
    came out 0.84): the window's transactions scaled to the part of the window they overlap."""
    window = (100.0, 102.0)
    assert accounting.share(400, window, (100.005, 102.01)) == 400  # within 1% of the window at both ends
    assert accounting.share(400, window, (99.0, 103.0)) == 400  # a span around the window: all of it
    assert accounting.share(400, window, (100.32, 102.05)) == pytest.approx(400 * 1.68 / 2)  # opened late
    assert accounting.share(400, window, (100.0, 101.0)) == 200.0  # closed early
    assert accounting.share(400, window, (103.0, 104.0)) == 0.0 and accounting.share(400, window, None) == 400


def test_a_span_that_opened_after_a_pause_of_the_vm_covers_what_the_client_did_not_what_the_clock_did() -> None:
    """A 4 s window whose first 1.2 s the whole VM was paused (nothing ran: the client's reports say
    so), the counts opened as it woke: they cover nearly every transaction of the window, not 70% of
    them (CI, 2026-11-29: the sort buffer counted 1.34 a transaction, by the even rate). Where the client
    kept running (perflab alone starved), its reports give the share it did."""
    from perflab.run.window import reported

    origin, window = 96.0, (100.0, 104.0)  # warm-up 4 s from the client's start
    paused = [{"t": t, "tps": tps} for t, tps in ((5, 0.0), (6, 80.0), (7, 100.0), (8, 100.0))]  # 5: (100, 101]
    span = (101.2, 104.0)
    assert accounting.share(280, window, span) == pytest.approx(280 * 2.8 / 4)  # the even rate: 196
    # all but the few of the second it woke in (its reports are a second apart: spread evenly within it)
    assert accounting.share(280, window, span, done=reported(origin, paused)) == pytest.approx(0.8 * 80 + 200)
    running = [{"t": t, "tps": 100.0} for t in (5, 6, 7, 8)]
    assert accounting.share(400, window, span, done=reported(origin, running)) == pytest.approx(280)
    assert accounting.share(400, window, span, done=reported(origin, [])) == pytest.approx(280)  # no reports: even


def test_counts_past_the_end_of_a_window_whose_client_runs_on_cover_its_transactions_too() -> None:
    """pgbench runs on past the end mark (its tail), while alloc's counts on a server host close a
    round trip or two later (the sampling stopped, then the counts read): those seconds' mallocs are
    counted, so their transactions are too, at the window's rate (a PostgreSQL backend's one malloc a
    transaction read 1.065 without them). sysbench ends with its window: a late end adds none."""
    window = (100.0, 102.0)
    assert accounting.share(400, window, (100.01, 102.13), runs_on=True) == pytest.approx(400 * 2.12 / 2)
    assert accounting.share(400, window, (100.01, 102.13)) == 400  # sysbench: nothing past the end
    assert accounting.share(400, window, (100.32, 102.13), runs_on=True) == pytest.approx(400 * 1.81 / 2)
    assert accounting.share(400, window, (100.005, 102.01), runs_on=True) == 400  # within 1% at both ends
    assert accounting.share(400, window, (100.0, 101.0), runs_on=True) == 200.0  # closed early: as before


def test_a_spanning_samplers_counts_end_at_the_end_mark() -> None:
    """pgbench runs on past its window's end mark (its tail): alloc's counts end at the mark, the
    server's RSS sampler at its own end."""
    import contextlib

    from perflab.observers.alloc import tracer as alloc_tracer

    calls: list[str] = []

    class Tracer:
        @contextlib.contextmanager
        def window(self, pid):  # type: ignore[no-untyped-def]
            calls.append("counts open")
            yield self
            calls.append("counts close")

    class Sampler:
        def __enter__(self):  # type: ignore[no-untyped-def]
            calls.append("sampler in")
            return self

        def __exit__(self, *exc):  # type: ignore[no-untyped-def]
            calls.append("sampler out")

    spanning = alloc_tracer.Spanning(Sampler(), Tracer(), 1)  # type: ignore[arg-type]
    with spanning:
        calls.append("window")
        alloc_tracer.end_mark(spanning)
        calls.append("tail")
    assert calls == ["counts open", "sampler in", "window", "counts close", "tail", "sampler out"]
    alloc_tracer.end_mark(object())  # a sampler without counts: nothing to end
