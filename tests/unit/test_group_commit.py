"""An interleaved group's cells are stored in one transaction (Results.commit_cells, used by
run/interleave.py run_group): a failure while storing one of them stores none, so a resumed
run never finds half a group. The kill-and-resume test is tests/integration/test_resume.py."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from perflab.store.results import Results

TINY = Path(__file__).resolve().parent.parent / "data" / "report" / "tiny"


def test_a_group_is_stored_whole_or_not_at_all(tmp_path: Path):
    shutil.copytree(TINY, tmp_path / "template")
    with Results(tmp_path / "template") as tiny:
        meta, template = tiny.meta(), tiny.cells()[0]
        intervals, rss = tiny.intervals(template["id"]), tiny.rss_samples(template["id"])
    with Results(tmp_path / "out", create=True) as results:
        results.set_meta(**meta)
        first = {**template, "id": 0, "key": "v=a/t2/r1"}
        broken = {**template, "id": 1, "key": "v=b/t2/r1", "no_such_column": 1}  # fails as it is inserted
        with pytest.raises(sqlite3.OperationalError, match="no_such_column"):
            results.commit_cells([(first, intervals, rss, []), (broken, intervals, rss, [])])
        assert results.cells() == [] and results.intervals(0) == []  # the first cell went with it
        fixed = {k: v for k, v in broken.items() if k != "no_such_column"}
        results.commit_cells([(first, intervals, rss, []), (fixed, intervals, rss, [])])
        assert [c["key"] for c in results.cells()] == ["v=a/t2/r1", "v=b/t2/r1"]
        assert len(results.intervals(0)) == len(results.intervals(1)) == len(intervals)
