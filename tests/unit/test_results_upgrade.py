"""Results schema versions: a version 1 directory is upgraded in place when opened (its cells'
steady state then detected from their stored intervals); other versions are refused with a hint.

tests/data/schema1/results.db was written by the last perflab with schema 1 (taken from git
history and run for real by tests/data/regen_schema1.py): 2 allocators x 3 repeats that ran,
plus 3 cells of a variant whose server option was rejected. The CLI reads it as a user would.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from perflab.errors import ResultsFormatError
from perflab.store.results import Results
from perflab.store.schema import SCHEMA_VERSION
from tests.conftest import ROOT, perflab

GOLDEN = ROOT / "tests" / "data" / "schema1" / "results.db"
V1_WINDOW_START = 2.0  # warmup = "2s" in the recorded experiment: v1 stored it as cells.warmup_s
V2_COLUMNS = {"backtrace", "warmup_method", "window_start_s", "settled", "unsettled_reason", "stalls", "steady"}


def query(db_path: Path, sql: str) -> list[tuple]:
    db = sqlite3.connect(db_path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def schema_version(directory: Path) -> object:
    rows = query(directory / "results.db", "SELECT value FROM meta WHERE key = 'schema_version'")
    return json.loads(rows[0][0]) if rows else None


def columns(directory: Path, table: str = "cells") -> set[str]:
    return {row[1] for row in query(directory / "results.db", f"PRAGMA table_info({table})")}


@pytest.fixture
def v1(tmp_path: Path) -> Path:
    directory = tmp_path / "v1"
    directory.mkdir()
    shutil.copy(GOLDEN, directory / "results.db")
    assert schema_version(directory) == 1 and not columns(directory) & V2_COLUMNS  # really the old layout
    return directory


def test_schema1_directory_is_upgraded_in_place(v1: Path):
    stored = query(GOLDEN, "SELECT id, key, status, summary, resources FROM cells ORDER BY id")
    intervals = query(GOLDEN, "SELECT cell_id, t, qps FROM intervals ORDER BY cell_id, t")
    done = perflab("export", str(v1))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    # in place: the file itself now has the current schema, the new columns, and the old data untouched
    assert schema_version(v1) == SCHEMA_VERSION and columns(v1) >= V2_COLUMNS
    assert query(v1 / "results.db", "SELECT id, key, status, summary, resources FROM cells ORDER BY id") == stored
    assert query(v1 / "results.db", "SELECT cell_id, t, qps FROM intervals ORDER BY cell_id, t") == intervals
    assert query(v1 / "results.db", "SELECT DISTINCT window_start_s FROM cells") == [(V1_WINDOW_START,)]

    assert doc["format"] == "perflab-results/10" and len(doc["cells"]) == 9
    ok = [c for c in doc["cells"] if c["status"] == "ok"]
    failed = [c for c in doc["cells"] if c["status"] == "failed"]
    assert len(ok) == 6 and {c["variant"]["allocator"] for c in failed} == {"broken"}
    for cell in doc["cells"]:
        assert cell["window_start_s"] == V1_WINDOW_START  # v1's warmup_s: where its window began
    for cell in ok:  # detected now, from the stored per-second series (7 s each: MSER-1)
        times = {iv["t"] for iv in cell["intervals"]}
        assert cell["warmup_method"] == "mser-1" and cell["warmup_s"] in times | {0.0}
        assert isinstance(cell["settled"], bool) and isinstance(cell["stalls"], list)
        assert cell["steady"]["qps_mean"] == cell["summary"]["qps"]
        assert cell["steady"]["seconds"] == len([t for t in times if t > V1_WINDOW_START])
        low, high = cell["steady"]["qps_ci_low"], cell["steady"]["qps_ci_high"]
        assert low < cell["steady"]["qps_mean"] < high
    for cell in failed:  # nothing detected for a cell that did not run; its error kept
        assert cell["error"].startswith("mariadbd exited with code 7 during start-up")
        assert cell["warmup_s"] is None and cell["warmup_method"] is None and cell["settled"] is None
    groups = {g["variant"]["allocator"]: g for g in doc["groups"]}
    assert groups["glibc"]["repeats"] == groups["jemalloc"]["repeats"] == 3
    assert groups["glibc"]["qps_ci_low"] < groups["glibc"]["qps_mean"] < groups["glibc"]["qps_ci_high"]

    again = perflab("report", str(v1))  # opened a second time: already version 2, read as such
    assert again.returncode == 0, again.stderr
    assert "jemalloc" in again.stdout and "broken" in again.stdout
    assert schema_version(v1) == SCHEMA_VERSION


def test_upgraded_directory_gives_verdicts(v1: Path):
    done = perflab("compare", str(v1), "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    (row,) = [r for r in rows if r["variant"] == {"allocator": "jemalloc"}]
    assert row["baseline"] == {"allocator": "glibc"} and row["n_baseline"] == row["n_variant"] == 3
    assert (
        row["verdict"] in ("faster", "slower", "equivalent", "inconclusive") and row["method"] == "paired"
    )  # 3 rounds hold both: paired from 2 (analyze/ratio.MIN_PAIRS)
    assert row["ci_low"] < row["ratio"] < row["ci_high"]


def set_version(directory: Path, version: object) -> None:
    db = sqlite3.connect(directory / "results.db")
    with db:
        if version is None:
            db.execute("DELETE FROM meta WHERE key = 'schema_version'")
        else:
            db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (json.dumps(version),))
    db.close()


@pytest.mark.parametrize("version", [SCHEMA_VERSION + 1, 99, 0, "2", None])
def test_unknown_schema_version_is_refused_with_a_hint(v1: Path, version: object):
    set_version(v1, version)
    with pytest.raises(ResultsFormatError) as refused:
        Results(v1)
    assert refused.value.exit_code == 2
    assert refused.value.message.endswith(f"results schema version {version!r}, this perflab reads {SCHEMA_VERSION}")
    assert refused.value.hint == "use the perflab version that wrote it"
    assert not columns(v1) & V2_COLUMNS  # refused, not half-upgraded
    assert schema_version(v1) == version


def test_every_reading_verb_refuses_a_newer_schema(v1: Path):
    set_version(v1, SCHEMA_VERSION + 1)
    for verb in ("export", "report", "compare"):
        done = perflab(verb, str(v1))
        assert done.returncode == 2, (verb, done.stdout + done.stderr)
        assert f"results schema version {SCHEMA_VERSION + 1}, this perflab reads {SCHEMA_VERSION}" in done.stderr
        assert "hint: use the perflab version that wrote it" in done.stderr
        assert "Traceback" not in done.stderr and done.stdout == ""
    assert not columns(v1) & V2_COLUMNS


def test_schema2_directory_gains_the_alloc_and_build_columns(tmp_path: Path) -> None:
    with Results(tmp_path, create=True):
        pass
    db = sqlite3.connect(tmp_path / "results.db")
    added = ("alloc", "build", "client", "server_status", "host_speed")
    kept = ", ".join(c for c in columns(tmp_path) if c not in added)
    db.execute(f"CREATE TABLE v2 AS SELECT {kept} FROM cells")  # the cells table as schema 2 had it
    db.execute("DROP TABLE cells")
    db.execute("ALTER TABLE v2 RENAME TO cells")
    db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with Results(tmp_path) as results:
        assert results.meta()["schema_version"] == SCHEMA_VERSION == 10
        assert results.cells() == []
    assert set(added) <= columns(tmp_path)


def test_upgrade_adds_the_client_and_status_columns_and_table(v1: Path):
    Results(v1).close()
    assert {"client", "server_status"} <= columns(v1)
    with Results(v1) as results:
        assert results.status_samples(0) == []  # the table exists, empty for older cells
        cell = results.cells()[0]
        assert cell["client"] is None and cell["server_status"] is None


def test_schema6_cells_gain_the_host_speed_column(tmp_path: Path) -> None:
    with Results(tmp_path, create=True) as results:
        results.commit_cell({"id": 0, "key": "t1/r1", "variant": {}, "threads": 1, "repeat": 1, "status": "ok",
                             "env": {}, "server_options": {}}, [], [])  # fmt: skip
    db = sqlite3.connect(tmp_path / "results.db")
    kept = ", ".join(c for c in columns(tmp_path) if c != "host_speed")
    db.execute(f"CREATE TABLE v6 AS SELECT {kept} FROM cells")  # the cells table as schema 6 had it
    db.execute("DROP TABLE cells")
    db.execute("ALTER TABLE v6 RENAME TO cells")
    db.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    assert "host_speed" not in columns(tmp_path)
    with Results(tmp_path) as results:
        assert results.meta()["schema_version"] == SCHEMA_VERSION == 10
        assert [c["host_speed"] for c in results.cells()] == [None]
        results.commit_cell({**results.cells()[0], "id": 1, "key": "t1/r2", "host_speed": {"work_ns": 1.0}}, [], [])
        assert [c["host_speed"] for c in results.cells()] == [None, {"work_ns": 1.0}]


def _profile(target: str | None = None, phase: str = "measured") -> dict:
    row = {"cell_id": 0, "source": "pmp", "phase": phase, "path": "profiles/cell-0000.pmp.folded", "samples": 7}
    return (
        row
        | {"seconds": 2.0, "transactions": 100.0, "quality": None, "top": []}
        | ({"target": target} if target else {})
    )


def test_schema5_profiles_gain_a_target_and_keep_their_rows(tmp_path: Path) -> None:
    with Results(tmp_path, create=True) as results:
        results.commit_profile(_profile())
    db = sqlite3.connect(tmp_path / "results.db")
    kept = ", ".join(c for c in columns(tmp_path, "profiles") if c != "target")
    db.execute("DROP VIEW IF EXISTS profile_top_flat")
    db.execute(f"CREATE TABLE v5 AS SELECT {kept} FROM profiles")  # schema 5: no target, key without it
    db.execute("DROP TABLE profiles")
    db.execute("ALTER TABLE v5 RENAME TO profiles")
    db.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    assert "target" not in columns(tmp_path, "profiles")
    with Results(tmp_path) as results:
        assert results.meta()["schema_version"] == SCHEMA_VERSION == 10
        assert [(p["target"], p["phase"], p["samples"]) for p in results.profiles()] == [("server", "measured", 7)]
        results.commit_profile(_profile("client"))  # the client's beside the server's: the key has the target
        results.commit_profile(_profile("client", "stall"))
        got = [(p["target"], p["phase"]) for p in results.profiles()]
        assert got == [("server", "measured"), ("client", "measured"), ("client", "stall")]
        assert query(tmp_path / "results.db", "SELECT count(*) FROM profile_top_flat") == [(0,)]


def test_a_new_results_database_appears_with_its_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader polling a run's directory (as `perflab status` or a script does) never opens a
    results.db without tables: the schema is written beside it and renamed into place; a scratch
    file left by a creation killed midway is replaced."""
    import os

    target = tmp_path / "results.db"
    (tmp_path / "results.db.new").write_bytes(b"a half-written file from a killed run")
    seen: list[tuple[bool, set[str]]] = []
    real_replace = os.replace

    def replace(src: object, dst: object) -> None:
        tables = {row[0] for row in query(Path(str(src)), "SELECT name FROM sqlite_master WHERE type = 'table'")}
        seen.append((target.exists(), tables))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with Results(tmp_path, create=True) as results:
        assert results.meta()["schema_version"] == SCHEMA_VERSION
    assert seen == [(False, seen[0][1])] and {"meta", "cells", "intervals", "status_samples"} <= seen[0][1]
    assert not (tmp_path / "results.db.new").exists()
    assert schema_version(tmp_path) == SCHEMA_VERSION


def test_a_write_waits_for_another_processs_write(tmp_path: Path) -> None:
    """CI, 2026-11-28: a run's view refresh met a starved `perflab export` refreshing them too, waited
    sqlite3's default 5 s and ended the run ("database is locked"). A write now waits up to BUSY_S."""
    import threading
    import time

    from perflab.store.results import BUSY_S

    out = tmp_path / "r"
    Results(out, create=True).close()
    with Results(out) as results:
        assert results.db.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_S * 1000 >= 60_000
        other = sqlite3.connect(out / "results.db", isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # another process's write, held
        held = threading.Timer(1.0, lambda: other.execute("COMMIT"))
        held.start()
        started = time.monotonic()
        results.set_meta(note="written after the other's commit")
        assert time.monotonic() - started >= 0.9 and results.meta()["note"].startswith("written")
        held.join()
        other.close()


def _meta(directory: Path, key: str) -> object:
    rows = query(directory / "results.db", f"SELECT value FROM meta WHERE key = '{key}'")
    return json.loads(rows[0][0]) if rows else None


def test_schema10_an_older_directory_gains_its_server_kinds_facts(v1: Path):
    """The reports read the server kind's facts from the results (issue 47): an old MariaDB directory gets
    MariaDB's of that day, with the subtitle's short version from its own host record."""
    assert _meta(v1, "server_facts") is None
    assert perflab("export", str(v1)).returncode == 0
    facts = _meta(v1, "server_facts")
    host = _meta(v1, "host")
    assert facts["kind"] == "mariadb" and facts["memory_figure"] == "RSS" and facts["host_field"] == "mariadbd"
    assert facts["short_version"].startswith("mariadbd ") and facts["short_version"].split()[1] in host["mariadbd"]
    assert "innodb_flush_log_at_trx_commit" in facts["durability_options"]


def test_schema10_a_postgresql_directory_gets_pss(v1: Path):
    db = sqlite3.connect(v1 / "results.db")
    with db:
        experiment = json.loads(db.execute("SELECT value FROM meta WHERE key = 'experiment'").fetchone()[0])
        db.execute("UPDATE meta SET value = ? WHERE key = 'experiment'", (json.dumps({**experiment, "server": "postgresql"}),))
        db.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    db.close()
    with Results(v1) as results:
        facts = results.meta()["server_facts"]
    assert facts["memory_figure"] == "PSS" and "synchronous_commit" in facts["durability_options"]


def test_the_facts_recorded_today_are_the_kinds_own():
    """What a new run records (cli/run.py: Kind.facts) agrees with what an old run is given, for the fields
    both have: a kind that changes one of them changes new runs only."""
    from perflab.servers import NAMES, kind  # noqa: PLC0415
    from perflab.store.schema import facts_before_10  # noqa: PLC0415

    for name in NAMES:
        host = {kind(name).host_field: "/usr/sbin/x  Ver 1.2.3 for debian"}
        now, then = kind(name).facts(host), facts_before_10({"experiment": {"server": name}, "host": host})
        assert now == then, name
