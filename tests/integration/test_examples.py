"""Every shipped example passes `perflab run --check` as it is, on this machine after `make setup`:
its tools, libraries, directories and names are here (tests/unit/test_examples.py loads each one
without the machine). A new example that needs a step of its own fails here until it does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, perflab

EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))


def test_every_example_is_here():
    assert len(EXAMPLES) >= 10 and ROOT / "examples" / "durability.toml" in EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_each_example_passes_the_check_as_it_is(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PERFLAB_CACHE", str(tmp_path / "cache"))  # a fresh machine's cache
    checked = perflab("run", str(path), "--check", "--format", "json")
    assert checked.returncode == 0, checked.stderr
    plan = json.loads(checked.stdout)
    assert plan["file"] == str(path) and plan["cells"] > 0
