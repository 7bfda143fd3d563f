"""CI gating (`perflab compare --fail-on slower[:THRESHOLD]`), the run plan of `run --check`,
and the data behind `perflab doctor`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perflab import doctor, spec
from perflab.analyze import gate
from perflab.analyze.compare import Comparison
from perflab.errors import EXIT_REGRESSION, UsageError
from perflab.report import plan
from tests.conftest import perflab
from tests.unit.test_exports import build_matrix


def row(ratio: float | None, verdict: str, metric: str = "qps") -> Comparison:
    low = None if ratio is None else ratio * 0.98
    high = None if ratio is None else ratio * 1.02
    return Comparison(2, {"a": "x"}, {"a": "y"}, metric, ratio, low, high, verdict, "variant", None, 3, 3)


@pytest.mark.parametrize(
    ("text", "threshold"), [("slower", 0.0), ("slower:5%", 0.05), ("slower:0.05", 0.05), (" slower:12.5% ", 0.125)]
)
def test_parse(text: str, threshold: float):
    assert gate.parse(text) == gate.Gate("slower", pytest.approx(threshold))


@pytest.mark.parametrize("text", ["faster", "slower:", "slower:five", "slower:100%", "slower:-1%", "slower:nan", ""])
def test_parse_refuses_with_a_hint(text: str):
    with pytest.raises(UsageError) as exc:
        gate.parse(text)
    assert "slower:5%" in (exc.value.hint or "")


def test_fails_only_on_slower_beyond_the_threshold():
    five = gate.parse("slower:5%")
    rows = [row(0.90, "slower"), row(0.97, "slower"), row(0.90, "inconclusive"), row(0.99, "equivalent")]
    assert five.failures(rows) == [row(0.90, "slower")]
    assert gate.parse("slower").fails(row(0.99, "slower"))  # no threshold: any slower verdict
    assert not five.fails(row(0.95, "slower"))  # exactly at the threshold is tolerated
    assert not five.fails(row(1.20, "faster"))
    assert not five.fails(row(None, "inconclusive"))
    assert gate.unjudged([row(None, "inconclusive"), row(0.9, "slower"), row(1.0, "equivalent")]) == 1


def test_latency_regressions_are_ratios_above_one():
    five = gate.parse("slower:5%")
    assert five.fails(row(1.10, "slower", "p95")) and not five.fails(row(1.03, "slower", "p95"))
    assert not five.fails(row(0.80, "faster", "p95"))


def test_message_names_each_regression():
    text = gate.message(gate.parse("slower:5%"), [row(0.9, "slower")])
    assert text.splitlines()[0] == "1 comparison(s) slower by more than 5%:"
    assert "a=y at 2 threads (qps, variant): ratio 0.900 [0.882-0.918]" in text


def test_compare_fail_on_exit_codes(tmp_path: Path):
    """On a matrix where sort_buffer=32M is 0.69x as fast: exit 4 with the regression named;
    0 when the threshold tolerates it or when the baseline is the slow variant."""
    matrix = build_matrix(tmp_path / "m")
    done = perflab("compare", str(matrix), "--fail-on", "slower:5%")
    assert done.returncode == EXIT_REGRESSION == 4, done.stderr
    assert "slower by more than 5%" in done.stderr and "sort_buffer=32M" in done.stderr
    assert "threads" in done.stdout  # the table is printed before the verdict of the gate
    assert perflab("compare", str(matrix), "--fail-on", "slower:40%").returncode == 0
    assert perflab("compare", str(matrix), "--fail-on", "slower", "--baseline", "sort_buffer=32M").returncode == 0
    as_json = perflab("compare", str(matrix), "--fail-on", "slower", "--format", "json")
    assert as_json.returncode == 4 and json.loads(as_json.stdout)  # JSON stays parseable; the reason is on stderr
    bad = perflab("compare", str(matrix), "--fail-on", "slower:lots")
    assert bad.returncode == 2 and "slower:5%" in bad.stderr


def test_compare_two_runs_fail_on(tmp_path: Path):
    """Before/after, as a CI job runs it: B is 0.8x A in every cell."""
    before, after = build_matrix(tmp_path / "a"), build_matrix(tmp_path / "b", scale=0.8)
    done = perflab("compare", str(before), str(after), "--fail-on", "slower:5%")
    assert done.returncode == 4, done.stderr
    assert "4 comparison(s) slower by more than 5%" in done.stderr and "(qps, runs)" in done.stderr
    assert perflab("compare", str(before), str(after), "--fail-on", "slower:25%").returncode == 0
    assert perflab("compare", str(after), str(before), "--fail-on", "slower").returncode == 0  # faster is no failure


def test_report_format_json(tmp_path: Path):
    matrix = build_matrix(tmp_path / "m")
    done = perflab("report", str(matrix), "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["format"] == "perflab-report/1" and len(doc["groups"]) == 4 and doc["findings"]


EXPERIMENT = """[experiment]
name = "plan"
duration = "10s"
repeats = 3
[workload]
threads = [1, 2]
[variants.allocator]
glibc = {}
jemalloc = { preload = "jemalloc" }
"""


def test_plan_line_and_data(tmp_path: Path):
    exp = spec.parse(EXPERIMENT, "plan.toml")
    p = plan.plan(exp, len(exp.cells()), lambda e, n=None: 100.0 if n is None else 10.0 * n)
    assert p["cells"] == 12 and p["axes"] == {"allocator": ["glibc", "jemalloc"]} and p["threads"] == [1, 2]
    assert p["estimated_s"] == 100.0 and p["adaptive"] is None
    assert plan.line(p) == (
        "[bold]plan[/]: 2 allocator x 2 thread counts x 3 repeats = [bold]12 cells[/], estimated 1m40s; each "
        "round's servers at once, clients in 0.1 s turns (design = interleaved)\n  design: interleaved: the file "
        "measures nothing that needs one server at a time (the default)"
    )
    assert p["design"] == "interleaved" and "the default" in p["design_reason"]
    auto = spec.parse(EXPERIMENT.replace("repeats = 3", 'repeats = "auto"\nmax_repeats = 5'), "auto.toml")
    a = plan.plan(auto, len(auto.cells()), lambda e, n=None: 100.0 if n is None else 10.0 * n)
    assert a["adaptive"]["max_cells"] == 20 and a["adaptive"]["max_estimated_s"] == 200.0
    assert "up to 20 cells (3m20s)" in plan.line(a)
    # no repeats: rounds until every comparison has a verdict, within the budget (10 minutes by default)
    default = spec.parse(EXPERIMENT.replace("repeats = 3\n", ""), "default.toml")
    d = plan.plan(default, len(default.cells()), lambda e, n=None: 100.0, max_rounds=22)
    assert d["adaptive"]["stop"] == "verdict" and d["adaptive"]["budget_s"] == 600.0
    assert d["adaptive"]["max_repeats"] == 22 and d["adaptive"]["spending"] == "pocock"
    assert "3+ repeats (auto, until each comparison has a verdict)" in plan.line(d)
    assert "within a budget of 10m" in plan.line(d)


def test_run_check_format_json(tmp_path: Path):
    path = tmp_path / "plan.toml"
    path.write_text(EXPERIMENT)
    done = perflab("run", str(path), "--check", "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["cells"] == 12 and doc["experiment"] == "plan" and doc["estimated_s"] > 0
    text = perflab("run", str(path), "--check")
    assert "= 12 cells" in text.stdout
    assert perflab("run", str(path), "--format", "json").returncode == 2  # JSON describes the check only


def test_doctor_collect_and_json():
    facts = doctor.collect()
    names = [t["name"] for t in facts["tools"]]
    assert {"mariadbd", "sysbench", "inferno-flamegraph"} <= set(names)
    assert facts["ok"] is True and facts["machine"]["cpus"] >= 1
    assert {a["name"] for a in facts["allocators"]} == {"glibc", "jemalloc", "tcmalloc", "mimalloc"}
    done = perflab("doctor", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert [t["name"] for t in json.loads(done.stdout)["tools"]] == names
