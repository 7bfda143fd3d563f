"""Marks tests by folder (tests/integration -> `integration`) and offers CLI helpers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.integration)


def perflab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the perflab CLI as a user would, in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "perflab", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
