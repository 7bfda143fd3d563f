"""Fixtures of the integration tests (they run as root, as CI does: tmpfs mounts need it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration import helpers
from tests.integration.helpers import tmpfs_mounts
from tests.integration.sshhosts import SshLab, ssh_hosts


@pytest.fixture(scope="module", autouse=True)
def paced_clients(request: pytest.FixtureRequest) -> Iterator[None]:
    """Clients run paced (helpers.PACE) in the modules that run side by side, at full speed in the
    quiet ones. Autouse and module-scoped: set before the module's own fixtures run."""
    helpers.pacing = request.node.get_closest_marker("quiet") is None
    yield
    helpers.pacing = False


@pytest.fixture
def tmpfs() -> Iterator[Callable[..., Path]]:
    with tmpfs_mounts() as mount:
        yield mount


@pytest.fixture
def ssh_lab(tmp_path: Path) -> Iterator[SshLab]:
    """Two real SSH hosts, `db` and `load`, in network namespaces of their own (sshhosts.py)."""
    with ssh_hosts(tmp_path, ["db", "load"]) as lab:
        yield lab
