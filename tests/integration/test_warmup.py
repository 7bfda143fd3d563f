"""Warm-up detection on a real run: a workload whose throughput ramps (tests/data/workloads/
ramp.lua: about half the steady rate at the start, climbing linearly for --ramp-seconds) must
never come out settled with the ramp inside the measured window; the same workload without a
ramp must. One run of three cells: no ramp, a ramp that ends a third of the way into the
series (MSER sees its end: the "late" rule), and one longer than half the series (MSER's
edge: the "long" rule)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT, perflab
from tests.integration.helpers import write_experiment

RAMP = ROOT / "tests" / "data" / "workloads" / "ramp.lua"

EXPERIMENT = f"""
[experiment]
name = "it-warmup"
warmup = "2s"
duration = "16s"
repeats = 1

[dataset]
tables = 1
table_size = 2000

[workload]
test = "{RAMP}"
threads = [2]
options = {{ point_selects = 4, simple_ranges = 1, sum_ranges = 0, order_ranges = 1, distinct_ranges = 0, range_size = 50 }}

[variants.ramp]
none = {{ workload_options = {{ ramp_seconds = 0 }} }}
late = {{ workload_options = {{ ramp_seconds = 7 }} }}
long = {{ workload_options = {{ ramp_seconds = 15 }} }}
"""


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("warmup")
    out = tmp / "results"
    done = perflab("run", str(write_experiment(tmp / "warmup.toml", EXPERIMENT)), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab("export", str(out)).stdout)
    return {cell["variant"]["ramp"]: cell | {"dir": out} for cell in exported["cells"]}


def qps(cell: dict) -> list[float]:
    return [iv["qps"] for iv in sorted(cell["intervals"], key=lambda iv: iv["t"])]


def test_the_ramp_is_real(cells: dict[str, dict]) -> None:
    # the script does what it says: the ramped cells start well below their own end
    for name in ("late", "long"):
        series = qps(cells[name])
        assert sum(series[:2]) / 2 < 0.8 * sum(series[-3:]) / 3, (name, series)


def test_no_ramp_is_settled(cells: dict[str, dict]) -> None:
    cell = cells["none"]
    assert cell["settled"] is True, (cell["unsettled_reason"], qps(cell))


@pytest.mark.parametrize("name", ["late", "long"])
def test_a_ramp_into_the_window_is_unsettled(cells: dict[str, dict], name: str) -> None:
    cell = cells[name]
    assert cell["settled"] is False, (cell["warmup_s"], qps(cell))
    assert "past the window start at 2 s" in cell["unsettled_reason"] or "half the series" in cell["unsettled_reason"]
    assert "set warmup (or max_warmup) to at least" in cell["unsettled_reason"]


def test_the_report_says_so(cells: dict[str, dict]) -> None:
    done = perflab("report", str(cells["none"]["dir"]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("did not settle") == 2, done.stdout
