"""The history index knows a run by what it is, not where it lies: a copied results directory
imported beside the original is the same run, recorded once; and a mistyped --history (or
$PERFLAB_HISTORY) is refused with exit 2, creating nothing (perflab/history/index.py)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from perflab.errors import EXIT_USAGE
from perflab.history.index import Index
from tests.conftest import perflab

TINY = Path(__file__).resolve().parent.parent / "data" / "report" / "tiny"


@pytest.fixture()
def original(tmp_path: Path) -> Path:
    return Path(shutil.copytree(TINY, tmp_path / "results" / "tiny"))


def runs_in(index: Path) -> list[list[dict]]:
    """Each series' runs (a series per variant and thread count, and jemalloc's ratio to glibc) as
    `perflab history` shows them."""
    done = perflab("history", "tiny", "--history", str(index), "--format", "json")
    assert done.returncode == 0, done.stderr
    series = json.loads(done.stdout)["series"]
    return [s["runs"] for s in series]


def test_a_copied_results_directory_is_the_same_run(original: Path, tmp_path: Path):
    index = tmp_path / "history.sqlite"
    copy = Path(shutil.copytree(original, tmp_path / "elsewhere" / "tiny-copy"))
    for directory in (original, copy):
        done = perflab("history", "import", str(directory), "--history", str(index))
        assert done.returncode == 0, done.stderr
    with Index.open(str(index)) as opened:
        [stored] = opened.runs("tiny")
    assert stored.record.directory == str(copy.resolve())  # the newest record of it
    assert sqlite3.connect(index).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
    assert [len(runs) for runs in runs_in(index)] == [1, 1, 1]  # glibc's series, jemalloc's and its ratio to glibc, a run each
    # both at once, and once more: still one run
    assert perflab("history", "import", str(original), str(copy), "--history", str(index)).returncode == 0
    assert sqlite3.connect(index).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_an_index_that_holds_a_run_twice_shows_it_once(original: Path, tmp_path: Path):
    index = tmp_path / "history.sqlite"
    assert perflab("history", "import", str(original), "--history", str(index)).returncode == 0
    with sqlite3.connect(index) as db:  # what an older perflab wrote for an import of a copy
        columns = "name, workload_key, workload, started_at, ended_at, directory, status, provenance, recorded_at"
        moved = columns.replace("directory", "'/elsewhere'")
        db.execute(f"INSERT INTO runs ({columns}) SELECT {moved} FROM runs")
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2
    with Index.open(str(index)) as opened:
        assert [r.record.directory for r in opened.runs("tiny")] == ["/elsewhere"]


@pytest.mark.parametrize("verb", [("history", "import", "{dir}"), ("history", "tiny")])
def test_a_mistyped_history_path_is_refused_and_creates_nothing(original: Path, tmp_path: Path, verb: tuple):
    missing = tmp_path / "no-such-dir" / "deeper"
    args = [a.format(dir=original) for a in verb]
    done = perflab(*args, "--history", str(missing / "history.sqlite"))
    assert done.returncode == EXIT_USAGE
    assert f"its directory {missing} does not exist" in done.stderr and "--history" in done.stderr
    assert not (tmp_path / "no-such-dir").exists()


def test_a_mistyped_perflab_history_is_refused_naming_it(
    original: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PERFLAB_HISTORY", str(tmp_path / "typo" / "history.sqlite"))
    done = perflab("history", "import", str(original))
    assert done.returncode == EXIT_USAGE and "$PERFLAB_HISTORY" in done.stderr
    assert not (tmp_path / "typo").exists()


def test_run_refuses_a_mistyped_history_before_it_starts(tmp_path: Path):
    examples = Path(__file__).resolve().parent.parent.parent / "examples"
    done = perflab("run", str(examples / "quick.toml"), "--check", "--history", str(tmp_path / "nope" / "h.sqlite"))
    assert done.returncode == EXIT_USAGE and "does not exist" in done.stderr
    assert not (tmp_path / "nope").exists()


def test_a_history_path_in_an_existing_directory_is_made(original: Path, tmp_path: Path):
    index = tmp_path / "new.sqlite"
    assert perflab("history", "import", str(original), "--history", str(index)).returncode == 0
    assert index.is_file() and [len(runs) for runs in runs_in(index)] == [1, 1, 1]
