"""tests/conftest.py runs perflab's reading verbs in the test's own process: the same entry point
must give what a user's subprocess gives (exit code, stdout, stderr), on a recorded run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import IN_PROCESS, in_process, perflab

TINY = Path(__file__).parent.parent / "data" / "report" / "tiny"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return Path(shutil.copytree(TINY, tmp_path / "tiny"))


@pytest.mark.parametrize(
    "args",
    [
        ("export", "{d}"),
        ("export", "{d}", "--format", "csv"),
        ("report", "{d}"),
        ("report", "{d}", "--format", "json"),
        ("compare", "{d}"),
        ("report", "{d}/missing"),  # an error of perflab's: exit 2 and its message
        ("export", "{d}", "--no-such-option"),  # click's usage error
    ],
)
def test_in_process_gives_what_a_subprocess_gives(run_dir: Path, monkeypatch: pytest.MonkeyPatch, args):
    argv = [a.format(d=run_dir) for a in args]
    assert argv[0] in IN_PROCESS
    here = in_process(*argv)
    monkeypatch.setenv("PERFLAB_TEST_SUBPROCESS", "1")
    there = perflab(*argv)
    assert (here.returncode, here.stdout) == (there.returncode, there.stdout)
    assert here.stderr == there.stderr.replace("python -m perflab", "perflab")  # the program's name
    assert here.stdout or here.stderr  # something to compare


def test_signal_handlers_are_put_back(run_dir: Path):
    import signal

    before = signal.getsignal(signal.SIGTERM)
    assert in_process("report", str(run_dir)).returncode == 0
    assert signal.getsignal(signal.SIGTERM) is before
