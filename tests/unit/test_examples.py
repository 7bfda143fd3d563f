"""Every example a user is pointed at loads: its keys are known and its values valid (the
machine's own checks, `perflab run --check`, are the integration tests'), and it opens with the
comment that says what it answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflab import spec

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.toml"))


def test_there_are_examples():
    assert len(EXAMPLES) >= 10


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_each_example_loads_and_says_what_it_answers(path: Path):
    exp = spec.load(path)
    assert exp.name and exp.cells()
    assert path.read_text(encoding="utf-8").startswith("#")
