"""Writes the HTML and Markdown reports (the `perflab report --html | --format markdown` verb).

Input: an open Results, the format, an output path or None. Output: the report file, and for
Markdown its charts as SVG files in `<name>_files/` beside it; returns the path written (None
when Markdown went to stdout).

    write(results, "html", Path("report.html"))  ->  Path("report.html")
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from perflab.errors import UsageError
from perflab.report import html, markdown, model


def write(results: Any, fmt: str, output: Path | None, baselines: list[str]) -> Path | None:
    if fmt == "html":
        output = output or Path(results.dir) / "report.html"
        _check_parent(output)
        text = html.render(model.build(results, baselines))
        output.write_text(text, encoding="utf-8")
        return output
    if output is None:
        sys.stdout.write(markdown.render(model.build(results, baselines, series=False), charts_dir=None))
        return None
    _check_parent(output)
    charts_dir = output.parent / f"{output.stem}_files"
    text = markdown.render(model.build(results, baselines), charts_dir=charts_dir, link_base=charts_dir.name)
    output.write_text(text, encoding="utf-8")
    return output


def _check_parent(output: Path) -> None:
    if not output.parent.is_dir():
        raise UsageError(f"{output}: directory {output.parent} does not exist", "create it, or choose another -o")
