"""Profiles per phase: the spans of a cell's phases, and perf samples and pmp rows cut by them."""

from __future__ import annotations

from collections import Counter

import pytest

from perflab.observers.elf import FunctionStarts
from perflab.observers.perf_script import fold_perf_phases, fold_perf_script
from perflab.observers.phases import Spans

# process started at 99, threads started (sysbench's t = 0) at 100, window 110-130, a stall 102-105 s
SPANS = Spans.of_cell(
    started=99.0,
    origin=100.0,
    end=130.0,
    window_start_s=10,
    stalls=[{"start_s": 2, "end_s": 5}],
    intervals=[{"t": float(t), "tps": 0.0 if 3 <= t <= 5 else 100.0} for t in range(1, 31)],
    window_transactions=2000,
)


def test_phases_overlap_and_connecting_is_a_phase_of_its_own():
    assert SPANS.phases_at(99.5) == ("connect",)  # sysbench's threads connecting, before its clock starts
    assert SPANS.phases_at(103.0) == ("warmup", "stall")
    assert SPANS.phases_at(110.0) == ("measured",)
    assert SPANS.phases_at(130.0) == () and SPANS.phases_at(98.0) == ()


def test_seconds_and_transactions_of_what_a_profiler_saw():
    pmp = (109.5, 131.0)  # started with the window, half a second early, stopped after the end
    assert SPANS.seconds("measured", pmp) == 20.0 and SPANS.transactions("measured", pmp) == 2000
    assert SPANS.seconds("warmup", pmp) == 0.5 and SPANS.seconds("stall", pmp) == 0.0
    perf = (99.2, 131.0)  # from the workload's start
    assert SPANS.seconds("warmup", perf) == 10.0 and SPANS.seconds("connect", perf) == pytest.approx(0.8)
    assert SPANS.seconds("stall", perf) == 3.0
    # seconds 3, 4, 5 had no transactions, second 2 (101-102 s) is outside the stall: 102-105 s holds
    # the end of second 3 (0 tps)... and nothing else
    assert SPANS.transactions("stall", perf) == 0.0
    assert SPANS.transactions("warmup", perf) == pytest.approx(100 * 10 - 300)  # seconds 1-10 less 3-5
    half = (120.0, 131.0)
    assert SPANS.transactions("measured", half) == pytest.approx(1000)


PERF_TEXT = """\
mariadbd 42 99.900000:
\t          1010 do_connect (/usr/sbin/mariadbd)

mariadbd 42 103.000000:
\t          1010 do_connect (/usr/sbin/mariadbd)
\t          2010 mprotect (/usr/sbin/mariadbd)

mariadbd 43 115.000000:
\t          3010 do_command (/usr/sbin/mariadbd)

mariadbd 43 140.000000:
\t          3010 do_command (/usr/sbin/mariadbd)
"""


def test_perf_samples_are_cut_by_their_time():
    starts = lambda path: FunctionStarts("mariadbd", [0x1000])  # noqa: E731
    folds = fold_perf_phases(PERF_TEXT.splitlines(keepends=True), SPANS.phases_at, starts)
    assert set(folds) == {"connect", "warmup", "stall", "measured"}
    assert folds["connect"][0] == Counter({"do_connect": 1})
    assert folds["warmup"][0] == Counter({"mprotect;do_connect": 1})
    assert folds["stall"][0] == Counter({"mprotect;do_connect": 1}) and folds["stall"][1].samples == 1
    assert folds["measured"][0] == Counter({"do_command": 1})  # the sample after the end is in no phase
    # without a clock every sample is the window's (the text may then have no time field)
    stacks, stats = fold_perf_script(PERF_TEXT.splitlines(keepends=True), starts)
    assert stats.samples == 4 and stacks["do_command"] == 2
