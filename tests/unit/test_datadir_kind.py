"""A datadir of another kind than the binary that would open it is refused (exit 2) before any
server starts on it (issue 34's bad input): what each kind recognises as its own datadir, and the
check of a kept snapshot on --resume (run/datasets.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflab import servers
from perflab.errors import EXIT_USAGE, UsageError
from perflab.run.datasets import _same_kind


def _datadir(tmp: Path, kind: str) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    files = {"mariadb": ["aria_log_control", "ibdata1"], "mysql": ["mysql.ibd", "ibdata1"], "mysql5": ["mysql/user.frm"],
             "pg15": ["PG_VERSION"], "pg18": ["PG_VERSION"], "empty": []}[kind]  # fmt: skip
    for name in files:
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text({"pg15": "15\n", "pg18": "18\n"}.get(kind, ""))
    return tmp


@pytest.mark.parametrize(
    ("kind", "format"),
    [("mariadb", "mariadb"), ("mysql", "mysql"), ("mysql5", "mysql"), ("pg15", "postgresql-15"), ("empty", None)],
)
def test_each_kind_knows_its_own_datadir(tmp_path: Path, kind: str, format: str | None):
    assert servers.datadir_format(_datadir(tmp_path / kind, kind)) == format


@pytest.mark.parametrize(
    ("kind", "fmt"),
    [("mariadb", "mariadb-10.11"), ("mysql", "mysql-9.7"), ("mysql", "percona-8.0"), ("pg15", "postgresql-15"),
     ("empty", "mariadb-10.11")],
)  # fmt: skip
def test_a_datadir_of_the_binarys_kind_is_resumed(tmp_path: Path, kind: str, fmt: str):
    _same_kind(_datadir(tmp_path / kind, kind), fmt)


@pytest.mark.parametrize(
    ("kind", "fmt"),
    [("mariadb", "mysql-9.7"), ("mysql", "mariadb-11.8"), ("pg15", "postgresql-18"), ("pg18", "mariadb-10.11")],
)
def test_a_datadir_of_another_kind_is_refused(tmp_path: Path, kind: str, fmt: str):
    kept = _datadir(tmp_path / kind, kind)
    with pytest.raises(UsageError) as caught:
        _same_kind(kept, fmt)
    assert caught.value.exit_code == EXIT_USAGE
    assert str(kept) in caught.value.message and fmt in caught.value.message and "resume" in caught.value.hint
