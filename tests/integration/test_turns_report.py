"""turns.lua's per-second report with the real sysbench: printed as sysbench's own (C) report is, so
perflab's parsers read it, and at a --rate with the "queue length" line that gives the backlog.

sysbench 1.0.20's Lua `sysbench.report_default`, which the hook used to call, prints "err/s 0.00"
(no colon, so no line parsed) and leaves out the queue line: bench/fixed_rate.py, which runs at a
rate through the wrapper to time the service alone, saw no second of its window and no backlog.
No database: the script's events sleep 2 ms and issue no queries. What is checked is the format,
and one overload far beyond what any load on the machine could make kept (not a timing)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from perflab.places.proc import clean_env
from perflab.workloads import sysbench_output
from perflab.workloads.turn_latency import WRAPPER, TurnClock

SLEEPER = """
local ffi = require("ffi")
ffi.cdef[[int usleep(unsigned int usec);]]
function event() ffi.C.usleep(2000) end
"""
THREADS = 2  # at most 1,000 events a second between them


def _run(tmp_path: Path, *options: str) -> str:
    script = tmp_path / "sleeper.lua"
    script.write_text(SLEEPER)
    clock = TurnClock.create(tmp_path / "turns", THREADS)
    argv = ["sysbench", str(WRAPPER), f"--threads={THREADS}", "--time=4", "--events=0", "--report-interval=1",
            "--report-checkpoints=1", "--histogram=on", "--percentile=95", *options, "run"]  # fmt: skip
    try:
        done = subprocess.run(argv, env=clean_env(clock.environment(str(script))), capture_output=True, text=True,
                              timeout=60, check=False)  # fmt: skip
    finally:
        clock.close()
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# sysbench's last report races its end: the last second may be missing, or its queue line, or it may
# count fewer threads (tests/integration/test_fixed_rate.py); never another second
def test_a_closed_loops_reports_parse_as_sysbenchs_own(tmp_path: Path) -> None:
    out = _run(tmp_path)
    seconds = sysbench_output.parse_intervals(out)
    assert [iv.t for iv in seconds] in ([1, 2, 3, 4], [1, 2, 3]), out
    assert all(iv.threads == THREADS and 0 < iv.tps <= 1100 for iv in seconds[:-1]), seconds
    # (the checkpoint's second shows p95 0: sysbench reset its histogram for the checkpoint report)
    assert seconds[-2].p95_ms >= 1.9, seconds
    assert "queue length" not in out  # no rate, no queue
    assert sysbench_output.parse_rate(out, 1) is None


def test_at_a_rate_each_second_has_its_backlog(tmp_path: Path) -> None:
    out = _run(tmp_path, "--rate=200")
    record = sysbench_output.parse_rate(out, 1)
    assert record is not None and record["target"] == 200, out
    assert [s["t"] for s in record["seconds"]] in ([2, 3, 4], [2, 3]), record
    assert all(s["backlog_s"] is not None and s["achieved"] > 0 for s in record["seconds"][:-1]), record


def test_an_overloaded_rate_is_not_kept_and_its_backlog_recorded(tmp_path: Path) -> None:
    # 4,000 a second against at most 1,000: some 9,000 events queued after 3 s, over 2 s of arrivals
    out = _run(tmp_path, "--rate=4000")
    record = sysbench_output.parse_rate(out, 1)
    assert record is not None and not record["kept"], record
    assert max(s["backlog_s"] or 0.0 for s in record["seconds"]) > 1.0, record
