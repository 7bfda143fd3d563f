"""Fixtures of the integration tests (they run as root, as CI does: tmpfs mounts need it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.helpers import tmpfs_mounts


@pytest.fixture
def tmpfs() -> Iterator[Callable[..., Path]]:
    with tmpfs_mounts() as mount:
        yield mount
