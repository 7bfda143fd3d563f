"""Which server binary a run's calibration is checked against (cli/calibrated.plan): the one the
file's first configuration runs, as `perflab calibrate` measured it -- postgres for a PostgreSQL
file, the [builds] entry its first variant names -- and a changed binary is refused with the
reason. Fake binaries (shell scripts that answer --version) stand in for the servers."""

from __future__ import annotations

import datetime as dt
import stat
from pathlib import Path

import pytest

from perflab import hostinfo, spec
from perflab.cli import calibrated
from perflab.errors import UsageError
from perflab.builds import sha256
from perflab.cache import cache_root
from perflab.servers import mysqld
from perflab.servers.postgresql import server as postgres
from perflab.store import calibration

PG = '[experiment]\nname = "t"\nserver = "postgresql"\nrepeats = "auto"\n'
PG += '[dataset]\nscale = 1\n[workload]\ntool = "pgbench"\ntest = "select-only"\nthreads = [1]\n'
MARIADB = '[experiment]\nname = "t"\nrepeats = "auto"\n[dataset]\ntables = 1\ntable_size = 1000\n'
MARIADB += '[workload]\ntest = "oltp_read_only"\nthreads = [1]\n'


def fake(path: Path, version: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{version}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A fake installed mariadbd and postgres, and the cache (PERFLAB_CACHE) in tmp_path."""
    monkeypatch.setenv("PERFLAB_CACHE", str(tmp_path / "cache"))
    mariadbd = fake(tmp_path / "installed" / "mariadbd", "mariadbd  Ver 10.11.99-MariaDB for debian-linux-gnu")
    pg = fake(tmp_path / "installed" / "postgres", "postgres (PostgreSQL) 15.99")
    monkeypatch.setattr(mysqld, "binary", lambda name: str(mariadbd))
    monkeypatch.setattr(postgres, "pg_binary", lambda name, bindir=None: str(pg))
    return {"mariadb": mariadbd, "postgresql": pg}


def calibrate(exp: spec.Experiment, binary: Path) -> Path:
    """The calibration `perflab calibrate` saves for `exp`, measured with `binary`."""
    host = calibration.host_identity(hostinfo.collect())
    whash = calibration.workload_hash(
        exp.file.dataset.model_dump(mode="json"), exp.file.workload.model_dump(mode="json")
    )
    design = exp.file.experiment.design or "sequential"  # a calibration is of one design
    doc = {
        "format": calibration.FORMAT,
        "created_at": dt.datetime.now(dt.UTC).isoformat(),
        "host": host,
        "workload_hash": whash,
        "server_sha256": sha256(binary),
        "noise": {"per_second": 0.004, "restart": 0.0002, "overhead": 10.0},
        "design": design,
    }
    return calibration.save(calibration.path_for(cache_root() / "calibration", host, whash, design), doc)


def test_a_postgresql_calibration_is_used_and_refused_once_postgres_changed(servers: dict[str, Path]):
    exp = spec.parse(PG, "<pg>")
    saved = calibrate(exp, servers["postgresql"])
    _, used = calibrated.plan(exp, None)
    assert used["used"] and used["file"] == str(saved), used
    assert calibrated.plan(exp, saved)[1]["used"]
    fake(servers["postgresql"], "postgres (PostgreSQL) 15.100")  # postgres upgraded since
    _, ignored = calibrated.plan(exp, None)
    assert not ignored["used"] and "server_sha256: the server binary changed since" in ignored["note"]
    with pytest.raises(UsageError, match="server_sha256: the server binary changed since"):
        calibrated.plan(exp, saved)


def test_a_calibration_of_a_builds_binary_is_refused_once_that_binary_changed(servers: dict[str, Path], tmp_path: Path):
    basedir = tmp_path / "mine"
    binary = fake(basedir / "bin" / "postgres", "postgres (PostgreSQL) 15.42")
    fake(basedir / "bin" / "initdb", "initdb (PostgreSQL) 15.42")
    text = PG + f'[builds.mine]\nbasedir = "{basedir}"\n[variants.server]\nmine = {{ build = "mine" }}\nold = {{}}\n'
    exp = spec.parse(text, "<pg builds>")
    saved = calibrate(exp, binary)  # the first variant runs build "mine": the A/A measured its binary
    used = calibrated.plan(exp, None)[1]
    assert used["used"], used
    fake(binary, "postgres (PostgreSQL) 15.43")
    _, ignored = calibrated.plan(exp, None)
    assert not ignored["used"] and "server_sha256: the server binary changed since" in ignored["note"]
    with pytest.raises(UsageError, match="server_sha256"):
        calibrated.plan(exp, saved)


def test_a_calibration_is_refused_while_the_build_it_would_check_is_not_made(servers: dict[str, Path], tmp_path: Path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "CMakeLists.txt").write_text("project(x C)\n")
    text = MARIADB + f'[builds.src]\nsource = "{tree}"\nflags = "none"\n[variants.server]\nsrc = {{ build = "src" }}\n'
    exp = spec.parse(text, "<source build>")
    saved = calibrate(exp, servers["mariadb"])
    _, ignored = calibrated.plan(exp, None)
    assert not ignored["used"] and "server_sha256: build 'src' is not made yet" in ignored["note"], ignored
    with pytest.raises(UsageError, match="not made yet"):
        calibrated.plan(exp, saved)
