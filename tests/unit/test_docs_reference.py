"""Reference pages are reference, and say what the code does.

- docs/methodology.md stays at most 40 KB: its dated measurements live in docs/lab-notes/, linked;
- no reference page (docs/*.md; lab-notes/ are dated by design) carries an "until 2026-11-28"-style
  note, nor a change dated to the minute ("since 2026-11-28 14:37"): history goes to a changelog;
- results-format.md's history of the format is one changelog, linked, not notes inline;
- the README's screenshot and the pages name only the verdicts perflab gives;
- api.md's `settled` says how a drifting window is treated, as analyze/steady.py treats it;
- experiment.md's list of what the interleaved design refuses is what spec/design.py refuses.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from perflab import spec
from perflab.analyze import steady
from perflab.analyze.verdict import VERDICTS
from perflab.spec.design import design_problems

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"
REFERENCE = sorted(DOCS.glob("*.md"))  # lab-notes/ is a folder below: not matched
METHODOLOGY_BOUND = 40_000  # bytes
DATE = r"20\d\d-\d\d-\d\d"
DATED_NOTE = re.compile(rf"\b(?:until|till)\s+{DATE}|\b(?:since|before|until)\s+{DATE}[ T]\d\d:\d\d", re.I)
RETIRED_VERDICTS = ("no significant difference", "not significantly different")


def test_methodology_is_at_most_40_kb_and_links_its_measurements():
    text = (DOCS / "methodology.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= METHODOLOGY_BOUND, "move dated measurements to docs/lab-notes/"
    notes = set(re.findall(r"\]\((lab-notes/[^)#]+)", text))
    assert "lab-notes/2026-11-28-methodology-measurements.md" in notes
    assert all((DOCS / note).is_file() for note in notes), notes


@pytest.mark.parametrize("page", REFERENCE, ids=lambda p: p.name)
def test_no_dated_until_notes_in_reference_pages(page: Path):
    text = page.read_text(encoding="utf-8")
    found = [(text.count("\n", 0, m.start()) + 1, m.group(0)) for m in DATED_NOTE.finditer(text)]
    assert not found, f"{page.name}: dated notes {found}; say what is true now, and put the history in a changelog"


def test_the_rule_catches_what_it_is_for():
    assert DATED_NOTE.search("Until 2026-11-28 17:00 UTC the counts on a host")
    assert DATED_NOTE.search("until\n2026-11-28 they were refused")
    assert DATED_NOTE.search("(since 2026-11-28 14:37 UTC)")
    assert not DATED_NOTE.search("measured on 2026-11-28 (14 rounds)")  # a dated measurement is a result


def test_results_format_history_is_one_changelog():
    text = (DOCS / "results-format.md").read_text(encoding="utf-8")
    changelog = DOCS / "results-format-changelog.md"
    assert "(results-format-changelog.md)" in text and changelog.is_file()
    assert "Added within format" not in text and "added within it on" not in text
    assert not re.search(rf"(?:since|before) {DATE}", text), "dated notes belong in the changelog"
    history = changelog.read_text(encoding="utf-8")
    for version in range(1, 11):
        assert f"`perflab-results/{version}`" in history
    assert "## Calibration files" in history and "## The history index" in history


def test_pages_and_the_screenshot_name_only_todays_verdicts():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [caption] = re.findall(r"!\[(.*?)\]\(docs/report\.png\)", readme)
    named = [v for v in (*VERDICTS, *RETIRED_VERDICTS) if v in caption]
    assert named and set(named) <= set(VERDICTS), caption
    assert (DOCS / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert caption in (DOCS / "results.md").read_text(encoding="utf-8")  # the same picture, the same words
    for page in [ROOT / "README.md", *REFERENCE]:
        if page.name in ("benchmarks.md", "results-format-changelog.md"):
            continue  # a dated results table of the old verdicts; the changelog says they went
        text = page.read_text(encoding="utf-8").lower()
        assert not [r for r in RETIRED_VERDICTS if r in text], page.name


def test_a_drifting_window_is_settled_as_api_md_says():
    rng = random.Random(7)
    # 5 s of warm-up, then a window whose second half runs 5% above its first: drift, not a climb
    qps = [6000.0] * 5 + [10_000 * (1 + rng.gauss(0, 0.004)) for _ in range(20)]
    qps += [10_500 * (1 + rng.gauss(0, 0.004)) for _ in range(20)]
    state = steady.detect([{"t": t + 1, "qps": q} for t, q in enumerate(qps)], window_start=5.0)
    assert state.settled and state.drift is not None and 0.03 < state.drift < steady.CLIMB
    api = (DOCS / "api.md").read_text(encoding="utf-8")
    [row] = [line for line in api.splitlines() if line.startswith("| `settled` |")]
    assert "drifts stays settled" in row and "15%" in row and f"{steady.CLIMB:.0%}" == "15%"


def test_experiment_md_lists_what_the_interleaved_design_refuses():
    text = " ".join((DOCS / "experiment.md").read_text(encoding="utf-8").split())
    [refused] = re.findall(r"What it does not run yet \(refused with the key named, exit 2\): (.*?) A calibration", text)
    assert "pgbench" not in refused and "go-tpc" in refused
    pgbench = spec.parse(
        '[experiment]\nname = "pg"\nserver = "postgresql"\ndesign = "interleaved"\n'
        '[workload]\ntool = "pgbench"\ntest = "select-only"\n'
    )
    assert design_problems(pgbench.file) == []  # pgbench runs interleaved, as the page says
    for key in ("pin", "pmp", "io", "drop_caches", "host-speed"):
        assert key in refused
