"""Latency within turns (workloads/turn_latency.py + workloads/turns.lua) with the real sysbench: a test
script whose events sleep 2 ms, run through the wrapper; once without pauses, once stopped
(SIGSTOP) for 0.6 s between two turns as the interleaved design does. No database: the script
issues no queries, so what is checked is the timing, the histogram and the exclusion alone."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from perflab.places.proc import clean_env
from perflab.workloads.turn_latency import WRAPPER, TurnClock
from perflab.workloads.sysbench_output import histogram_percentile, parse_histogram

# alone (make test runs the quiet modules first, one at a time): latencies of a few milliseconds within turns
pytestmark = pytest.mark.quiet

SLEEPER = """
local ffi = require("ffi")
ffi.cdef[[int usleep(unsigned int usec);]]
function event() ffi.C.usleep(2000) end
"""
THREADS = 2


def _own(out: str) -> tuple[int, float]:
    """sysbench's own count of events and its slowest one (ms), from its General statistics."""
    events = re.search(r"total number of events:\s+(\d+)", out)
    slowest = re.search(r"^\s+max:\s+([\d.]+)", out, re.MULTILINE)
    assert events and slowest, out
    return int(events[1]), float(slowest[1])


def _start(tmp_path: Path, seconds: int) -> tuple[subprocess.Popen[str], TurnClock]:
    script = tmp_path / "sleeper.lua"
    script.write_text(SLEEPER)
    clock = TurnClock.create(tmp_path / "turns", THREADS)
    argv = ["sysbench", str(WRAPPER), f"--threads={THREADS}", f"--time={seconds}", "--events=0",
            "--histogram=on", "--percentile=95", "run"]  # fmt: skip
    env = clean_env(clock.environment(str(script)))
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), clock


def test_events_within_one_turn_are_all_counted_with_their_latency(tmp_path: Path) -> None:
    child, clock = _start(tmp_path, 2)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0, out
    hist = clock.read()
    events, _ = _own(out)
    # every event sysbench counted is in the histogram (none spanned: there was no pause)
    assert hist.spanned == 0
    assert hist.events == events > 100
    summary = hist.summary()
    # a bucket's value is its centre: an event of 2.01 ms can be in the bucket of 1.996 ms
    low = 2.0 / 1.02
    assert low <= summary["min"] <= summary["p50"] <= summary["p95"] <= summary["max"], summary
    assert summary["p50"] <= 3.0 and 2.0 <= summary["avg"] <= 3.0, summary
    # the same buckets as sysbench's own histogram of the same events
    theirs = histogram_percentile(parse_histogram(out), 50)
    assert theirs is not None and abs(summary["p50"] - theirs) / theirs < 0.05, (summary, theirs)


def test_an_event_stopped_between_turns_is_left_out(tmp_path: Path) -> None:
    child, clock = _start(tmp_path, 4)
    clock.advance()  # the first turn
    time.sleep(1.0)
    child.send_signal(signal.SIGSTOP)
    time.sleep(0.6)  # the other servers' turns
    clock.advance()
    child.send_signal(signal.SIGCONT)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0, out
    events, slowest = _own(out)
    hist = clock.read()
    # sysbench's own figures count the pause: its slowest event took the 0.6 s
    assert slowest >= 550
    # here the events in flight at the pause (one a thread at most) are apart, not in the latency
    assert 1 <= hist.spanned <= THREADS
    assert hist.events + hist.spanned == events
    assert hist.summary()["max"] < 100, hist.summary()
    assert hist.spanned_share() == round(hist.spanned / events, 6)


def test_the_wrapper_sums_sysbenchs_own_reports_and_still_prints_them(tmp_path: Path) -> None:
    """turns.lua's report hook (workloads/turn_counts.py's queries per event): sysbench's per-second
    counts are summed into the shared file, and its report lines are printed as without the hook
    (perflab's parsers read them)."""
    script = tmp_path / "sleeper.lua"
    script.write_text(SLEEPER)
    clock = TurnClock.create(tmp_path / "turns", THREADS)
    argv = ["sysbench", str(WRAPPER), f"--threads={THREADS}", "--time=3", "--events=0", "--report-interval=1",
            "--histogram=on", "run"]  # fmt: skip
    done = subprocess.run(argv, env=clean_env(clock.environment(str(script))), capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    reports = re.findall(r"^\[ (\d+)s \] thds: 2 tps: ([\d.]+) qps: 0\.00 \(r/w/o: 0\.00/0\.00/0\.00\)", done.stdout,
                         re.MULTILINE)  # fmt: skip
    assert len(reports) >= 2, done.stdout
    reads, writes, other, events = clock.reported()
    own, _ = _own(done.stdout)
    # no queries (the script makes none); the events of every report, at most sysbench's total
    assert (reads, writes, other) == (0, 0, 0)
    printed = sum(float(tps) for _, tps in reports)  # a report's tps is its count over about 1 s
    assert 0.8 * printed <= events <= own and events > 100, (events, printed, own)
    clock.close()
