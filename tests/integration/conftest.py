"""Fixtures of the integration tests (they run as root, as CI does: tmpfs mounts need it)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str, str], Path]]:
    """mount(name, size) -> a fresh tmpfs of `size` ("300M", "1G") under tmp_path, unmounted
    afterwards. A test's own tmpfs as PERFLAB_TMPFS also keeps other perflab runs on this machine
    (which clean up /dev/shm/perflab-* of dead runs) away from what the test inspects."""
    mounted: list[Path] = []

    def mount(name: str, size: str, *options: str) -> Path:
        path = tmp_path / name
        path.mkdir()
        opts = ",".join([f"size={size}", *options])
        subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], check=True)
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)
