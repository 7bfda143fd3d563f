"""Steal time in the reports (report/findings.py): the cells that lost more than STEAL_CORES to
the host's other guests are named in a warning that also counts in the verdicts' caution; a
run with less steal gets one informational line with its mean; an older run without the field,
or an idle host, gets nothing."""

from __future__ import annotations

from perflab.report import findings, phrases


def cells(*steal: float | None) -> list[dict]:
    out = []
    for i, s in enumerate(steal):
        resources = {"other_cpu_cores": 0.0} if s is None else {"other_cpu_cores": 0.0, "steal_cpu_cores": s}
        out.append({"id": i + 1, "status": "ok", "key": f"v/t2/r{i + 1}", "resources": resources, "stalls": []})
    return out


def steal_findings(run: list[dict]) -> list[findings.Finding]:
    return [f for f in findings.collect([], run, {}) if f.kind == "steal"]


def test_cells_that_lost_more_than_the_threshold_are_named_worst_first():
    [found] = steal_findings(cells(0.05, 0.45, 0.31, 0.1))
    assert found.level == "warning" and found.cells == (2, 3)
    assert "2 of 4 cells lost more than 0.2 cores" in found.text
    assert found.text.index("cell 2 0.45") < found.text.index("cell 3 0.31")
    assert "mean of the run 0.23" in found.text
    assert "host steal time (1)" in phrases.caution([found])


def test_moderate_steal_is_one_line_that_does_not_undermine_the_verdicts():
    [found] = steal_findings(cells(0.05, 0.1, 0.08))
    assert found.level == "info" and "took 0.08 cores" in found.text
    assert phrases.caution([found]) == ""


def test_an_idle_host_and_an_older_run_get_nothing():
    assert steal_findings(cells(0.0, 0.01, 0.02)) == []
    assert steal_findings(cells(None, None)) == []
