"""A real MySQL 9.7 from Debian sid beside Debian 12's MariaDB (issue 34): `[builds] package =
"mysql-server-core", suite = "sid"` makes a private root (builds/debroot.py), and the cell's
mysqld is initialised, started, proved and measured through the root's own loader, with the
installed MariaDB as the other variant. MySQL is the baseline, as the file's first label."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import perflab
from tests.integration.helpers import write_experiment

EXPERIMENT = """
[experiment]
name = "it-mysql-sid"
design = "sequential"  # one server at a time: each cell's own figures are checked
warmup = "1s"
duration = "3s"
repeats = 1

[dataset]
tables = 1
table_size = 2000

[workload]
test = "oltp_point_select"
threads = [2]

[builds.mysql97]
package = "mysql-server-core"
suite = "sid"

[variants.server]
mysql = { build = "mysql97" }
mariadb = {}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    tmp = tmp_path_factory.mktemp("mysql-sid")
    spec = write_experiment(tmp / "m.toml", EXPERIMENT)
    check = perflab("run", str(spec), "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    done = perflab("run", str(spec), "-o", str(tmp / "results"))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = perflab("export", str(tmp / "results"))
    assert exported.returncode == 0, exported.stderr
    return tmp / "results", json.loads(exported.stdout), check.stdout


def _cell(doc: dict, label: str) -> dict:
    (cell,) = [c for c in doc["cells"] if c["variant"] == {"server": label}]
    return cell


def test_the_check_says_where_the_build_comes_from(run):
    _, _, check = run
    assert "mysql-server-core from sid, in a private root" in check


def test_mysql_runs_from_its_private_root_and_is_measured(run):
    _, doc, _ = run
    mysql, mariadb = _cell(doc, "mysql"), _cell(doc, "mariadb")
    assert mysql["status"] == "ok" and mariadb["status"] == "ok", (mysql["error"], mariadb["error"])
    build = mysql["build"]
    assert build["version"].startswith("9.7.") and Path(build["binary"]).name == "mysqld"
    root = build["root"]
    assert root["suite"] == "sid" and Path(build["binary"]).is_relative_to(root["dir"])
    assert tuple(int(x) for x in root["glibc_version"].split(".")[:2]) >= (2, 38)  # newer than Debian 12's 2.36
    assert mysql["summary"]["qps"] > 0 and mysql["summary"]["transactions"] > 0
    assert mariadb["build"]["version"].startswith("10.11")
    # the server's allocator: the tcmalloc sid's mysqld links itself, from the root, not the system's
    assert "linked by mysqld" in mysql["allocator_version"] and "tcmalloc" in mysql["allocator_version"]
    assert mysql["allocator_library"].startswith(root["dir"])


def test_each_kind_has_its_own_dataset_and_mysql_is_the_baseline(run):
    _, doc, _ = run
    datasets = doc["datasets"]
    assert {"mysql-9.7", "mariadb-10.11"} <= set(datasets), datasets
    assert "initialize-insecure" in datasets["mysql-9.7"]["init"]
    (qps,) = [c for c in doc["comparisons"] if c["metric"] == "qps"]
    assert qps["baseline"] == {"server": "mysql"} and qps["variant"] == {"server": "mariadb"}
    settled = all(c["settled"] for c in doc["cells"] if c["status"] == "ok")
    # one repeat each: a cell that did not settle (a busy machine) leaves no ratio, and says why
    assert (qps["ratio"] or 0) > 0 or (not settled and qps["reason"]), qps


def test_mysqls_option_file_is_in_its_dialect(run):
    out, doc, _ = run
    cell = _cell(doc, "mysql")
    text = (out / "logs" / f"cell-{cell['id']:04d}" / "my.cnf").read_text()
    assert "[mysqld]" in text and "innodb_redo_log_capacity" in text and "mysqlx" in text
