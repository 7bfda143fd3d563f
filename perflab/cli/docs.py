"""`perflab docs [TOPIC[#SECTION]]`: the reference pages shipped with perflab, wherever it is
installed (perflab/docs/*.md, package data). Hints and reports name them so, never by a path a
pip-installed perflab does not have:

    perflab docs                           the topics, one line each (the page's title)
    perflab docs storage                   the page (docs/storage.md of the repository)
    perflab docs methodology#host-speed    that section alone (its heading's anchor, as GitHub makes it)
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from perflab.errors import UsageError, did_you_mean

PAGES = Path(__file__).resolve().parents[1] / "docs"  # a link to the repository's docs/ in a checkout
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def topics() -> dict[str, Path]:
    return {p.stem: p for p in sorted(PAGES.glob("*.md"))}


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(text: str) -> list[tuple[int, int, str]]:
    """(line index, level, anchor) of each heading, code blocks left out."""
    out, fenced = [], False
    for i, line in enumerate(text.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match:
            out.append((i, len(match.group(1)), anchor(match.group(2))))
    return out


def section(text: str, wanted: str) -> str | None:
    """The section under the heading whose anchor is `wanted`, to the next heading as high; None: none."""
    found = headings(text)
    for n, (start, level, name) in enumerate(found):
        if name == wanted:
            end = next((i for i, lvl, _ in found[n + 1 :] if lvl <= level), None)
            return "\n".join(text.splitlines()[start:end]).rstrip() + "\n"
    return None


def page(reference: str) -> str:
    """The text `perflab docs REFERENCE` prints; UsageError naming what exists otherwise."""
    name, _, wanted = reference.partition("#")
    pages = topics()
    if name not in pages:
        hint = did_you_mean(name, pages, f"topics: {', '.join(pages)}")
        raise UsageError(f"no page {name!r} in perflab's docs ({PAGES})", hint)
    text = pages[name].read_text(encoding="utf-8")
    if not wanted:
        return text
    found = section(text, wanted)
    if found is None:
        anchors = [a for _, _, a in headings(text)]
        raise UsageError(f"no section {wanted!r} in {name}", did_you_mean(wanted, anchors, f"`perflab docs {name}`"))
    return found


@click.command("docs")
@click.argument("reference", required=False, metavar="[TOPIC[#SECTION]]")
def docs(reference: str | None) -> None:
    """Print a reference page (or one section of it); without TOPIC, list the topics."""
    if reference:
        click.echo(page(reference), nl=False)
        return
    for name, path in topics().items():
        title = next((ln.lstrip("# ").strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln), "")
        click.echo(f"{name:<16} {title}")
    click.echo(f"(pages in {PAGES}; `perflab docs TOPIC#SECTION` prints one section)")
