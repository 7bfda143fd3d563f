"""The workload client as a variant and as an observed process: client_preload, client_env and
client_library on a real sysbench, checked in its /proc/PID/maps, with its RSS, faults and
context switches per transaction in the export."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import perflab
from tests.integration.helpers import write_experiment

SYSTEM_LIBRARY = "/usr/lib/x86_64-linux-gnu/libmariadb.so.3"

CLIENT = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-client"
duration = "2s"
warmup = "1s"
repeats = 1

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_point_select"
threads = [2]

[variants.client]
glibc    = {{}}
jemalloc = {{ client_preload = "jemalloc", client_env = {{ MALLOC_CONF = "narenas:1" }} }}
copy     = {{ client_library = "{library}" }}
"""


@pytest.fixture(scope="module")
def client_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    tmp = tmp_path_factory.mktemp("client")
    library = tmp / "libmariadb-copy.so.3"  # another file, the same code: mapped under its own path
    shutil.copy(SYSTEM_LIBRARY, library)
    spec = write_experiment(tmp / "client.toml", CLIENT.format(library=library))
    out = tmp / "results"
    done = perflab("run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = perflab("export", str(out), "--format", "json")
    assert exported.returncode == 0, exported.stderr
    return out, json.loads(exported.stdout), str(library)


def test_client_variants_are_mapped_into_sysbench_and_recorded(client_run):
    _, doc, library = client_run
    cells = {c["variant"]["client"]: c for c in doc["cells"]}
    assert all(c["status"] == "ok" for c in cells.values()), [c["error"] for c in cells.values()]
    jemalloc = cells["jemalloc"]["client"]
    assert jemalloc["preload"] == "jemalloc" and "libjemalloc" in jemalloc["preload_library"]
    assert jemalloc["preload_version"].startswith("libjemalloc2 ")
    assert jemalloc["env"] == {"MALLOC_CONF": "narenas:1"}
    assert cells["glibc"]["client"]["preload"] is None
    assert cells["glibc"]["client"]["library_mapped"] == os.path.realpath(SYSTEM_LIBRARY)
    assert cells["glibc"]["client"]["library_version"].startswith("libmariadb3 ")
    assert cells["copy"]["client"]["library_mapped"] == library  # the variant's file, not the system's
    assert cells["copy"]["client"]["library_version"] is None  # no package owns it


def test_client_use_per_transaction_is_exported(client_run):
    _, doc, _ = client_run
    for cell in doc["cells"]:
        client = cell["client"]
        assert list(client)[:5] == ["preload", "library_mapped", "rss_end_bytes", "minor_faults_per_txn",
                                    "ctx_switches_per_txn"]  # fmt: skip
        assert 1 << 20 < client["rss_end_bytes"] < 1 << 30  # sysbench's resident set, not 0 nor the server's
        assert client["minor_faults_per_txn"] >= 0 and client["minor_faults"] >= 0
        # every point select is a round trip: sysbench's threads sleep on the socket each time
        assert client["ctx_switches_per_txn"] > 0.5
        assert client["cpu_us_per_txn"] > 0


def test_a_library_sysbench_cannot_load_is_refused_before_the_matrix(tmp_path: Path):
    spec = write_experiment(tmp_path / "bad.toml", CLIENT.format(library="/usr/lib/x86_64-linux-gnu/libz.so.1"))
    done = perflab("run", str(spec), "-o", str(tmp_path / "results"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "variants.client.copy.client_library" in done.stderr
    assert "libz.so.1" in done.stderr and "not found (required by sysbench)" in done.stderr
    assert not (tmp_path / "results" / "results.db").exists()
