"""The reports of a fixed-rate run (analyze/rate.py): the recorded tiny results made into one whose
axis sets two rates, so every report judges p99, says so under its tables, and the HTML report
draws the latency-throughput curve of the rate axis."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from perflab.analyze import rate
from perflab.report import html, markdown, model, text
from perflab.store.results import Results

DATA = Path(__file__).resolve().parent.parent / "data" / "report"
TARGETS = {"glibc": 2000, "jemalloc": 4000}  # the tiny run's allocator axis, read as a rate axis


@pytest.fixture()
def fixed(tmp_path: Path) -> Path:
    copy = tmp_path / "tiny"
    shutil.copytree(DATA / "tiny", copy)
    db = sqlite3.connect(copy / "results.db")
    with db:
        exp = json.loads(db.execute("SELECT value FROM meta WHERE key = 'experiment'").fetchone()[0])
        exp["rates"] = sorted(TARGETS.values())
        db.execute("UPDATE meta SET value = ? WHERE key = 'experiment'", (json.dumps(exp),))
        for cell_id, variant, summary in db.execute("SELECT id, variant, summary FROM cells").fetchall():
            figures = json.loads(summary)
            target = TARGETS[json.loads(variant)["allocator"]]
            figures["rate"] = {"target": target, "achieved": figures["tps"], "kept": True, "latency_from": "intended"}
            db.execute("UPDATE cells SET summary = ? WHERE id = ?", (json.dumps(figures), cell_id))
    db.close()
    return copy


def test_the_html_report_draws_the_rate_curve_and_judges_p99(fixed: Path) -> None:
    with Results(fixed) as results:
        m = model.build(results)
    page = html.render(m)
    assert 'id="fig-rate-curve"' in page and "p99 latency from the intended start vs achieved rate" in page
    assert m.latency_metric == "p99" and "<th>p99 ratio [95% CI]</th>" in page
    assert "verdicts on p99 latency from each transaction&#39;s intended start" in page
    # each allocator label a rate: its own baseline at its own rate, so no variant row at all
    assert not [c for c in m.comparisons if c.kind == "variant"]
    assert all(g.baseline for g in m.groups)
    (points,) = rate.curve(m.groups, "allocator").values()  # one line: no other axis, one thread count
    assert [target for _, _, target in points] == [2000, 4000]


def test_the_markdown_and_terminal_reports_say_what_they_judge(fixed: Path) -> None:
    with Results(fixed) as results:
        m = model.build(results)
        console = Console(width=160, record=True)
        text.render(console, m.meta, m.cells)
    page = markdown.render(m, None)
    assert "p99 ratio [95% CI]" in page and "at a fixed rate (2,000, 4,000 transactions a second)" in page
    terminal = console.export_text()
    assert "at a fixed rate (2,000, 4,000 transactions a second): verdicts on p99 latency" in terminal
