"""tests/freezes.py, the tests' own measure of a pause of this VM: a stopped process sees what a
paused guest sees (its clock jumps by the seconds it did not run), so SIGSTOP stands in for it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT
from tests.freezes import Freezes, sleep_running

WATCHED = """
import json, sys, time
from tests.freezes import Freezes, sleep_running
print("ready", flush=True)
if sys.argv[1] == "watch":
    with Freezes() as freezes:
        time.sleep(1.5)
    print(json.dumps({"lost": freezes.lost(), "pauses": freezes.pauses}), flush=True)
else:
    t0 = time.monotonic()
    lost = sleep_running(0.6)
    print(json.dumps({"lost": lost, "took": time.monotonic() - t0}), flush=True)
"""


def stopped_for(mode: str, seconds: float) -> dict:
    """Run WATCHED in `mode`, stopped for `seconds` 0.3 s after it is ready; its report."""
    proc = subprocess.Popen([sys.executable, "-c", WATCHED, mode], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        proc.send_signal(signal.SIGSTOP)
        time.sleep(seconds)
        proc.send_signal(signal.SIGCONT)
        return json.loads(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_a_pause_is_counted_once_however_many_cpus_saw_it():
    report = stopped_for("watch", 1.0)
    # every CPU's watcher saw the same second: one second lost, not one per CPU
    assert report["lost"] == pytest.approx(1.0, abs=0.15), report
    assert len(report["pauses"]) >= 1


def test_sleep_running_sleeps_the_lost_seconds_again():
    report = stopped_for("sleep", 1.0)
    assert report["lost"] == pytest.approx(1.0, abs=0.15), report
    assert report["took"] == pytest.approx(0.6 + report["lost"], abs=0.1), report


def test_the_two_measures_agree():
    """Without a pause both say 0.0 (a busy machine's late wake-ups are not pauses); a real pause
    of this VM meanwhile, both say it."""
    with Freezes() as freezes:
        lost = sleep_running(0.3)
    assert lost == pytest.approx(freezes.lost(), abs=0.05), (lost, freezes.pauses)


def test_lost_merges_the_cpus_pauses_and_cuts_them_to_a_span():
    freezes = Freezes(cpus=[])
    freezes.pauses = [(100.0, 102.0), (101.5, 102.5), (110.0, 111.0)]  # two CPUs' view of one pause, then another
    assert freezes.lost() == 3.5
    assert freezes.lost(101.0, 105.0) == 1.5 and freezes.lost(102.5, 110.0) == 0.0
    # a cell's span: whole seconds, so the second after its end counts too
    cell = {"started_at": "1970-01-01T00:01:41+00:00", "ended_at": "1970-01-01T00:01:50+00:00"}
    assert freezes.in_cell(cell) == 2.5  # 101-102.5 and 110-111
