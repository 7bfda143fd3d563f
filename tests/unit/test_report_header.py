"""The HTML and Markdown headers say how many rounds ran: `3 repeats` when fixed, and when rounds
ran until a verdict (no `repeats`) or a target interval (`repeats = "auto"`), the rounds run and why
they stopped, never "x None repeats" (report/model.py)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from perflab.store.results import Results
from tests.conftest import perflab

TINY = Path(__file__).resolve().parent.parent / "data" / "report" / "tiny"


def with_rounds(directory: Path, repeats: object, adaptive: dict | None) -> Path:
    shutil.copytree(TINY, directory)
    with Results(directory) as results:
        experiment = results.meta()["experiment"]
        results.set_meta(experiment={**experiment, "repeats": repeats}, adaptive=adaptive)
    return directory


def headers(directory: Path, tmp_path: Path) -> tuple[str, str]:
    """The matrix line of the Markdown report and of the HTML one."""
    markdown = perflab("report", str(directory), "--format", "markdown")
    assert markdown.returncode == 0, markdown.stderr
    [md] = [line for line in markdown.stdout.splitlines() if line.startswith("| matrix |")]
    page = tmp_path / "r.html"
    assert perflab("report", str(directory), "--html", "-o", str(page)).returncode == 0
    html = re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))
    [row] = re.findall(r"matrix\s+(allocator[^\n]*?cells[^\n]*?failed)", html)
    return md, " ".join(row.split())


STOPPED = "every comparison has a verdict"
ROUNDS = {"min_repeats": 3, "max_repeats": 20, "time_budget_s": 600, "rounds": 3}  # meta.adaptive's
VERDICT = {"stop": "verdict", "alpha": 0.05, "equivalence_margin": 0.02, "spending": "obrien-fleming"}
TARGET = {"target_ci": 0.01, "groups": []}


@pytest.mark.parametrize(
    ("repeats", "adaptive", "said"),
    [
        (None, {**VERDICT, **ROUNDS, "stop_reason": STOPPED, "comparisons": []}, "× 3 rounds (until a verdict: every"),
        (None, None, "× 3 rounds (until a verdict: running)"),  # killed before it said
        ("auto", {**TARGET, **ROUNDS, "stop_reason": "all targets met"}, "× 3 rounds (until the target interval: all"),
        (3, None, "× 3 repeats = 6 cells"),
    ],
)
def test_the_header_says_the_rounds_run(tmp_path: Path, repeats: object, adaptive: dict | None, said: str):
    md, html = headers(with_rounds(tmp_path / "run", repeats, adaptive), tmp_path)
    assert said in md and said in html
    assert "None" not in md and "None" not in html
