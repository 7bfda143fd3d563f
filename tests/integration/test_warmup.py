"""Warm-up detection on a real run: a workload whose throughput ramps (tests/data/workloads/
ramp.lua: each client thread on a schedule of its own, --pace transactions a second, starting at a
quarter of that and climbing for --ramp-seconds) must never come out settled with the ramp inside
the measured window. One run of three cells: no ramp (the control), a ramp that ends a third of the
way into the series (MSER sees its end), and one three quarters as long (MSER cannot: the window
still climbs). Three cells of 12 s (a 10 s window since 2026-11-30: 16 s took 96 s; at 10 s, 68 s,
MSER placing the 4 s ramp's end at 4 s), and `measure_again = false` since 2026-12-01: the two cells
unsettled on purpose are not measured again (two cells of 12 s less; measuring again on real runs:
test_decisive_real). The schedule is absolute, so the series has its shape whatever runs beside it, as long as the
machine serves the pace. Beside four other workers it did not (CI, 2026-11-28: the control fell to
177 of 300 a second, a ramped cell to 290 queries a second at its end), so the module runs alone,
with the quiet ones."""

from __future__ import annotations

import json
import statistics

import pytest

from tests.conftest import ROOT, perflab
from tests.integration.helpers import write_experiment

# alone (make test runs the quiet modules first, one at a time): the pace served
pytestmark = pytest.mark.quiet

RAMP = ROOT / "tests" / "data" / "workloads" / "ramp.lua"
PACE = 150  # a thread's; 2 threads: 300 transactions a second, well within a busy machine's means

EXPERIMENT = f"""
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-warmup"
warmup = "2s"
duration = "10s"
repeats = 1
measure_again = false  # the ramped cells are unsettled on purpose: once each is enough

[dataset]
tables = 1
table_size = 2000

[workload]
test = "{RAMP}"
threads = [2]

[workload.options]
pace = {PACE}  # transactions a second a thread: the ramp's schedule (ramp.lua)
point_selects = 4
simple_ranges = 1
sum_ranges = 0
order_ranges = 1
distinct_ranges = 0
range_size = 50

[variants.ramp]
none = {{ workload_options = {{ ramp_seconds = 0 }} }}
late = {{ workload_options = {{ ramp_seconds = 4 }} }}
long = {{ workload_options = {{ ramp_seconds = 9 }} }}
"""


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("warmup")
    out = tmp / "results"
    done = perflab("run", str(write_experiment(tmp / "warmup.toml", EXPERIMENT, pace=None)), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab("export", str(out)).stdout)
    return {cell["variant"]["ramp"]: cell | {"dir": out} for cell in exported["cells"]}


def qps(cell: dict) -> list[float]:
    return [iv["qps"] for iv in sorted(cell["intervals"], key=lambda iv: iv["t"])]


def test_the_ramp_is_real(cells: dict[str, dict]) -> None:
    # the script does what it says: the ramped cells start well below their own end
    for name in ("late", "long"):
        series = qps(cells[name])
        assert sum(series[:2]) / 2 < 0.6 * sum(series[-3:]) / 3, (name, series)


def tps(cell: dict) -> list[float]:
    return [iv["tps"] for iv in sorted(cell["intervals"], key=lambda iv: iv["t"])]


def served(series: list[float]) -> bool:
    """The schedule of both threads held over `series`: its median second within 5% of the pace,
    and none below three quarters of it (a busy machine's second, at times 10% short, seen here)
    but one in eight at most: a second the VM stood still in (ci32, 2026-11-28: one such second in
    the parallel part, the others at 295-300 of 300) is the machine's, not the schedule's."""
    pace = 2 * PACE
    short = sum(1 for x in series if x < 0.75 * pace)
    return abs(statistics.median(series) - pace) <= 0.05 * pace and short <= len(series) // 8


def test_without_a_ramp_the_pace_holds_from_the_start(cells: dict[str, dict]) -> None:
    series = tps(cells["none"])
    # the schedule held (the machine served it), and nothing throttled the start
    assert served(series[1:]), series
    assert sum(series[:2]) / 2 > 0.6 * sum(series[-3:]) / 3, series


@pytest.mark.parametrize("name", ["late", "long"])
def test_a_ramp_into_the_window_is_unsettled(cells: dict[str, dict], name: str) -> None:
    cell = cells[name]
    assert cell["settled"] is False, (cell["warmup_s"], qps(cell))
    assert "set warmup (or max_warmup) to at least" in cell["unsettled_reason"]
    # MSER places the end of the 4 s ramp after its middle: on a schedule, its seconds after the
    # ramp are flat, whatever runs beside it. (Unpaced, the noise of a busy machine hid the end:
    # MSER kept 0 s, while the cell was still flagged by the climb rule. The flag is the property
    # that holds under any load; the placement holds where the schedule was served.)
    if name == "late" and served(tps(cell)[5:]):
        assert cell["warmup_s"] >= 3, (cell["warmup_s"], qps(cell))


def test_the_report_says_so(cells: dict[str, dict]) -> None:
    out = cells["none"]["dir"]
    done = perflab("report", str(out))
    assert done.returncode == 0, done.stderr
    # every stored cell, and none measured again (measure_again = false): the unsettled ones are told of
    every = json.loads(perflab("export", str(out)).stdout)["cells"]
    assert len(every) == 3 and all(c["retry_of"] is None for c in every), [c["key"] for c in every]
    unsettled = sum(1 for c in every if not c["settled"])
    assert done.stdout.count("did not settle") == unsettled >= 2, done.stdout
