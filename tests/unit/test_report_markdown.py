"""`perflab report DIR --format markdown -o FILE` against the golden file of a recorded run.

tests/data/report/tiny/ is a real results directory (2 variants x 1 thread count x 3
repeats); tests/data/regen_report.py re-records it and re-renders the golden file.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import perflab

DATA = Path(__file__).resolve().parent.parent / "data" / "report"


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    copy = tmp_path / "tiny"
    shutil.copytree(DATA / "tiny", copy)  # opening a database writes beside it: never in tests/data
    return copy


def test_markdown_matches_golden_file(tiny: Path, tmp_path: Path):
    out = tmp_path / "tiny.md"
    done = perflab("report", str(tiny), "--format", "markdown", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text(encoding="utf-8") == (DATA / "tiny.md").read_text(encoding="utf-8"), (
        "the Markdown report changed; if on purpose: python3 tests/data/regen_report.py --golden-only, "
        "and read the diff"
    )
    charts = sorted(p.name for p in (tmp_path / "tiny_files").iterdir())
    assert charts == (DATA / "tiny_files.txt").read_text(encoding="utf-8").split()
    for name in charts:
        ET.parse(tmp_path / "tiny_files" / name)  # well-formed SVG
        assert f"](tiny_files/{name})" in out.read_text(encoding="utf-8")


def test_markdown_carries_the_export_comparisons_and_the_text_findings(tiny: Path):
    md = perflab("report", str(tiny), "--format", "markdown")
    assert md.returncode == 0, md.stderr
    exported = json.loads(perflab("export", str(tiny)).stdout)
    for c in exported["comparisons"]:
        assert f"{c['ratio']:.3f} [{c['ci_low']:.3f}–{c['ci_high']:.3f}]" in md.stdout
    text = perflab("report", str(tiny)).stdout
    warnings = [line.split("warning: ", 1)[1][:60] for line in text.splitlines() if line.startswith("warning: ")]
    assert warnings and all(w in md.stdout for w in warnings)
    assert "_Charts: write the report to a file" in md.stdout  # stdout: no files written


def test_markdown_table_cells_are_escaped():
    from perflab.report.markdown import cell

    assert cell("a|b\nc <b>") == "a\\|b c &lt;b&gt;"


def test_report_options(tiny: Path):
    done = perflab("report", str(tiny), "-o", str(tiny / "x.txt"))
    assert done.returncode == 2 and "-o applies to --html" in done.stderr
    done = perflab("report", str(tiny), "--html", "--format", "markdown")
    assert done.returncode == 2 and "contradict" in done.stderr
    done = perflab("report", str(tiny), "--html")
    assert (
        done.returncode == 0 and (tiny / "report.html").is_file() and f"report: {tiny / 'report.html'}" in done.stdout
    )
    done = perflab("report", str(tiny), "--format", "html", "-o", str(tiny / "missing" / "r.html"))
    assert done.returncode == 2 and "does not exist" in done.stderr
