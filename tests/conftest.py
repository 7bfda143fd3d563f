"""Marks tests by folder (tests/integration -> `integration`) and offers CLI helpers."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Other perflab runs on a developer's machine (a benchmark, another checkout's tests) must not
# make these tests refuse to run; tests/integration/test_lock.py clears it to test the refusal.
os.environ["PERFLAB_ALLOW_CONCURRENT"] = "1"
# Every `perflab run` records itself in the history index: the tests' runs go to a throwaway one,
# never to ~/.local/share/perflab/history.sqlite (tests that need their own pass --history).
os.environ["PERFLAB_HISTORY"] = str(Path(tempfile.mkdtemp(prefix="perflab-test-history-")) / "history.sqlite")
# A shell starts background jobs (`make test &`, `nohup ... &`) with SIGINT ignored, and an
# ignored signal is inherited through exec: the perflab runs these tests start could then never
# see the Ctrl-C that tests/integration/test_failures.py sends. Take SIGINT back, as a terminal has it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Each pytest process (make test runs integration modules in parallel, one per xdist worker) gives
# its perflab runs a tmpfs directory of their own: a run cleans the work directories of dead runs
# it finds under PERFLAB_TMPFS, and a test that SIGKILLs perflab inspects what its run left there,
# so neither may meet another process's runs. The directory is made under the PERFLAB_TMPFS the
# user set, else /dev/shm; a worker inherits the controller's environment, so PERFLAB_TEST_TMPFS_*
# say whose directory PERFLAB_TMPFS names and where the user's was. Tests that need another place
# set PERFLAB_TMPFS for their own runs.
_TMPFS = None
_BASE = Path(os.environ.get("PERFLAB_TEST_TMPFS_BASE") or os.environ.get("PERFLAB_TMPFS") or "/dev/shm")
if os.environ.get("PERFLAB_TEST_TMPFS_PID") != str(os.getpid()) and _BASE.is_dir():
    _TMPFS = Path(tempfile.mkdtemp(prefix=f"pltest-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-", dir=_BASE))
    _TMPFS.chmod(0o755)  # postgres (a server's datadir under it, run as root) must reach its own
    os.environ["PERFLAB_TMPFS"] = str(_TMPFS)
    os.environ["PERFLAB_TEST_TMPFS_BASE"] = str(_BASE)
    os.environ["PERFLAB_TEST_TMPFS_PID"] = str(os.getpid())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.integration)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _TMPFS is not None:
        shutil.rmtree(_TMPFS, ignore_errors=True)  # what the runs left is theirs to clean: only empties remain


def perflab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the perflab CLI as a user would, in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "perflab", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def inferno_path() -> str | None:
    """inferno-flamegraph as perflab finds it, or None: `make setup` skips it on a machine
    without Rust (docs/profiles.md), and the tests that need it then assert the error instead."""
    from perflab.errors import ToolMissingError  # noqa: PLC0415
    from perflab.report import flame  # noqa: PLC0415

    try:
        return flame.inferno()
    except ToolMissingError:
        return None
