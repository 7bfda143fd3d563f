"""The defaults on a real run (issue 32): a file with neither `design` nor `repeats` runs
interleaved and rounds until a verdict within its budget, and a cell that does not settle is
measured again once, in a later group of its own round's cells, and used in its place.

The unsettled cell is made so on purpose: tests/data/workloads/ramp.lua with a ramp (in
transactions: the client's own running time) longer than the whole cell, so its throughput climbs
through the window, alone and relative to the other server, and it never settles. Its comparison
then never gets a verdict, and the run ends on its budget."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import ROOT, perflab
from tests.integration.helpers import write_experiment

RAMP = ROOT / "tests" / "data" / "workloads" / "ramp.lua"
BUDGET_S = 50

EXPERIMENT = f"""
[experiment]
name = "it-decisive"
warmup = "1s"
duration = "6s"      # the climb rule needs 6 seconds of window
budget = "{BUDGET_S}s"

[dataset]
tables = 1
table_size = 2000

[workload]
test = "{RAMP}"
threads = [2]

[workload.options]
point_selects = 4
simple_ranges = 1
sum_ranges = 0
order_ranges = 1
distinct_ranges = 0
range_size = 50

[variants.ramp]
none = {{ workload_options = {{ ramp_seconds = 0 }} }}
long = {{ workload_options = {{ ramp_events = 8000 }} }}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict, float]:
    tmp = tmp_path_factory.mktemp("decisive")
    spec = write_experiment(tmp / "decisive.toml", EXPERIMENT)
    check = perflab("run", str(spec), "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    t0 = time.monotonic()
    done = perflab("run", str(spec), "-o", str(tmp / "results"))
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stdout + done.stderr
    exported = perflab("export", str(tmp / "results"))
    assert exported.returncode == 0, exported.stderr
    return check.stdout, json.loads(exported.stdout), took


def test_the_check_says_what_the_defaults_chose(run):
    check, _, _ = run
    assert "interleaved" in check and "verdict" in check
    assert "50s" in check or "0:50" in check or "50 s" in check, check


def test_no_design_named_runs_interleaved_and_says_why(run):
    _, doc, _ = run
    assert doc["run"]["design"] == "interleaved" and doc["run"]["design_reason"]
    assert all(c["design"] and c["design"]["name"] == "interleaved" for c in doc["cells"] if c["status"] == "ok")


def test_without_repeats_it_rounds_until_a_verdict_within_the_budget(run):
    _, doc, took = run
    rounds = {c["repeat"] for c in doc["cells"]}
    assert len(rounds) >= 3  # at least 3 rounds
    # the long ramp never settles, so its comparison never has a verdict: the budget ends the run,
    # at most one round's time (plus start-up and the prepared dataset) after it
    assert took < BUDGET_S + 60, took
    adaptive = doc["adaptive"]
    assert adaptive["spending"] == "pocock"
    long_verdicts = [
        c["verdict"] for c in doc["comparisons"] if c["variant"] == {"ramp": "long"} and c["metric"] == "qps"
    ]
    assert long_verdicts and all(v.startswith("inconclusive") or v == "n/a" for v in long_verdicts), long_verdicts


def test_an_unsettled_cell_is_measured_again_once_with_its_group(run):
    _, doc, _ = run
    cells = {c["id"]: c for c in doc["cells"]}
    firsts = [c for c in cells.values() if c["retry_of"] is None]
    retries = [c for c in cells.values() if c["retry_of"] is not None]
    unsettled = [c for c in firsts if c["variant"]["ramp"] == "long" and c["status"] == "ok" and not c["settled"]]
    assert unsettled, "the long ramp must come out unsettled"
    replaced = {c["retry_of"] for c in retries}
    assert len(replaced) == len(retries), "a cell is measured again at most once"
    assert not any(cells[c["retry_of"]]["retry_of"] for c in retries), "a retry is not retried"
    for cell in retries:
        old = cells[cell["retry_of"]]
        assert old["repeat"] == cell["repeat"] and old["variant"] == cell["variant"] and cell["id"] > old["id"]
        # the whole group ran again, together: the retry's group holds only retries of the old group's cells
        assert sorted(cells[i]["retry_of"] for i in cell["design"]["group"]) == sorted(old["design"]["group"])
    # every unsettled first measurement of a round that was followed by another was measured again
    last_round = max(c["repeat"] for c in firsts)
    for cell in unsettled:
        if cell["repeat"] < last_round:
            assert cell["id"] in replaced, cell["id"]
