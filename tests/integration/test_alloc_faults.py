"""[observe] alloc's faults, on real processes and a real mariadbd: a server the counter is not
loaded into (a static binary, a launcher that drops LD_PRELOAD), the counter loaded twice, a
window without calls, a child process, a server that crashes with the counter loaded (a failed
cell with its cause, the matrix goes on) and a full ring of sampled stacks (a warning with its
remedy)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from perflab.observers.alloc import AllocTracerError, claim, read
from perflab.observers.alloc.tracer import AllocTracer
from perflab.spec import AllocObserve
from tests.conftest import ROOT, perflab
from tests.integration.helpers import perflab_children, used, write_experiment

WAITER = Path(__file__).resolve().parent.parent / "data" / "alloc" / "waiter.c"
CALLS = 100  # mallocs of 1000 bytes (size class 10: 512..1023) per byte sent to the waiter


@pytest.fixture(scope="module")
def waiters(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The waiter built dynamically and statically (where ld.so, and so LD_PRELOAD, is not used)."""
    tmp = tmp_path_factory.mktemp("waiter")
    dynamic, static = tmp / "waiter", tmp / "waiter-static"
    subprocess.run(["cc", "-O0", "-o", str(dynamic), str(WAITER)], check=True)
    subprocess.run(["cc", "-O0", "-static", "-o", str(static), str(WAITER)], check=True)
    return dynamic, static


def counting_tracer(tmp: Path) -> AllocTracer:
    return AllocTracer(AllocObserve(stacks=False, syscalls=False), tmp, tmp / "cache")


@contextlib.contextmanager
def started(argv: list[str], tracer: AllocTracer, preload: list[Path]) -> Iterator[subprocess.Popen]:
    """`argv` with the tracer's environment and `preload`, once it has allocated (poked once)."""
    env = {**os.environ, **tracer.env(), "LD_PRELOAD": " ".join(map(str, preload))}
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env) as proc:
        try:
            poke(proc)
            yield proc
        finally:
            proc.kill()


def poke(proc: subprocess.Popen) -> None:
    """One round of the waiter's CALLS mallocs, waited for."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"x")
    proc.stdin.flush()
    assert proc.stdout.read(1) == b"x"


def window_mallocs(tracer: AllocTracer, proc: subprocess.Popen, tmp: Path) -> int:
    with tracer.window(proc.pid):
        poke(proc)
    assert tracer.counts is not None
    return tracer.counts.calls["malloc"][10]


def test_a_static_binary_runs_without_the_counter_and_the_check_says_so(waiters, tmp_path: Path) -> None:
    _, static = waiters
    tracer = counting_tracer(tmp_path)
    not_loaded = pytest.raises(AllocTracerError, match=r"is not loaded into the server \(pid \d+\).*static")
    with started([str(static), str(CALLS)], tracer, [tracer.shim]) as proc, not_loaded:
        tracer.check_started(proc.pid)
    assert claim(tracer.file).pid == 0  # nobody counted: the zeros would have been silent


def test_the_counter_loaded_twice_counts_once_and_the_check_fails(waiters, tmp_path: Path) -> None:
    dynamic, _ = waiters
    tracer = counting_tracer(tmp_path)
    copy = tmp_path / "libcopy.so"  # under another name, as /etc/ld.so.preload or a dependency would load it
    shutil.copy(tracer.shim, copy)
    with started([str(dynamic), str(CALLS)], tracer, [tracer.shim, copy]) as proc:
        with pytest.raises(AllocTracerError, match="loaded 2 times into the server"):
            tracer.check_started(proc.pid)
        assert window_mallocs(tracer, proc, tmp_path) == CALLS  # not 2 x CALLS
    assert claim(tracer.file).extra_copies == 1


def test_a_window_without_calls_fails_the_check(waiters, tmp_path: Path) -> None:
    dynamic, _ = waiters
    tracer = counting_tracer(tmp_path)
    with started([str(dynamic), str(CALLS)], tracer, [tracer.shim]) as proc:
        tracer.check_started(proc.pid)  # loaded once, counting
        with tracer.window(proc.pid):
            pass  # no transaction called the allocator
        with pytest.raises(AllocTracerError, match="counted no call over 50 transactions"):
            tracer.check_window(50)
        assert window_mallocs(tracer, proc, tmp_path) == CALLS
        tracer.check_window(50)


def test_exec_takes_the_counter_over_and_children_do_not_count(waiters, tmp_path: Path) -> None:
    """perflab starts the server through setpriv, which execs it: the same pid in a new image
    counts. A child the process starts (another pid) counts nothing and is told apart."""
    dynamic, _ = waiters
    tracer = counting_tracer(tmp_path)
    with started(["sh", "-c", 'exec "$0" "$1"', str(dynamic), str(CALLS)], tracer, [tracer.shim]) as proc:
        tracer.check_started(proc.pid)
        assert window_mallocs(tracer, proc, tmp_path) == CALLS
    tracer = counting_tracer(tmp_path / "child")
    shell = ["sh", "-c", '"$0" "$1"; exit 0', str(dynamic), str(CALLS)]  # the waiter is a child of sh
    env = {**os.environ, **tracer.env(), "LD_PRELOAD": str(tracer.shim)}
    done = subprocess.run(shell, input=b"xx", capture_output=True, env=env, timeout=30, check=True)
    assert done.stdout == b"xx"  # the child allocated twice
    state, counts = claim(tracer.file), read(tracer.file).calls["malloc"][10]
    assert state.foreign_processes == 1 and counts < CALLS, (state, counts)  # sh's own, not the waiter's


# ------------------------------------------------------------------ a real server

TINY = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "{name}"
duration = "{duration}"
warmup = "1s"
repeats = {repeats}

[dataset]
tables = 1
table_size = 1000

[workload]
threads = [2]

[observe]
alloc = {alloc}
"""


def export(out: Path) -> dict:
    done = perflab("export", str(out))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_launcher_that_drops_ld_preload_fails_the_cell(tmp_path: Path) -> None:
    """`mariadbd` on PATH is a wrapper script that unsets LD_PRELOAD before it execs the real
    server (as launchers and setuid binaries do): the counter never reaches the server."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "mariadbd"
    wrapper.write_text('#!/bin/sh\nunset LD_PRELOAD\nexec /usr/sbin/mariadbd "$@"\n')
    wrapper.chmod(0o755)
    spec = write_experiment(
        tmp_path / "dropped.toml",
        TINY.format(name="dropped", duration="2s", repeats=1, alloc="{ stacks = false, syscalls = false }"),
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-m", "perflab", "run", str(spec), "-o", str(tmp_path / "out")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    (cell,) = used(export(tmp_path / "out")["cells"])
    assert cell["status"] == "failed" and cell["alloc"] is None
    assert cell["error"].startswith("[observe] alloc: the allocation counter (perflab_alloc-"), cell["error"]
    assert "is not loaded into the server" in cell["error"] and "dropped LD_PRELOAD" in cell["error"]


def _age_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        started_at = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime", encoding="ascii") as f:
        return float(f.read().split()[0]) - started_at


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _children(workdir: str, kind: str) -> list[int]:
    return [
        pid
        for pid, cmd in perflab_children(workdir)
        if (kind == "server" and "mariadbd" in cmd.split()[0]) or (kind == "client" and " run" in cmd)
    ]


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two cells with the counter, its syscall tracepoints and stacks at the smallest period into
    the smallest ring; the first one's server gets SIGSEGV 1.5 s into the measured window."""
    tmp = tmp_path_factory.mktemp("crash")
    spec = write_experiment(
        tmp / "crash.toml",
        TINY.format(name="alloc-crash", duration="6s", repeats=2, alloc='{ period = "4K", samples = 1024 }'),
        pace=None,  # a closed loop: its second cell fills the sample ring
    )
    out = tmp / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        workdir, client = _first_client(out, proc)
        time.sleep(max(0.0, 2.5 - _age_s(client)))  # warm-up 1 s, then 1.5 s of the window
        # the server of the client's cell (not one that is still going away: a prepare's, under load)
        cell = Path(f"/proc/{client}/cmdline").read_bytes().decode().split("/cell-")[1][:4]
        (server,) = [p for p in _children(workdir, "server") if f"/cell-{cell}/" in _cmdline(p)]
        os.kill(server, signal.SIGSEGV)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 1, stdout + stderr
    return out


def _first_client(out: Path, proc: subprocess.Popen) -> tuple[str, int]:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if (out / "results.db").exists():
            done = perflab("export", str(out))
            workdir = json.loads(done.stdout)["run"]["workdir"] if done.returncode == 0 else None
            clients = _children(workdir, "client") if workdir else []
            if clients:
                return workdir, clients[0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    pytest.fail("perflab never started sysbench")


def _first_two(cells: list[dict]) -> tuple[dict, dict]:
    """The crashed cell and the next variant's first cell (not a retry of either)."""
    first, second = [c for c in cells if c.get("retry_of") is None][:2]
    return first, second


def test_a_crash_with_the_counter_loaded_fails_the_cell_and_the_matrix_goes_on(crashed: Path) -> None:
    # a retry of an unsettled cell may follow (a loaded CI machine: run/scheduler.needs_retry)
    first, second = _first_two(export(crashed)["cells"])
    assert first["status"] == "failed" and first["alloc"] is None
    assert first["error"].startswith("server died: signal 11 (SIGSEGV)"), first["error"]
    assert first["backtrace"] and "got signal 11" in first["backtrace"]  # mariadbd's own report
    assert second["status"] == "ok" and second["alloc"]["calls_per_txn"]["malloc"] > 1
    assert second["alloc"]["syscalls_per_txn"] is not None


def test_a_full_sample_ring_is_a_warning_with_its_remedy(crashed: Path) -> None:
    _, second = _first_two(export(crashed)["cells"])
    alloc = second["alloc"]
    # a ring of 1,024 records, full within the window's first transactions whatever the machine's
    # speed (about 5 samples a transaction at 4K; a 65,536-record ring took 8 s of a quiet machine)
    assert alloc["dropped_samples"] > 0 and alloc["samples"] == 1024, alloc
    report = perflab("report", str(crashed))
    assert "dropped sampled allocation stacks" in report.stdout and "Remedy: a larger period" in report.stdout
    assert "or a larger ring, samples = " in report.stdout and "(now 1024;" in report.stdout
    shown = perflab("alloc", str(crashed), "--cell", str(second["id"]))
    # The ring filling makes the server cheaper mid-window, which can leave the 6 s window
    # unsettled (seen in CI): the figures are then refused, but the warning still comes with it.
    refused = "no settled repeat with allocation figures" in shown.stderr
    assert shown.returncode == (2 if refused else 0), shown.stderr
    assert "dropped sampled allocation stacks" in shown.stderr and 'period = "' in shown.stderr
