"""dpkg.search: `dpkg-query -S` asked once per file while dpkg's database is unchanged, across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perflab import dpkg

ROOT = Path(__file__).parents[2]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PERFLAB_CACHE", str(tmp_path / "cache"))
    status = tmp_path / "status"
    status.write_text("Package: dpkg\n")
    monkeypatch.setattr(dpkg, "STATUS", status)
    return tmp_path


def _count_queries(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    asked: list[list[str]] = []
    real = subprocess.run

    def counting(argv, **kwargs):  # type: ignore[no-untyped-def]
        asked.append(argv)
        return real(argv, **kwargs)

    monkeypatch.setattr(dpkg.subprocess, "run", counting)
    return asked


def test_an_answer_is_kept_and_read_back_by_another_process(cache: Path, monkeypatch: pytest.MonkeyPatch):
    asked = _count_queries(monkeypatch)
    status, out = dpkg.search("/usr/bin/dpkg-query")
    assert status == 0 and out.startswith("dpkg: /usr/bin/dpkg-query"), out
    assert dpkg.search("/usr/bin/dpkg-query") == (status, out) and len(asked) == 1
    missing = dpkg.search("/nowhere/at/all")  # "no path found": an answer too, kept
    assert missing[0] == 1 and dpkg.search("/nowhere/at/all") == missing and len(asked) == 2
    doc = json.loads((cache / "cache" / "dpkg-owners.json").read_text())
    assert doc["format"] == dpkg.FORMAT and set(doc["owners"]) == {"/usr/bin/dpkg-query", "/nowhere/at/all"}
    # another process (a later run) reads it without asking dpkg
    code = "from perflab import dpkg; import sys; dpkg.STATUS = type(dpkg.STATUS)(sys.argv[1]); "
    code += "dpkg.subprocess.run = None; print(dpkg.search('/usr/bin/dpkg-query')[1], end='')"
    env = {**os.environ, "PERFLAB_CACHE": str(cache / "cache")}
    argv = [sys.executable, "-c", code, str(dpkg.STATUS)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0 and done.stdout == out, done.stderr


def test_a_changed_package_database_asks_again(cache: Path, monkeypatch: pytest.MonkeyPatch):
    asked = _count_queries(monkeypatch)
    first = dpkg.search("/usr/bin/dpkg-query")
    dpkg.STATUS.write_text("Package: dpkg\nPackage: another\n")  # an install rewrites it
    assert dpkg.search("/usr/bin/dpkg-query") == first and len(asked) == 2
    assert dpkg.search("/usr/bin/dpkg-query") == first and len(asked) == 2  # kept under the new stamp


def test_a_cache_that_cannot_be_written_only_costs_the_query(cache: Path, monkeypatch: pytest.MonkeyPatch):
    (cache / "cache").write_text("a file where the directory would be")
    asked = _count_queries(monkeypatch)
    first = dpkg.search("/usr/bin/dpkg-query")
    assert first[0] == 0 and dpkg.search("/usr/bin/dpkg-query") == first and len(asked) == 2
    (cache / "cache").unlink()
    (cache / "cache").mkdir()
    (cache / "cache" / "dpkg-owners.json").write_text("{not json")
    assert dpkg.search("/usr/bin/dpkg-query") == first and len(asked) == 3
    owners = json.loads((cache / "cache" / "dpkg-owners.json").read_text())["owners"]
    assert owners["/usr/bin/dpkg-query"][1] == first[1]


def test_an_error_is_not_kept(cache: Path, monkeypatch: pytest.MonkeyPatch):
    """dpkg-query's exit 2 (an error, not an answer) is passed on and asked again next time."""
    calls: list[list[str]] = []

    def failing(argv, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 2, "", "dpkg-query: error: something went wrong\n")

    monkeypatch.setattr(dpkg.subprocess, "run", failing)
    assert dpkg.search("/usr/bin/dpkg-query") == (2, "") and dpkg.search("/usr/bin/dpkg-query") == (2, "")
    assert len(calls) == 2 and not (cache / "cache" / "dpkg-owners.json").exists()
