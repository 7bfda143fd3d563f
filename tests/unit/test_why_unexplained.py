"""A faster or slower verdict always has its Why line: when no per-transaction figure differs
beyond the noise, the line says so and names what would show where the time went
(`[observe] perf`, or, when it was on, the `perflab diff` of the two).

The run is tests/data/report/tiny with its jemalloc cells made 20% slower than the glibc cell of
their round, every other figure the same as that cell's: a `slower` verdict nothing measured explains.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from perflab.store.results import Results
from tests.conftest import perflab

DATA = Path(__file__).resolve().parent.parent / "data" / "report"
UNEXPLAINED = "no per-transaction figure measured (server CPU, faults, context switches) differs"


def slower_by_a_fifth(directory: Path) -> Path:
    """The copy's jemalloc cells: their round's glibc cell's figures, at 0.8 of its throughput."""
    shutil.copytree(DATA / "tiny", directory)
    with sqlite3.connect(directory / "results.db") as db:
        rows = db.execute("SELECT id, variant, repeat, summary, resources FROM cells").fetchall()
        glibc = {r[2]: r for r in rows if json.loads(r[1])["allocator"] == "glibc"}
        for cell_id, variant, repeat, _, _ in rows:
            if json.loads(variant)["allocator"] == "jemalloc":
                summary = json.loads(glibc[repeat][3])
                summary["qps"] *= 0.8
                db.execute(
                    "UPDATE cells SET summary = ?, resources = ? WHERE id = ?",
                    (json.dumps(summary), glibc[repeat][4], cell_id),
                )
    return directory


@pytest.fixture()
def slower(tmp_path: Path) -> Path:
    return slower_by_a_fifth(tmp_path / "slower")


def why_lines(text: str) -> list[str]:
    """The Why lines of the terminal report, each joined from the lines the console wrapped it to."""
    section = text.split("\nWhy ", 1)[1] if "\nWhy " in text else ""
    joined = " ".join(section.split("\nwarning:", 1)[0].split())
    return ["jemalloc at 2 threads, slower:" + rest for rest in joined.split("jemalloc at 2 threads, slower:")[1:]]


def test_a_verdict_nothing_measured_explains_says_so_and_names_perf(slower: Path, tmp_path: Path):
    compared = json.loads(perflab("compare", str(slower), "--format", "json").stdout)
    verdict = next(c for c in compared if c["metric"] == "qps")
    assert verdict["verdict"] == "slower" and verdict["evidence"] == []  # the case: slower, nothing explains it
    text = perflab("report", str(slower))
    assert text.returncode == 0, text.stderr
    assert "Why" in text.stdout
    [line] = why_lines(text.stdout)
    assert line.startswith("jemalloc at 2 threads, slower: " + UNEXPLAINED)
    assert "[observe] perf (on-CPU profiles, then perflab diff) would show where the time went" in line
    markdown = perflab("report", str(slower), "--format", "markdown").stdout
    assert "### Why" in markdown and UNEXPLAINED in markdown and "[observe] perf" in markdown
    html = tmp_path / "r.html"
    assert perflab("report", str(slower), "--html", "-o", str(html)).returncode == 0
    assert UNEXPLAINED in html.read_text(encoding="utf-8") and "<h3>Why</h3>" in html.read_text(encoding="utf-8")


def test_with_perf_on_the_why_names_the_diff_that_shows_where_the_time_went(slower: Path):
    with Results(slower) as results:
        spec_text = results.meta()["spec_text"]
        results.set_meta(spec_text=spec_text + "\n[observe]\nperf = true\nstatus = true\n")
    [line] = why_lines(perflab("report", str(slower)).stdout)
    assert "server's counters) differs" in line  # [observe] status adds its counters to what was compared
    assert line.endswith("where the time went: perflab diff DIR allocator=glibc/t2 allocator=jemalloc/t2")
    assert "[observe] perf" not in line


def test_the_recorded_inconclusive_verdict_has_no_why(tmp_path: Path):
    shutil.copytree(DATA / "tiny", tmp_path / "tiny")
    assert "Why" not in perflab("report", str(tmp_path / "tiny")).stdout  # only faster and slower have one
