"""A stack sampler started paused (a window-only pmp profile): ready before the window, its
symbol-loading sample discarded, its samples and its span from the first resume() on. Against a
real process (a sleeping child), through the real resident sampler (ptrace, libdw)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from perflab.observers.pmp import StackSampler


@pytest.fixture
def sleeper():
    child = subprocess.Popen(["sleep", "30"])
    time.sleep(0.05)  # exec'd
    yield child.pid
    child.kill()
    child.wait()


@pytest.mark.parametrize("tree", [False, True])
def test_paused_sampler_samples_only_after_resume(sleeper: int, tmp_path: Path, tree: bool) -> None:
    with StackSampler(sleeper, tmp_path, interval=0.05, paused=True, tree=tree) as sampler:
        assert sampler.waiting
        time.sleep(0.5)  # paused: nothing recorded, whatever the interval
        resumed = time.monotonic()
        sampler.resume()
        assert not sampler.waiting
        time.sleep(0.5)
    rows = sampler.rows()
    assert rows, "no sample after resume()"
    times = [sampler.origin + t for t, _tid, _frames in rows]
    assert min(times) >= resumed - 0.005  # the discarded symbol-loading sample is not in them
    start, end = sampler.covered()
    assert start == pytest.approx(resumed, abs=0.005) and end > start + 0.4
    assert sampler.origin < resumed - 0.4  # the clock began at the sampler's start, long before
    if tree:
        assert sampler.processes == [sleeper]  # its `#process` line came with its first real sample


def test_unpaused_sampler_covers_from_its_start(sleeper: int, tmp_path: Path) -> None:
    before = time.monotonic()
    with StackSampler(sleeper, tmp_path, interval=0.05) as sampler:
        assert not sampler.waiting
        time.sleep(0.3)
    sampler.rows()
    start, _ = sampler.covered()
    assert before <= start <= sampler.span[0] and start == min(sampler.origin, sampler.span[0])
