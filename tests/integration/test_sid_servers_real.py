"""Debian sid's MariaDB 11.8 and PostgreSQL 18 beside Debian 12's own servers, and glibc as an
axis (issue 34 items 3 and 4), each on the real binaries through a private root's loader:

- `[builds] package = "mariadb-server-core", suite = "sid"`: its own mariadb-install-db runs the
  root's mariadbd through a wrapper (the script runs one path), its own dataset (mariadb-11.8);
- `package = "postgresql-18", suite = "sid"`: postgres, initdb and psql through wrappers
  (servers/postgresql/rooted.py), the root copied where the postgres user can reach it;
- `[variants.libc] sid = { glibc = "sid" }`: Debian 12's own mariadbd with sid's C library, a
  preloaded jemalloc still mapped, and the C library each cell actually mapped recorded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.archive import major_minor, sid_version, upstream
from tests.conftest import perflab
from tests.integration.helpers import used, write_experiment

COMMON = """
[experiment]
name = "{name}"
design = "sequential"  # each cell's own figures are checked
{server}
warmup = "1s"
duration = "3s"
repeats = 1

[dataset]
tables = 1
table_size = 2000

[workload]
test = "oltp_point_select"
threads = [2]
"""

SID_MARIADB = """
[builds.m118]
package = "mariadb-server-core"
suite = "sid"

[variants.server]
m118 = { build = "m118" }
mariadb = {}
"""

SID_POSTGRESQL = """
[builds.pg18]
package = "postgresql-18"
suite = "sid"

[variants.server]
pg18 = { build = "pg18" }
pg15 = {}
"""

LIBC = """
[variants.libc]
bookworm = {}
sid = { glibc = "sid" }

[variants.allocator]
glibc = {}
jemalloc = { preload = "jemalloc" }
"""


def _run(tmp: Path, name: str, server: str, rest: str) -> dict:
    spec = write_experiment(tmp / f"{name}.toml", COMMON.format(name=name, server=server) + rest)
    done = perflab("run", str(spec), "-o", str(tmp / name))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = perflab("export", str(tmp / name))
    assert exported.returncode == 0, exported.stderr
    return json.loads(exported.stdout)


def _cell(doc: dict, **variant: str) -> dict:
    (cell,) = [c for c in used(doc["cells"]) if c["variant"] == variant]
    assert cell["status"] == "ok", cell["error"]
    return cell


def _major_minor(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split(".")[:2])


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sid-servers")


def test_mariadb_from_sid_runs_beside_debian_12s(tmp):
    doc = _run(tmp, "m118", "", SID_MARIADB)
    new, old = _cell(doc, server="m118"), _cell(doc, server="mariadb")
    sid = sid_version("mariadb-server-core")  # what sid serves now: 1:11.8.9+ds-4 on 2026-11-28
    assert new["build"]["version"].startswith(upstream(sid)) and old["build"]["version"].startswith("10.11.")
    root = new["build"]["root"]
    assert root["suite"] == "sid" and Path(new["build"]["binary"]).is_relative_to(root["dir"])
    assert {f"mariadb-{major_minor(sid)}", "mariadb-10.11"} <= set(doc["datasets"])
    assert "the build's own" in doc["datasets"][f"mariadb-{major_minor(sid)}"]["init"]  # its own install script
    assert new["summary"]["transactions"] > 0 and old["summary"]["transactions"] > 0
    # the C library each server mapped: sid's from the root, the system's for Debian 12's
    assert (
        new["build"]["libc"]["library"].startswith(root["dir"])
        and new["build"]["libc"]["version"] == root["glibc_version"]
    )
    assert (
        new["build"]["libc"]["version"]
        != old["build"]["libc"]["version"]
        == os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    )


def test_postgresql_18_from_sid_runs_beside_debian_12s(tmp):
    doc = _run(tmp, "pg18", 'server = "postgresql"', SID_POSTGRESQL)
    new, old = _cell(doc, server="pg18"), _cell(doc, server="pg15")
    assert new["build"]["version"].startswith(f"postgres (PostgreSQL) {upstream(sid_version('postgresql-18'))}")
    assert old["build"]["version"].startswith("postgres (PostgreSQL) 15.")
    assert {"postgresql-18", "postgresql-15"} <= set(doc["datasets"])  # initdb 18 made its own
    assert new["summary"]["transactions"] > 0 and old["summary"]["transactions"] > 0
    assert _major_minor(new["build"]["libc"]["version"]) >= (2, 38) > _major_minor(old["build"]["libc"]["version"])
    # the backends the client used ran postgres 18: the server's own answer, through psql's wrapper
    assert new["resources"]["preload_verified_backends"] >= 2


def test_glibc_is_an_axis_of_the_same_binary(tmp):
    doc = _run(tmp, "libc", "", LIBC)
    system = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    cells = {(c["variant"]["libc"], c["variant"]["allocator"]): c for c in doc["cells"]}
    assert all(c["status"] == "ok" for c in cells.values()), [c["error"] for c in cells.values()]
    binaries = {c["build"]["binary"] for c in cells.values()}
    assert binaries == {"/usr/sbin/mariadbd"}  # one binary, two C libraries
    for allocator in ("glibc", "jemalloc"):
        sid, bookworm = cells["sid", allocator], cells["bookworm", allocator]
        assert bookworm["build"]["libc"]["version"] == system and "root" not in bookworm["build"]
        assert sid["build"]["glibc"] == "sid" and sid["build"]["libc"]["library"].startswith(
            sid["build"]["root"]["dir"]
        )
        assert _major_minor(sid["build"]["libc"]["version"]) > _major_minor(system)
    # a preloaded allocator keeps working under sid's C library, and glibc malloc is sid's own
    assert cells["sid", "jemalloc"]["allocator_library"].endswith("libjemalloc.so.2")
    sid_malloc = cells["sid", "glibc"]
    assert sid_malloc["allocator_version"].startswith(f"glibc {sid_malloc['build']['libc']['version']}")
    assert len(doc["datasets"]) == 1  # the same binary opens the same datadirs


def test_postgresql_15_with_sids_c_library(tmp):
    """glibc on PostgreSQL: Debian 12's postgres and its backends through sid's loader (its
    programs' wrappers, servers/postgresql/rooted.py), the C library they map sid's."""
    doc = _run(tmp, "pglibc", 'server = "postgresql"', '[variants.libc]\nbookworm = {}\nsid = { glibc = "sid" }\n')
    system = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    own, sid = _cell(doc, libc="bookworm"), _cell(doc, libc="sid")
    assert own["build"]["binary"] == sid["build"]["binary"] and own["build"]["libc"]["version"] == system
    assert _major_minor(sid["build"]["libc"]["version"]) > _major_minor(system)
    assert sid["summary"]["transactions"] > 0 and sid["resources"]["preload_verified_backends"] >= 2
