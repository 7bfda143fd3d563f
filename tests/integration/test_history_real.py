"""History against the real things: a real `perflab run` records itself in the index it is given
(the same estimates its export has), and a throwaway PostgreSQL server (started by perflab's own
managed-PostgreSQL code on a temporary directory) serves as a team's shared index.

Needs mariadbd, sysbench and postgresql-15 (make setup); starts servers: run under the lock.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from perflab.servers.postgresql import server as pgserver
from tests.conftest import perflab
from tests.unit.history_runs import make_run

TINY = Path(__file__).resolve().parent.parent / "data" / "report" / "tiny.toml"


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict]:
    tmp = tmp_path_factory.mktemp("histreal")
    where = str(tmp / "history.sqlite")
    done = perflab("run", str(TINY), "-o", str(tmp / "tiny"), "--history", where)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"history: recorded in {where} (perflab history tiny)" in done.stdout
    exported = json.loads(perflab("export", str(tmp / "tiny")).stdout)
    return tmp / "tiny", where, exported


def test_a_run_records_the_estimates_its_report_shows(real_run):
    results, where, exported = real_run
    done = perflab("history", "tiny", "--history", where, "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    absolute = [s for s in doc["series"] if s["kind"] == "absolute"]
    assert len(absolute) == len(exported["groups"]) == 2  # glibc and jemalloc at 2 threads
    (ratio,) = [s for s in doc["series"] if s["kind"] == "ratio"]  # jemalloc / glibc, the report's comparison
    compared = next(c for c in exported["comparisons"] if c["kind"] == "variant" and c["metric"] == "qps")
    assert (ratio["variant"], ratio["baseline"]) == (compared["variant"], compared["baseline"])
    assert (ratio["runs"][0]["mean"], ratio["runs"][0]["low"], ratio["runs"][0]["high"]) == pytest.approx(
        (compared["ratio"], compared["ci_low"], compared["ci_high"])
    )
    assert ratio["gated"] and not any(s["gated"] for s in absolute)
    for series in absolute:
        group = next(g for g in exported["groups"] if g["variant"] == series["variant"])
        (run,) = series["runs"]
        assert run["directory"] == str(results.resolve()) and run["started_at"] == exported["run"]["started_at"]
        assert (run["mean"], run["low"], run["high"], run["n"]) == pytest.approx(
            (group["qps_mean"], group["qps_ci_low"], group["qps_ci_high"], group["repeats"])
        )
        assert run["provenance"]["build.installed"] == exported["cells"][0]["build"]["sha256"][:12]
        assert run["provenance"]["package.sysbench"] == exported["host"]["sysbench"]


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A PostgreSQL server on a temporary directory (socket only), its URL; stopped at the end."""
    base = Path(tempfile.mkdtemp(prefix="plhist-", dir="/tmp"))
    try:
        pgserver.initdb(base / "data", base / "initdb.log")
        with pgserver.PostgreSQL(base / "run", base / "data", {}):  # started on entry, killed on exit
            yield f"postgresql://{pgserver.SUPERUSER}@/postgres?host={base / 'run'}&port={pgserver.PORT}"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_postgresql_index_holds_what_a_sqlite_one_does(postgres: str, real_run, tmp_path: Path):
    results, _, _ = real_run
    nights = [make_run(tmp_path / f"n{i}", i, [1000.0 * (0.9 if i >= 8 else 1.0) + d for d in (-8, 0, 8, 3)])
              for i in range(12)]  # fmt: skip
    dirs = [str(d) for d in (*nights, results)]
    sqlite = str(tmp_path / "h.sqlite")
    for where in (postgres, sqlite):
        done = perflab("history", "import", *dirs, "--history", where)
        assert done.returncode == 0 and "13 run(s) recorded" in done.stdout, done.stderr
    docs = [
        json.loads(perflab("history", "nightly", "--history", w, "--format", "json").stdout) for w in (postgres, sqlite)
    ]
    assert docs[0]["index"] != docs[1]["index"]
    assert {**docs[0], "index": None} == {**docs[1], "index": None}
    assert [c["run"] for c in docs[0]["series"][0]["change_points"]] == [9]
    again = perflab("history", "import", str(results), "--history", postgres)  # recorded again: replaced
    assert again.returncode == 0
    tiny = json.loads(perflab("history", "tiny", "--history", postgres, "--format", "json").stdout)
    assert all(len(s["runs"]) == 1 for s in tiny["series"])
    assert any(s["kind"] == "ratio" for s in tiny["series"])  # the ratios table round-trips in PostgreSQL too
    gate = perflab("history", "nightly", "--history", postgres, "--fail-on", "slower:3%")
    assert gate.returncode == 0, gate.stderr  # the step is behind: runs 9-12 are the reference now
