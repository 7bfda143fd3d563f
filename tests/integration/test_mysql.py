"""MySQL and Percona Server through `basedir`, on a FAKE mysqld: no MySQL binary can be had on
these machines (Debian ships none), so what is tested is what perflab does with one, not that
MySQL runs. The fake is a small Python script at BASE/bin/mysqld: for --version it prints
MySQL's (or Percona Server's) version line; for --initialize-insecure it records its argv and
creates the datadir; started as a server it records its argv and option file and exits with a
clear error. The test asserts the exact command lines and option file perflab used, that the
build's cells fail at their own dataset with the fake's words, and that the installed
server's variant ran all the same."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from perflab.builds import resolve as R
from tests.conftest import perflab
from tests.integration.helpers import REDO, used, write_experiment

MYSQL = "8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)"
PERCONA = "8.0.36-28 for Linux on x86_64 (Percona Server (GPL), Release 28, Revision 47601f19)"
FAKE = """\
#!/usr/bin/env python3
# A fake mysqld for perflab's tests: it records how it was called; it is not a server.
import json, os, pathlib, sys
base = pathlib.Path(__file__).resolve().parent.parent
args = sys.argv[1:]
if args == ["--version"]:
    print(f"{sys.argv[0]}  Ver VERSION")
    sys.exit(0)
if "--help" in args:  # --check asks for the option names (servers/mysqld_options.py): a fake has few
    print("  --datadir=name      Path to the database root directory")
    sys.exit(0)
option_file = next((a.split("=", 1)[1] for a in args if a.startswith("--defaults-file=")), None)
record = {"argv": sys.argv, "option_file": pathlib.Path(option_file).read_text() if option_file else None}
with open(base / "calls.jsonl", "a") as calls:
    calls.write(json.dumps(record) + "\\n")
if "--initialize-insecure" in args:
    datadir = pathlib.Path(next(a.split("=", 1)[1] for a in args if a.startswith("--datadir=")))
    datadir.mkdir()  # as mysqld --initialize: the datadir must not exist yet
    (datadir / "fake-initialized").write_text("by a fake mysqld\\n")
    sys.exit(0)
print("fake mysqld (a perflab test fixture): not a MySQL server, cannot serve", file=sys.stderr)
sys.exit(1)
"""
SPEC = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-mysql"
duration = "2s"
warmup = "1s"
repeats = 1

[dataset]
tables = 1
table_size = 1000

[workload]
threads = [1]

[builds.mysql80]
basedir = "{base}"

[variants.server]
current = {{}}
mysql80 = {{ build = "mysql80" }}
"""


def fake_basedir(root: Path, version: str) -> Path:
    """BASE/bin/mysqld (the fake), BASE/share/english/errmsg.sys and BASE/share/charsets/."""
    binary = root / "bin" / "mysqld"
    binary.parent.mkdir(parents=True)
    binary.write_text(FAKE.replace("VERSION", version))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    (root / "share" / "english").mkdir(parents=True)
    (root / "share" / "english" / "errmsg.sys").write_bytes(b"")
    (root / "share" / "charsets").mkdir()
    return root


def calls(base: Path) -> list[dict]:
    path = base / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_server_kind_is_read_from_the_binarys_version(tmp_path: Path):
    mysql = R.from_basedir("m", fake_basedir(tmp_path / "mysql", MYSQL))
    assert (mysql.server, mysql.format, mysql.version) == ("mysql", "mysql-8.0", MYSQL)
    assert mysql.share == tmp_path / "mysql" / "share"
    percona = R.from_basedir("p", fake_basedir(tmp_path / "percona", PERCONA))
    assert (percona.server, percona.format) == ("percona", "percona-8.0")
    assert calls(tmp_path / "mysql") == []  # --version only: nothing else was run


def test_a_mysql_build_is_initialised_and_started_with_mysqls_command_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The dataset of a MySQL build is its own (another format): mysqld --initialize-insecure,
    then mysqld --defaults-file with an option file in MySQL's dialect. The fake cannot serve,
    so that dataset fails and only the build's cells fail, with its words; `current` runs."""
    monkeypatch.setenv("PERFLAB_CACHE", str(tmp_path / "cache"))
    base = fake_basedir(tmp_path / "mysql-8.0.36", MYSQL)
    out = tmp_path / "out"
    done = perflab("run", str(write_experiment(tmp_path / "m.toml", SPEC.format(base=base))), "-o", str(out))
    assert done.returncode == 1, done.stdout + done.stderr  # one failed cell
    workdir = Path(meta(out, "workdir"))
    binary = str(base / "bin" / "mysqld")
    made = calls(base)
    assert len(made) == 2, done.stdout + done.stderr
    init, start = made  # nothing else: one initialisation, one start
    datadir = workdir / "snapshot-mysql-8.0"
    root = ["--user=root"] if os.geteuid() == 0 else []
    assert init == {
        "argv": [
            binary,
            "--no-defaults",
            "--initialize-insecure",
            f"--basedir={base}",
            f"--datadir={datadir}",
            f"--secure-file-priv={workdir}/snapshot-mysql-8.0-files",
            *root,
            f"--lc-messages-dir={base}/share",
        ],
        "option_file": None,
    }
    rundir = workdir / "prepare-snapshot-mysql-8.0"
    assert start["argv"] == [binary, f"--defaults-file={rundir}/my.cnf"]
    lines = start["option_file"].splitlines()
    assert lines == [
        "# written by perflab; the server reads no other option file",
        "[mysqld]",
        "skip-log-bin",
        "performance_schema=OFF",
        "innodb_buffer_pool_size=256M",
        f"innodb_redo_log_capacity={REDO}",  # MariaDB's innodb_log_file_size: the whole redo log (helpers.small_redo)
        "max_connections=2000",
        "max_prepared_stmt_count=1048576",
        "skip-name-resolve",
        f"datadir={datadir}",
        f"socket={rundir}/mysqld.sock",
        "skip-networking",  # sysbench connects by the socket: no TCP (issue 48)
        f"pid-file={rundir}/mysqld.pid",
        f"log-error={rundir}/error.log",
        f"tmpdir={rundir}/tmp",
        *(["user=mysql"] if root else []),  # never root (issue 48)
        f"lc-messages-dir={base}/share",
        f"character-sets-dir={base}/share/charsets",
        f"secure-file-priv={rundir}/files",
        f"basedir={base}",
        "mysqlx=0",  # no X Plugin listening on a second port
    ]

    doc = json.loads(perflab("export", str(out), "--format", "json").stdout)
    cells = {c["variant"]["server"]: c for c in doc["cells"]}
    assert cells["current"]["status"] == "ok"
    failed = cells["mysql80"]
    assert failed["status"] == "failed" and failed["build"] is None
    assert failed["error"].startswith("build 'mysql80' failed at dataset; log: ")
    assert f"{MYSQL} opens mysql-8.0 datadirs; its own dataset could not be prepared" in failed["error"]
    assert "mysqld exited with code 1 during start-up" in failed["error"]
    assert "fake mysqld (a perflab test fixture): not a MySQL server" in failed["error"]
    assert "not a MySQL server" in (out / "logs" / "prepare-mysql-8.0-error.log").read_text()
    datasets = doc["datasets"]
    assert datasets["mysql-8.0"]["own"] is True and datasets["mysql-8.0"]["dir"] is None
    assert datasets["mariadb-10.11"]["own"] is False and datasets["mariadb-10.11"]["builds"] == [None]
    assert "error" in doc["builds"]["mysql80"]
    assert not (out / "dataset").exists() and not list(out.glob("dataset-*"))  # complete: removed


def meta(out: Path, key: str) -> str:
    db = sqlite3.connect(out / "results.db")
    try:
        return json.loads(db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0])
    finally:
        db.close()


def test_server_mysql_runs_builds_only_each_format_on_its_own_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`server = "mysql"` (servers/mysql/): a variant without a build is refused before anything
    runs (Debian 12 has no MySQL, exit 2 with the hint); with a build in every variant there is no
    installed server's dataset, and the build's is its own, made by its mysqld (the fake's words
    fail its cells as above)."""
    monkeypatch.setenv("PERFLAB_CACHE", str(tmp_path / "cache"))
    base = fake_basedir(tmp_path / "mysql-8.0.36", MYSQL)
    spec = SPEC.format(base=base).replace('name = "it-mysql"', 'name = "it-mysql-kind"\nserver = "mysql"')
    refused = perflab("run", str(write_experiment(tmp_path / "bare.toml", spec)), "--check")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "variants.server.current.build" in refused.stderr and 'suite = "sid"' in refused.stderr
    out = tmp_path / "out"
    only = spec.replace("current = {}\n", "")
    done = perflab("run", str(write_experiment(tmp_path / "m.toml", only)), "-o", str(out))
    assert done.returncode == 1, done.stdout + done.stderr  # its one cell failed, at its dataset
    workdir = Path(meta(out, "workdir"))
    init, start = calls(base)
    assert "--initialize-insecure" in init["argv"] and f"--datadir={workdir}/snapshot-mysql-8.0" in init["argv"]
    assert start["option_file"].splitlines()[1] == "[mysqld]"
    doc = json.loads(perflab("export", str(out), "--format", "json").stdout)
    assert set(doc["datasets"]) == {"mysql-8.0"} and doc["datasets"]["mysql-8.0"]["own"] is True
    (cell,) = used(doc["cells"])
    assert cell["status"] == "failed" and "not a MySQL server" in cell["error"]
    assert doc["experiment"]["server"] == "mysql"
