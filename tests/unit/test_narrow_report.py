"""The terminal's tables at 80, 100 and 120 columns: every ratio, interval and verdict whole, the
lesser columns left out first, and the line under the table naming them (report/fit.py).

`perflab report` and `compare` run as a user runs them, in a subprocess with $COLUMNS set (piped
output is 150 columns wide without it), on a copy of the recorded run in tests/data/report/tiny.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

from perflab.report import fit
from tests.conftest import ROOT, perflab

DATA = Path(__file__).resolve().parent.parent / "data" / "report"
WIDE_HEADERS = ["n", "QPS mean", "95% CI", "CV", "p95 ms", "RSS end", "minflt/txn", "CPU µs/txn", "stalls"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("narrow") / "tiny"
    shutil.copytree(DATA / "tiny", copy)  # opening a database writes beside it: never in tests/data
    return copy


@pytest.fixture(scope="module")
def comparisons(tiny: Path) -> list[dict]:
    done = perflab("compare", str(tiny), "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert rows and all(r["ratio"] is not None and r["ci_low"] is not None for r in rows)
    return rows


def at(columns: int, *args: str) -> str:
    env = {**os.environ, "COLUMNS": str(columns)}
    done = subprocess.run(
        [sys.executable, "-m", "perflab", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= columns  # really that width
    return done.stdout


def left_out(output: str) -> list[str]:
    """The columns the line under a table names ("left out at 80 columns: A, B (...)"), lines joined."""
    joined = " ".join(output.split())
    found = re.findall(r"left out at \d+ columns: (.*?) \(a wider terminal shows them\)", joined)
    return [name for names in found for name in names.split(", ")]


def header_of(output: str) -> str:
    """The header row(s) of the first table (between its top border and the rule under the header)."""
    lines = output.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    rule = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    return "\n".join(lines[top + 1 : rule])


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_every_ratio_interval_and_verdict_is_whole(tiny: Path, comparisons: list[dict], columns: int):
    report = at(columns, "report", str(tiny))
    for c in comparisons:
        assert f"{c['ratio']:.3f}" in report and f"[{c['ci_low']:.3f}-{c['ci_high']:.3f}]" in report
        assert c["verdict"] in report and f"+{c['rounds_needed']}" in report  # inconclusive (+47 rounds)
    assert "…" not in report.split("Where the noise comes from")[0]
    dropped = left_out(report)
    assert dropped, f"at {columns} columns the table cannot hold all twelve columns: some must go"
    header = header_of(report)
    words = set(header.replace("┃", " ").split())
    for name in WIDE_HEADERS:
        shown = all(word in words for word in name.split())
        assert shown != (name in dropped), f"{name}: shown {shown}, named as left out {name in dropped}"
    assert {"allocator", "ratio", "verdict"} <= words  # the key columns never go


def test_the_lesser_columns_go_first(tiny: Path):
    narrow, wider = left_out(at(80, "report", str(tiny))), left_out(at(120, "report", str(tiny)))
    assert wider == narrow[: len(wider)] and len(narrow) > len(wider)
    assert narrow[:3] == ["stalls", "CPU µs/txn", "minflt/txn"]  # an empty column, then the per-transaction figures
    assert "QPS mean" not in narrow and "ratio [95% CI]" not in narrow


def test_a_wide_pipe_leaves_nothing_out(tiny: Path):
    done = perflab("report", str(tiny))  # no $COLUMNS, not a terminal: 150 columns
    assert done.returncode == 0 and not left_out(done.stdout)
    assert all(name in done.stdout for name in WIDE_HEADERS)


@pytest.mark.parametrize("two", [False, True])
def test_compare_at_80_columns(tiny: Path, comparisons: list[dict], two: bool):
    args = ["compare", str(tiny), str(tiny)] if two else ["compare", str(tiny)]
    output = at(80, *args)
    assert "…" not in output
    if not two:
        for c in comparisons:
            assert f"{c['ratio']:.3f}" in output and f"{c['ci_low']:.3f}-{c['ci_high']:.3f}" in output
            assert c["verdict"] in output
    dropped = left_out(output)
    assert dropped[:2] == ["method", "n"]
    assert not {"ratio", "95% CI", "verdict", "variant"} & set(dropped)


def test_a_table_that_fits_is_left_whole_and_one_that_cannot_says_so():
    def build(dropped: set[str]) -> Table:
        table = Table()
        names = [n for n in ("key", "lesser") if n not in dropped]
        for name in names:
            table.add_column(name, no_wrap=True)
        table.add_row(*(("0.836 [0.812-0.861]" if n == "key" else "x" * 30) for n in names))
        return table

    table, dropped = fit.fitted(Console(width=60), build, ["lesser"])
    assert dropped == [] and len(table.columns) == 2
    table, dropped = fit.fitted(Console(width=40), build, ["lesser"])
    assert dropped == ["lesser"] and [c.header for c in table.columns] == ["key"]
    assert fit.whole(40, table) and not fit.whole(15, table)
    assert fit.note([], 80) == "" and "lesser" in fit.note(["lesser"], 40)
