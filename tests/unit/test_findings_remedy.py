"""The remedy a report gives for comparisons without a verdict (report/findings.py): a sequential
MariaDB run is pointed at design = "interleaved", the design that resolves 2-3% on this VM; a run
that is already interleaved, or a PostgreSQL run (which cannot be), is not."""

from __future__ import annotations

import pytest

from perflab.report import findings


def missed(experiment: dict) -> str:
    meta = {
        "experiment": experiment,
        "adaptive": {
            "stop": "verdict", "rounds": 10, "max_repeats": 10, "stop_reason": "max_repeats",
            "comparisons": [{"variant": "b", "threads": 2, "verdict": "inconclusive", "round": None}],
        },
    }  # fmt: skip
    [found] = [f for f in findings.collect([], [], meta) if f.kind == "adaptive-missed"]
    assert found.text.startswith("b at 2 threads: no verdict after 10 rounds. Remedy: raise budget (or max_repeats)")
    return found.text


@pytest.mark.parametrize(
    "experiment",
    [{"design": "sequential", "server": "mariadb"}, {}, {"design": "sequential", "server": "postgresql"}],
)
def test_a_sequential_sysbench_run_is_pointed_at_the_interleaved_design(experiment: dict) -> None:
    assert 'design = "interleaved"' in missed(experiment)  # {}: a run from before the design existed


@pytest.mark.parametrize(
    "experiment",
    [
        {"design": "interleaved", "server": "mariadb"},
        {"design": "sequential", "server": "postgresql", "workload": {"tool": "pgbench", "test": "select-only"}},
    ],
)
def test_no_interleaved_remedy_where_it_is_already_or_cannot_be(experiment: dict) -> None:
    assert "interleaved" not in missed(experiment)
