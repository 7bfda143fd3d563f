"""A build and a glibc variant on a server host (docs/hosts.md, "Builds and glibc on the server host"),
the host being a network namespace with its own sshd (sshhosts.py): Debian sid's MariaDB (and
PostgreSQL 18) from its private root, and Debian 12's installed server with sid's C library, each
run there from copies of what it runs from (hosts/trees.py), beside the host's own server. Its
dataset of another format is prepared here by the build and copied; every cell records what ran
where and the C library it mapped there; nothing is left on the host. MariaDB's run is issue 47's
"done when": its three servers on host db take interleaved turns from their clients on host load."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.archive import major_minor, sid_version, upstream
from tests.integration.helpers import used, write_experiment
from tests.integration.sshhosts import SshLab, namespace_commands, perflab_via, wire

EXPERIMENT = """
[experiment]
name = "it-builds-server-host"
duration = "2s"
warmup = "1s"
repeats = 1
server_host = "db"
client_host = "load"
design = "interleaved"

[hosts.db]
ssh = "{ssh}"

[hosts.load]
ssh = "{load}"

[builds.m118]
package = "mariadb-server-core"
suite = "sid"

[dataset]
tables = 1
table_size = 2000

[workload]
test = "oltp_point_select"
threads = [2]

[variants.server]
installed = {{}}
m118 = {{ build = "m118" }}
libc = {{ glibc = "sid" }}
"""


def _run(lab: SshLab, shm: Path, tmp_path: Path, text: str) -> tuple[dict, dict, str]:
    """`text` run with its server on the lab's host db: (the export, its cells by server label, the
    host's run directory); every cell ok with transactions."""
    text = text.format(ssh=lab.hosts["db"].ssh, load=lab.hosts["load"].ssh)
    spec, out = write_experiment(tmp_path / "builds.toml", text), tmp_path / "results"
    done = perflab_via(lab, shm, "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(lab, tmp_path, "export", str(out), "--format", "json").stdout)
    cells = {c["variant"]["server"]: c for c in used(exported["cells"])}
    assert all(c["status"] == "ok" and c["summary"]["transactions"] > 0 for c in cells.values()), [
        c.get("error") for c in cells.values()
    ]
    return exported, cells, exported["hosts"]["hosts"]["db"]["dir"]


def test_a_sid_build_and_a_glibc_variant_run_on_the_server_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    """The servers on host db, their clients on host load (reaching db over a link of their own), all
    three taking turns: each cell records where its server and its client ran."""
    wire(ssh_lab, "load", "db")
    exported, cells, there = _run(ssh_lab, tmpfs("shm", "2G"), tmp_path, EXPERIMENT)  # there: the host's run dir
    system = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]  # the lab's host is this machine's twin
    sid = sid_version("mariadb-server-core")
    assert exported["experiment"]["design"] == "interleaved"
    assert sorted(c["design"]["turn"] for c in cells.values()) == [0, 1, 2]
    for cell in cells.values():
        assert cell["build"]["host"]["name"] == "db" and cell["resources"]["server_cpu_s"] > 0
        assert cell["client"]["host"] == "load" and cell["client"]["address"] == ssh_lab.hosts["db"].address
        assert cell["client"]["cpu_us_per_txn"] > 0 and cell["summary"]["latency_ms"]["p95"] > 0  # from load
    # Debian sid's server, run there from its root's copy, on a dataset of its format prepared here
    new = cells["m118"]["build"]
    assert new["version"].startswith(upstream(sid)) and new["binary"].startswith(f"{there}/tree-")
    assert new["root"]["dir"].startswith(f"{there}/tree-") and Path(new["binary"]).is_relative_to(new["root"]["dir"])
    assert Path(new["shipped_from"]).is_relative_to(Path.home()) or new["shipped_from"].startswith("/")
    assert new["libc"]["library"].startswith(new["root"]["dir"]) and new["libc"]["version"] != system
    assert "the build's own" in exported["datasets"][f"mariadb-{major_minor(sid)}"]["init"]  # made here
    assert exported["datasets"]["mariadb-10.11"]["init"] == "mariadb-install-db on host db"  # the host's
    # the host's own mariadbd with sid's C library, through the root copied there
    libc = cells["libc"]
    assert libc["build"]["binary"] == "/usr/sbin/mariadbd" and libc["build"]["glibc"] == "sid"
    assert libc["build"]["libc"]["library"].startswith(f"{there}/tree-")
    assert libc["allocator_library"] == libc["build"]["libc"]["library"]
    assert libc["allocator_version"] == f"glibc {libc['build']['root']['glibc_version']}" != f"glibc {system}"
    installed = cells["installed"]["build"]
    assert installed["binary"] == "/usr/sbin/mariadbd" and installed["libc"]["version"] == system
    assert "root" not in installed and installed["libc"]["library"].startswith("/usr/lib/")
    assert namespace_commands(ssh_lab, "db") == ["sshd"] and not Path(there).exists()  # nothing left there
    assert namespace_commands(ssh_lab, "load") == ["sshd"]


PG = """
[experiment]
name = "it-pg-builds-server-host"
server = "postgresql"
duration = "2s"
warmup = "1s"
repeats = 1
server_host = "db"

[hosts.db]
ssh = "{ssh}"

[builds.pg18]
package = "postgresql-18"
suite = "sid"

[dataset]
scale = 1

[workload]
tool = "pgbench"
test = "select-only"
threads = [2]

[variants.server]
pg15 = {{}}
pg18 = {{ build = "pg18" }}
libc = {{ glibc = "sid" }}
"""


def test_postgresql_18_and_a_glibc_variant_run_on_the_server_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    shm = tmpfs("shm", "2G")
    shm.parent.chmod(0o755)  # the postgres user must reach its directories
    exported, cells, there = _run(ssh_lab, shm, tmp_path, PG)
    new, libc, old = cells["pg18"]["build"], cells["libc"]["build"], cells["pg15"]["build"]
    assert new["version"].startswith(f"postgres (PostgreSQL) {upstream(sid_version('postgresql-18'))}")
    assert new["binary"].startswith(f"{there}/tree-") and new["libc"]["library"].startswith(new["root"]["dir"])
    datasets = exported["datasets"]  # 18's made here by its own initdb, 15's on the host
    assert "postgresql-18" in datasets and datasets["postgresql-15"]["init"] == "initdb on host db"
    assert libc["binary"] == old["binary"] == "/usr/lib/postgresql/15/bin/postgres" and libc["glibc"] == "sid"
    assert libc["libc"]["library"].startswith(f"{there}/tree-") and libc["libc"]["version"] != old["libc"]["version"]
    ran = {k: (c["build"]["host"]["name"], c["resources"]["server_cpu_s"], c["summary"]["transactions"]) for k, c in cells.items()}
    assert all(host == "db" and cpu > 0 for host, cpu, _ in ran.values()), ran  # ci20: failed once, beside 4 workers
    assert namespace_commands(ssh_lab, "db") == ["sshd"] and not Path(there).exists()


MYSQL = """
[experiment]
name = "it-mysql-server-host"
server = "mysql"
duration = "2s"
warmup = "1s"
repeats = 1
server_host = "db"

[hosts.db]
ssh = "{ssh}"

[builds.mysql97]
package = "mysql-server-core"
suite = "sid"

[dataset]
tables = 1
table_size = 2000

[workload]
test = "oltp_read_only"
threads = [2]

[variants.server]
mysql = {{ build = "mysql97" }}

[observe]
status = true
alloc = {{ stacks = false }}
"""


def test_mysql_97_from_sid_runs_on_the_server_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    """`server = "mysql"` with its server on host db: sid's mysqld from its root's copy there, on a
    datadir it initialised here (copied over), in its own dialect; sysbench here and the status
    reader log in over TCP as the run's caching_sha2_password user (no TLS: libmariadb3 completes
    it), its own tcmalloc proven there, and the counter counts there."""
    shm = tmpfs("shm", "2G")
    spec = write_experiment(tmp_path / "mysql.toml", MYSQL.format(ssh=ssh_lab.hosts["db"].ssh))
    out = tmp_path / "results"
    done = perflab_via(ssh_lab, shm, "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    (cell,) = used(exported["cells"])
    assert cell["status"] == "ok" and cell["summary"]["transactions"] > 0, cell.get("error")
    there, sid = exported["hosts"]["hosts"]["db"]["dir"], sid_version("mysql-server-core")
    build = cell["build"]
    assert build["host"]["name"] == "db" and build["version"].startswith(upstream(sid)), build
    assert build["binary"].startswith(f"{there}/tree-") and build["binary"].endswith("/mysqld"), build["binary"]
    (dataset,) = exported["datasets"].values()
    assert dataset["init"] == "mysqld --initialize-insecure" and dataset["builds"] == ["mysql97"], dataset
    assert cell["resources"]["server_cpu_s"] > 0 and cell["resources"]["rss_end_bytes"] > 50 << 20
    # its own allocator there: the tcmalloc sid's mysqld links, from the root's copy (as here)
    assert "tcmalloc" in cell["allocator_version"] and "linked by mysqld" in cell["allocator_version"], cell
    assert cell["allocator_library"].startswith(build["root"]["dir"]), cell["allocator_library"]
    # oltp_read_only: 10 point selects and 4 range selects a transaction, counted by mysqld there
    assert 13.5 <= cell["status_per_txn"]["Com_select"] <= 14.5, cell["status_per_txn"]["Com_select"]
    option_file = (out / "logs" / f"cell-{cell['id']:04d}" / "my.cnf").read_text()  # in MySQL's dialect
    assert "[mysqld]" in option_file and "innodb_redo_log_capacity" in option_file and "mysqlx=0" in option_file
    assert f"basedir={there}/tree-" in option_file, option_file
    assert cell["alloc"]["calls_per_txn"]["malloc"] > 10 and cell["alloc"]["calls_per_txn"]["new"] > 1, cell["alloc"]
    assert namespace_commands(ssh_lab, "db") == ["sshd"] and not Path(there).exists()
