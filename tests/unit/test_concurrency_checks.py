"""High concurrency before anything starts: the open-files limit perflab raises and checks, the
server's max_connections, and sysbench's "Threads started!" that the warm-up is timed from."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perflab.errors import WorkloadError
from perflab.workloads import client
from perflab.places.proc import Child
from tests.conftest import ROOT, perflab
from tests.integration.helpers import write_experiment

SPEC = """
[experiment]
name = "c"
duration = "2s"

[workload]
threads = [{threads}]
{extra}
"""


def _check_with_nofile(spec: Path, soft: int, hard: int) -> subprocess.CompletedProcess:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "perflab", "run", str(spec), "--check"]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, preexec_fn=limit)  # noqa: PLW1509


def test_a_low_hard_open_files_limit_is_refused_before_the_run(tmp_path: Path):
    spec = write_experiment(tmp_path / "s.toml", SPEC.format(threads=1024, extra=""))
    done = _check_with_nofile(spec, 1024, 1500)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "workload.threads: expected an open-files limit of at least 2048" in done.stderr
    assert "ulimit -n 1500 (hard 1500)" in done.stderr and "LimitNOFILE" in done.stderr


def test_a_low_soft_limit_is_raised_to_the_hard_one(tmp_path: Path):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert hard >= 2048, "this machine's hard open-files limit is too low for the test"
    spec = write_experiment(tmp_path / "s.toml", SPEC.format(threads=1024, extra=""))
    done = _check_with_nofile(spec, 1024, hard)
    assert "open-files limit" not in done.stderr, done.stderr


def test_max_connections_below_the_threads_names_the_key(tmp_path: Path):
    extra = "[server_options]\nmax_connections = 500"
    done = perflab("run", str(write_experiment(tmp_path / "s.toml", SPEC.format(threads=1024, extra=extra))), "--check")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "server_options.max_connections (default): expected at least 1026" in done.stderr
    assert "found 500" in done.stderr


def test_bad_profile_target_names_the_key(tmp_path: Path):
    extra = '[observe]\npmp = { targets = ["server", "sysbench"] }'
    done = perflab("run", str(write_experiment(tmp_path / "s.toml", SPEC.format(threads=4, extra=extra))), "--check")
    assert done.returncode == 2 and "observe.pmp.targets.1" in done.stderr and "'client'" in done.stderr
    empty = "[observe]\nperf = { targets = [] }"
    done = perflab("run", str(write_experiment(tmp_path / "e.toml", SPEC.format(threads=4, extra=empty))), "--check")
    assert done.returncode == 2 and "observe.perf.targets" in done.stderr


def test_the_warmup_is_timed_from_threads_started(tmp_path: Path):
    out = tmp_path / "out.txt"
    script = (
        "import time; print('Initializing', flush=True); time.sleep(0.4); "
        "print('Threads started!', flush=True); time.sleep(5)"
    )
    out.write_text("")
    with out.open("w") as sink:
        child = Child([sys.executable, "-c", script], stdout=sink)
    with child:
        begun = time.monotonic()
        seen = client.wait_threads_started(out, child, 10)
        assert 0.3 < seen - begun < 3.0 and child.poll() is None
        child.kill()


def test_a_late_look_still_times_the_warmup_from_when_the_line_was_written(tmp_path: Path):
    """perflab starts watching for the line 1.5 s late (a VM pause, or profilers attaching): the
    origin is when sysbench wrote it, from the file's last write, the line or a report after it."""
    for reports, written in (("", 0.0), ("[ 1s ] thds: 2 tps: 10.00\n", 1.0), ("[ 1s ] a\n[ 2s ] b\n", 2.0)):
        out = tmp_path / "out.txt"
        began = time.monotonic()
        script = f"import time; print('Threads started!\\n', flush=True); time.sleep({written}); "
        script += f"print({reports!r}, end='', flush=True); time.sleep(30)"
        with out.open("w") as sink:
            child = Child([sys.executable, "-c", script], stdout=sink)
        with child:
            while "Threads started!" not in out.read_text() or not out.read_text().endswith(reports or "\n"):
                time.sleep(0.01)
            line_at = time.monotonic() - written  # within the interpreter's start, after `began`
            time.sleep(1.5)
            seen = client.wait_threads_started(out, child, 10)
            child.kill()
        assert began < seen and abs(seen - line_at) < 0.3, (reports, seen - began, line_at - began)


def test_a_client_that_never_starts_its_threads_is_killed_with_a_hint(tmp_path: Path):
    out = tmp_path / "out.txt"
    with out.open("w") as sink:
        child = Child([sys.executable, "-c", "import time; time.sleep(30)"], stdout=sink)
    with child, pytest.raises(WorkloadError) as raised:
        client.wait_threads_started(out, child, 0.5)
    assert "did not start its threads within 0.5 s" in raised.value.message
    assert "max_connections" in raised.value.hint


def test_a_window_begun_after_the_client_ended_fails_the_cell(tmp_path: Path):
    """perflab late past the client's whole run (a pause, a starved process): the window's
    counters would cover none of it, so the cell fails with the cause instead of being ok with a
    server CPU of nothing (CI, 5 test workers: a client's RSS and faults came out null)."""
    with (tmp_path / "out.txt").open("w") as sink:
        ended = Child([sys.executable, "-c", "pass"], stdout=sink)
    with ended:
        ended.wait(timeout=30)
        with pytest.raises(WorkloadError, match=r"began the measured window \d+\.\d s late, after sysbench had ended"):
            client.window_began(ended, time.monotonic() - 2.5)
    with (tmp_path / "out3.txt").open("w") as sink:  # a client that failed says so itself, later
        failed = Child([sys.executable, "-c", "raise SystemExit(3)"], stdout=sink)
    with failed:
        failed.wait(timeout=30)
        client.window_began(failed, time.monotonic() - 2.5)
    with (tmp_path / "out2.txt").open("w") as sink:
        running = Child([sys.executable, "-c", "import time; time.sleep(30)"], stdout=sink)
    with running:
        client.window_began(running, time.monotonic())  # still running: the window covers it
        running.kill()
