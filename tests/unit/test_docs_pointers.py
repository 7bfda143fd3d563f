"""What perflab prints points where a pip-installed perflab can follow: no string of perflab/
(docstrings and comments aside) names bench/ or a bare docs/ path, which only a checkout has;
the reference pages are `perflab docs TOPIC[#SECTION]` (cli/docs.py, the pages shipped as
package data), and every such pointer perflab prints names a page and section that exist."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from perflab.cli.docs import page
from perflab.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
BARE = re.compile(r"(?<![\w./-])(docs|bench)/")
POINTER = re.compile(r"perflab docs ([a-z-]+(?:#[a-z0-9_-]+)?)")


def printed_strings() -> list[tuple[str, str]]:
    """(file:line, text) of every string constant of perflab/ but docstrings and the SQL schema."""
    out = []
    for path in sorted((ROOT / "perflab").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if "CREATE TABLE" not in node.value:  # results.db's schema: its SQL comments are for its readers
                    out.append((f"{path.relative_to(ROOT)}:{node.lineno}", node.value))
    return out


def test_no_printed_string_names_a_path_only_a_checkout_has():
    found = [f"{where}: {text[:100]!r}" for where, text in printed_strings() if BARE.search(text)]
    assert not found, "\n".join(found)


def test_every_docs_pointer_resolves():
    pointers = {m for _, text in printed_strings() for m in POINTER.findall(text)}
    assert len(pointers) >= 10  # the hints do point somewhere
    for pointer in sorted(pointers):
        assert page(pointer).strip(), pointer


def test_the_docs_verb_prints_a_section_and_names_what_exists():
    section = page("methodology#host-speed")
    assert section.startswith("### Host speed") and "\n### " not in section.strip()[3:]
    with pytest.raises(UsageError) as caught:
        page("hostz")
    assert caught.value.hint == "did you mean hosts?"
    done = subprocess.run([sys.executable, "-m", "perflab", "docs"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0 and "storage " in done.stdout and "methodology " in done.stdout


def test_the_pages_are_package_data():
    """perflab/docs is the repository's docs/ (a link setuptools follows), shipped as package data."""
    assert (ROOT / "perflab" / "docs").resolve() == (ROOT / "docs").resolve()
    assert '"perflab" = ["docs/*.md"]' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
