"""The line "no calibration matched" says what calibration buys, and is said once per machine
(a marker under the cache, cli/calibrated.said_before); an ignored calibration's reason is always said."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflab.cli.calibrated import said_before
from perflab.store import calibration


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PERFLAB_CACHE", str(tmp_path))
    return tmp_path


def none_matched(tmp_path: Path) -> dict:
    directory = tmp_path / "calibration"  # none there: nothing matches
    doc, note = calibration.find(directory, {"hostname": "h"}, "0" * 16, None, None)  # type: ignore[arg-type]
    assert doc is None
    return {"used": False, "note": f"calibration: {note}"}


def test_none_matched_says_what_calibration_buys(tmp_path: Path):
    note = none_matched(tmp_path)["note"]
    assert "no calibration matched" in note and "perflab calibrate FILE.toml" in note
    assert "equivalence_margin" in note and "once per machine" in note


def test_said_once_per_machine(tmp_path: Path, cache: Path):
    planned = none_matched(tmp_path)
    assert said_before(planned) is False
    assert (cache / "notices" / "no-calibration").is_file()
    assert said_before(planned) is True
    assert said_before(dict(planned)) is True


def test_an_ignored_or_used_calibration_is_always_said():
    ignored = {"used": False, "note": "calibration: ignored /x.json: host.kernel: 6.1 != 6.2"}
    assert said_before(ignored) is False and said_before(ignored) is False
    used = {"used": True, "note": "calibration: using /x.json"}
    assert said_before(used) is False and said_before(used) is False
