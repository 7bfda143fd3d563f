"""MySQL as a server kind of its own (perflab/servers/mysql/, issue 34 item 1): which binaries
and datadirs are its, what an experiment of `server = "mysql"` must hold (a build in every
variant: Debian 12 has none installed), and what it shares with MariaDB (mysql_protocol.py).
Nothing is started here: tests/integration/test_mysql_sid_real.py runs sid's mysqld."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from perflab import servers
from perflab.errors import EXIT_USAGE, PerflabError, UsageError
from perflab.builds import Build
from perflab.run.datasets import Datasets
from perflab.servers import identity, kind, kind_of_flavor
from perflab.servers.mysql_dialects import dialect
from perflab.servers.mysql_protocol import MySQLProtocolKind
from perflab.servers.mysqld import Mysqld
from perflab.spec.loading import parse

MYSQL97 = "9.7.4 for Linux on x86_64 (MySQL Community Server - GPL)"
PERCONA = "8.0.36-28 for Linux on x86_64 (Percona Server (GPL), Release 28, Revision 47601f19)"
MARIADB = "10.11.18-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)"
PG = "postgres (PostgreSQL) 18.1 (Debian 18.1-1)"
SID = '[builds.mysql97]\npackage = "mysql-server-core"\nsuite = "sid"\n'


def build(version: str, binary: str = "/opt/x/usr/sbin/mysqld") -> Build:
    return Build("b", "package", Path(binary), version, "0" * 64, None)


def problems(text: str) -> list[str]:
    try:
        parse('[experiment]\nname = "t"\n' + text)
    except PerflabError as exc:
        return [p.path for p in getattr(exc, "problems", [])] or [exc.message]
    return []


def test_the_kind_of_a_build_comes_from_its_binary():
    assert [kind_of_flavor(build(v).server).name for v in (MYSQL97, PERCONA, MARIADB)] == ["mysql", "mysql", "mariadb"]
    assert [build(v).format for v in (MYSQL97, PERCONA)] == ["mysql-9.7", "percona-8.0"]
    assert identity.flavor_of(MYSQL97) == "mysql"  # a mysqld's line names no server: MySQL's
    assert isinstance(kind("mysql"), MySQLProtocolKind) and isinstance(kind("mariadb"), MySQLProtocolKind)
    assert dialect(None).kind == "mariadb"  # a variant without a build: Debian 12's mariadbd
    with pytest.raises(UsageError) as caught:
        dialect(build(PG, "/opt/pg/bin/postgres"))
    assert "PostgreSQL" in caught.value.message and 'server = "postgresql"' in caught.value.hint


def test_a_mysql_build_runs_in_mysqls_dialect_under_either_experiment_kind(tmp_path: Path):
    for name in ("mariadb", "mysql"):
        server = kind(name).server(tmp_path / name, tmp_path / "data", {}, build=build(MYSQL97))
        assert isinstance(server, Mysqld) and server.flavor.group == "mysqld"
        server.write_option_file()
        lines = server.option_file.read_text().splitlines()
        assert "innodb_redo_log_capacity=256M" in lines and "mysqlx=0" in lines and "basedir=/opt/x/usr" in lines
    mariadb = kind("mariadb").server(tmp_path / "m", tmp_path / "data", {})
    assert mariadb.flavor.group == "mariadbd" and mariadb.flavor.metrics_enabled == "ENABLED"


def test_mysql_datadirs_and_percona_opens_them(tmp_path: Path):
    (tmp_path / "my").mkdir()
    (tmp_path / "my" / "mysql.ibd").write_text("")
    assert kind("mysql").datadir_format(tmp_path / "my") == "mysql"
    assert kind("mariadb").datadir_format(tmp_path / "my") is None
    (tmp_path / "my" / "aria_log_control").write_text("")  # MariaDB's, whatever else is there
    assert kind("mysql").datadir_format(tmp_path / "my") is None
    assert servers.opens("percona-8.0", "mysql") and servers.opens("mysql-9.7", "mysql")
    assert not servers.opens("mariadb-11.8", "mysql") and not servers.opens("percona-8.0", "mariadb")


def test_server_mysql_needs_a_build_in_every_variant():
    assert problems('server = "mysql"\n') == ["variants"]
    mixed = 'server = "mysql"\n' + SID + '[variants.server]\nmysql = { build = "mysql97" }\nmariadb = {}\n'
    assert problems(mixed) == ["variants.server.mariadb.build"]
    # one axis with a build in each label: every cell has one, whatever the other axes say
    every = SID + '[variants.server]\nmysql = { build = "mysql97" }\n[variants.alloc]\nglibc = {}\njemalloc = {}\n'
    assert problems('server = "mysql"\n' + every) == []
    assert problems(mixed.replace('server = "mysql"\n', "")) == []  # server = "mariadb": the installed one runs
    debian = '[builds.src]\nsource = "debian"\n[variants.v]\na = { build = "src" }\n'
    assert problems('server = "mysql"\n' + debian) == ["builds.src.source"]  # Debian 12 has no MySQL source


def test_no_installed_mysql_exit_2_and_every_format_its_own_dataset(tmp_path: Path):
    with pytest.raises(UsageError) as caught:
        kind("mysql").installed_binary()
    assert caught.value.exit_code == EXIT_USAGE and "mysql-server-core" in caught.value.hint
    assert kind("mysql").host_versions() == {}  # /usr/sbin/mysqld on Debian 12 is MariaDB's
    datasets = Datasets(SimpleNamespace(kind=kind("mysql")), SimpleNamespace(), tmp_path)  # type: ignore[arg-type]
    assert (
        datasets.installed is None
        and datasets.own("mysql-9.7")
        and datasets.dirname("mysql-9.7") == "dataset-mysql-9.7"
    )


def test_mysql_needs_no_installed_mariadbd(monkeypatch: pytest.MonkeyPatch):
    from perflab import tools

    monkeypatch.setattr(tools, "which", lambda name: None)
    missing = {p.path for p in kind("mysql").tool_problems()}
    assert "(tool) sysbench" in missing and "(tool) mariadb" in missing  # the client runs perflab's SQL
    assert not missing & {"(tool) mariadbd", "(tool) mariadb-install-db"}
    assert "(tool) mariadbd" in {p.path for p in kind("mariadb").tool_problems()}


def test_one_dataset_for_every_variant_is_no_finding():
    """server = "mysql" with one format: its dataset is its own (no installed one), and the same
    for every variant, so the report says nothing of datasets; two formats, it does."""
    from perflab.report import findings

    one = {"dir": "dataset-mysql-9.7", "own": True, "builds": ["a", "b"], "prepared_by": {"version": "9.7.4"}}
    cells = [
        {"id": i, "key": f"k{i}", "status": "ok", "variant": {"v": b}, "build": {"name": b}} for i, b in enumerate("ab")
    ]
    assert [f for f in findings.collect([], cells, {"datasets": {"mysql-9.7": one}}) if f.kind == "dataset"] == []
    two = {"mysql-9.7": {**one, "builds": ["a"]}, "mysql-8.4": {**one, "dir": "dataset-mysql-8.4", "builds": ["b"]}}
    found = [f for f in findings.collect([], cells, {"datasets": two}) if f.kind == "dataset"]
    assert len(found) == 2 and "no other variant on it" in found[0].text


def test_server_mysql_on_or_with_another_host_is_refused():
    bare = SID + '[variants.server]\nmysql = { build = "mysql97" }\n'
    assert problems('server = "mysql"\nserver_host = "root@10.0.0.2"\n' + bare)[0] == "experiment.server_host"
    assert problems('server = "mysql"\nclient_host = "root@10.0.0.2"\n' + bare)[0] == "experiment.client_host"
