"""`aslr = false` and `prewarm = true` on the real servers: the running server's personality
says no randomization, the prewarm read every row of every index before the workload, and a
cell without either runs as before; PostgreSQL takes both switches through setpriv and
pg_prewarm. Whether they make a measurement steadier: bench/archive/variance_options.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import perflab
from tests.integration.helpers import pgbench_experiment, write_experiment

MARIADB = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-switches"
warmup = "1s"
duration = "3s"
repeats = 1

[dataset]
tables = 2
table_size = 5000

[workload]
test = "oltp_point_select"
threads = [2]

[variants.layout]
plain = {}
fixed = { aslr = false, prewarm = true }

[observe]
status = true
"""

POSTGRESQL = pgbench_experiment("it-switches-pg", duration="2s", experiment="aslr = false\nprewarm = true\n")


def run(tmp: Path, body: str) -> dict[str, dict]:
    out = tmp / "results"
    done = perflab("run", str(write_experiment(tmp / "exp.toml", body)), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab("export", str(out)).stdout)
    return {"/".join(cell["variant"].values()) or "-": cell for cell in exported["cells"]}


@pytest.fixture(scope="module")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    return run(tmp_path_factory.mktemp("switches"), MARIADB)


def test_aslr_off_is_what_the_server_runs_with(mariadb: dict[str, dict]) -> None:
    assert mariadb["plain"]["resources"]["aslr"] is True
    assert mariadb["fixed"]["resources"]["aslr"] is False


def test_the_prewarm_reads_every_page_before_the_window(mariadb: dict[str, dict]) -> None:
    assert mariadb["plain"]["resources"]["prewarm_s"] is None
    fixed = mariadb["fixed"]
    assert fixed["resources"]["prewarm_s"] > 0
    assert fixed["server_options"] == mariadb["plain"]["server_options"] and fixed["status"] == "ok"  # no prewarm option
    # the counters at the window's start: the prewarm walked every row of both indexes (the
    # primary key and k_N) of both tables; point selects alone walk none (they look rows up)
    at_start = {name: cell["status_samples"][0]["values"] for name, cell in mariadb.items()}
    assert at_start["fixed"]["Handler_read_next"] >= 2 * 2 * 5000, at_start["fixed"]
    assert at_start["plain"]["Handler_read_next"] < 100, at_start["plain"]


def test_postgresql_takes_both_switches(tmp_path: Path) -> None:
    (cell,) = run(tmp_path, POSTGRESQL).values()
    assert cell["status"] == "ok", cell["error"]
    assert cell["resources"]["aslr"] is False
    assert cell["resources"]["prewarm_s"] > 0
