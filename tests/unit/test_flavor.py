"""What differs between MariaDB, MySQL and Percona Server: the kind (servers/mariadb or
servers/mysql) and format read from a version line, each kind's Flavor (the option translation,
the option file), how each kind initialises a datadir, and the
report's note on variants that ran on a dataset of their own. Builds here are records (as
`perflab run` stores them); nothing is started: tests/integration/test_mysql.py runs the
command lines against a fake mysqld, tests/integration/test_datasets.py a real MariaDB."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perflab.errors import PerflabError
from perflab.report import findings
from perflab.builds import Build
from perflab.servers.mariadb import datadir
from perflab.servers import kind_of_flavor
from perflab.servers.mysql_dialects import dialect as flavor_of
from perflab.servers.mysql_dialects import plan
from perflab.servers.mysql_flavor import version_tuple
from perflab.servers.mysqld import DEFAULT_OPTIONS, Mysqld

MYSQL80 = "8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)"
MYSQL8029 = "8.0.29 for Linux on x86_64 (MySQL Community Server - GPL)"
MYSQL57 = "5.7.44 for linux-glibc2.12 on x86_64 (MySQL Community Server (GPL))"
PERCONA = "8.0.36-28 for Linux on x86_64 (Percona Server (GPL), Release 28, Revision 47601f19)"
MARIADB = "10.11.18-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)"


def build(version: str, binary: Path = Path("/opt/x/bin/mysqld"), share: Path | None = None, **recipe) -> Build:
    return Build("b", "basedir", binary, version, "0" * 64, None, share, recipe or None)


@pytest.mark.parametrize(
    ("version", "server", "fmt", "numbers"),
    [
        (MYSQL80, "mysql", "mysql-8.0", (8, 0, 36)),
        (MYSQL57, "mysql", "mysql-5.7", (5, 7, 44)),
        (PERCONA, "percona", "percona-8.0", (8, 0, 36)),
        (MARIADB, "mariadb", "mariadb-10.11", (10, 11, 18)),
    ],
)
def test_kind_format_and_version_come_from_the_version_line(version, server, fmt, numbers):
    b = build(version)
    assert (b.server, b.format, version_tuple(version)) == (server, fmt, numbers)
    assert (flavor_of(b).kind, flavor_of(b).version) == (server, numbers)
    assert flavor_of(b).group == ("mariadbd" if server == "mariadb" else "mysqld")
    assert kind_of_flavor(b.server).name == ("mariadb" if server == "mariadb" else "mysql")  # Percona Server: MySQL's kind


def test_the_redo_log_size_is_translated_to_what_each_mysql_calls_it():
    options = {"innodb_log_file_size": "256M", "max_connections": 10}
    assert flavor_of(build(MYSQL80)).translate(options) == {"innodb_redo_log_capacity": "256M", "max_connections": 10}
    assert flavor_of(build(PERCONA)).translate(options)["innodb_redo_log_capacity"] == "256M"
    # before 8.0.30: the same total in MySQL's two log files (innodb_log_files_in_group = 2)
    assert flavor_of(build(MYSQL8029)).translate(options)["innodb_log_file_size"] == 128 << 20
    assert flavor_of(build(MARIADB)).translate(options) == options
    assert flavor_of(None).translate(options) == options  # the installed server is MariaDB
    explicit = {"innodb-log-file-size": "1G", "innodb_redo_log_capacity": "2G"}  # the user's capacity wins
    assert flavor_of(build(MYSQL80)).translate(explicit) == {"innodb_redo_log_capacity": "2G"}


def test_a_mysql_57_option_file(tmp_path: Path):
    """[mysqld]; the redo log in two files; no mysqlx (5.7 does not load the X Plugin by default)."""
    server = Mysqld(tmp_path, tmp_path / "data", {}, build=build(MYSQL57, share=tmp_path / "share"))
    server.write_option_file()
    lines = server.option_file.read_text().splitlines()
    assert lines[1] == "[mysqld]"
    assert "innodb_log_file_size=134217728" in lines and not any(ln.startswith("mysqlx") for ln in lines)
    assert lines[-2:] == [f"secure-file-priv={tmp_path}/files", "basedir=/opt/x"]  # made at its start (HereHome)
    assert f"lc-messages-dir={tmp_path}/share" in lines


def test_a_mariadb_build_keeps_mariadbs_option_file(tmp_path: Path):
    server = Mysqld(tmp_path, tmp_path / "data", {}, build=build(MARIADB, Path("/opt/m/sbin/mariadbd")))
    server.write_option_file()
    lines = server.option_file.read_text().splitlines()
    assert lines[1] == "[mariadbd]" and f"innodb_log_file_size={DEFAULT_OPTIONS['innodb_log_file_size']}" in lines
    assert not any(ln.startswith(("basedir", "mysqlx", "bind-address", "port")) for ln in lines)
    # LOAD_FILE and OUTFILE reach the cell's own directory only, and no TCP: the socket alone (issue 48)
    assert f"secure-file-priv={tmp_path / 'files'}" in lines and "skip-networking" in lines


def test_a_server_for_a_tcp_client_listens_on_its_address_only(tmp_path: Path):
    server = Mysqld(tmp_path, tmp_path / "data", {})
    server.bind_address = "127.0.0.1"  # go-tpc's, or a client host's (Kind.listen_on)
    server.write_option_file()
    lines = server.option_file.read_text().splitlines()
    assert "bind-address=127.0.0.1" in lines and f"port={server.port}" in lines and "skip-networking" not in lines


def tree(root: Path, *files: str) -> Path:
    for name in ("sbin/mariadbd", *files):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    return root


def test_a_mariadb_build_is_initialised_by_its_own_install_script(tmp_path: Path):
    user = ["--user=root"] if os.geteuid() == 0 else []
    base = tree(tmp_path / "pkg", "bin/mariadb-install-db")  # as the unpacked package: no my_print_defaults
    b = build(MARIADB, base / "sbin" / "mariadbd", base / "share" / "mysql")
    init = datadir.plan(tmp_path / "d", b)
    assert init.argv == [
        f"{base}/bin/mariadb-install-db",
        "--no-defaults",
        f"--datadir={tmp_path}/d",
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
        "--force",
        *user,
        f"--lc-messages-dir={base}/share/mysql",
    ]  # no --basedir: the script then needs my_print_defaults there, and finds its tree by itself
    # its temporary tables beside the datadir: a mariadbd starting in /tmp removes every #sql file there
    assert init.env == {"MYSQLD_BOOTSTRAP": f"{base}/sbin/mariadbd", "TMPDIR": f"{tmp_path}/d-files"}
    assert init.method == f"{base}/bin/mariadb-install-db (the build's own)"
    full = tree(tmp_path / "tarball", "scripts/mariadb-install-db", "bin/my_print_defaults")
    init = datadir.plan(tmp_path / "d", build(MARIADB, full / "sbin" / "mariadbd"))
    assert init.argv[0] == f"{full}/scripts/mariadb-install-db" and init.argv[-1] == f"--basedir={full}"


def test_mysql_is_initialised_by_mysqld_itself(tmp_path: Path):
    b = build(MYSQL80, tmp_path / "base" / "bin" / "mysqld", basedir=str(tmp_path / "base"))
    init = plan(tmp_path / "w" / "snap", b)  # servers/mysql/datadir.py
    root = ["--user=root"] if os.geteuid() == 0 else []
    assert init.argv == [
        f"{tmp_path}/base/bin/mysqld",
        "--no-defaults",
        "--initialize-insecure",
        f"--basedir={tmp_path}/base",
        f"--datadir={tmp_path}/w/snap",
        f"--secure-file-priv={tmp_path}/w/snap-files",
        *root,
    ]
    assert init.env == {} and init.method == "mysqld --initialize-insecure"
    assert (tmp_path / "w" / "snap-files").is_dir() and not (tmp_path / "w" / "snap").exists()


def test_the_report_names_the_variants_that_ran_on_their_own_dataset():
    meta = {
        "datasets": {
            "mariadb-10.11": {"dir": "dataset", "own": False, "builds": [None, "old"]},
            "mysql-8.0": {
                "dir": "dataset-mysql-8.0",
                "own": True,
                "builds": ["my"],
                "init": "/opt/mysql/bin/mysqld --initialize-insecure",
                "prepared_by": {"name": "my", "version": MYSQL80},
            },
            "percona-8.0": {"dir": None, "own": True, "builds": ["pc"], "error": "..."},  # failed: its cells say
        }
    }
    cells = [
        {"id": i, "key": f"k{i}", "status": "ok", "variant": {"server": name}, "build": {"name": b} if b else None}
        for i, (name, b) in enumerate([("current", None), ("old", "old"), ("mysql", "my"), ("mysql", "my")])
    ]
    [found] = [f for f in findings.collect([], cells, meta) if f.kind == "dataset"]
    assert found.level == "info" and found.cells == (2, 3)
    assert found.text.startswith(
        "dataset: server=mysql ran on its own dataset (mysql-8.0), prepared by 8.0.36 with mysqld "
        "--initialize-insecure; the others on the mariadb-10.11 dataset"
    )
    meta["datasets"].pop("mysql-8.0")
    assert [f for f in findings.collect([], cells, meta) if f.kind == "dataset"] == []


def test_a_mysql_without_initialize_insecure_is_refused_with_why(tmp_path: Path):
    b = build("5.6.51 for linux-glibc2.12 on x86_64 (MySQL Community Server (GPL))", tmp_path / "bin" / "mysqld")
    with pytest.raises(PerflabError) as caught:
        plan(tmp_path / "d", b)
    assert "has no --initialize-insecure (MySQL 5.7.6 and later have it)" in caught.value.message
