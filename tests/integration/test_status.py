"""[observe] status on a real server: SHOW GLOBAL STATUS and INNODB_METRICS once a second over
the measured window, stored as series, exported per transaction; a server that refuses the
query fails its cell with the cause."""

from __future__ import annotations

import itertools
import json
import math
import sqlite3
from pathlib import Path

import pytest

from perflab.store.schema import SCHEMA_VERSION
from tests.conftest import perflab
from tests.freezes import Freezes
from tests.integration.helpers import used, write_experiment

DURATION = 5

STATUS = f"""
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-status"
duration = "{DURATION}s"
warmup = "2s"
repeats = 1

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_point_select"
threads = [2]

[variants.tmp]
default = {{}}
# the query cache answers the point selects: no handler calls, no Com_select
qc = {{ server_options = {{ query_cache_type = 1, query_cache_size = "4M" }} }}
# SHOW GLOBAL STATUS builds a small temporary table; the point selects need none
tiny = {{ server_options = {{ max_heap_table_size = "16K", tmp_table_size = "16K", tmp_disk_table_size = "16K" }} }}

[observe]
status = true
"""


@pytest.fixture(scope="module")
def status_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str, Freezes]:
    tmp = tmp_path_factory.mktemp("status")
    spec = write_experiment(tmp / "status.toml", STATUS)
    out = tmp / "results"
    with Freezes() as freezes:  # the sampler sleeps through a pause of this VM
        done = perflab("run", str(spec), "-o", str(out))
    assert done.returncode == 1, done.stdout + done.stderr  # one cell fails, by design
    exported = perflab("export", str(out), "--format", "json")
    assert exported.returncode == 0, exported.stderr
    return out, json.loads(exported.stdout), done.stdout + done.stderr, freezes


def test_counters_per_transaction_over_the_window(status_run):
    _, doc, _, _ = status_run
    (cell,) = [c for c in used(doc["cells"]) if c["variant"]["tmp"] == "default"]
    assert cell["status"] == "ok", cell["error"]
    per_txn = cell["status_per_txn"]
    # oltp_point_select: one primary-key lookup per transaction (the sampler's own few
    # statements a second are a rounding error against thousands of transactions)
    assert per_txn["Com_select"] == pytest.approx(1.0, abs=0.02)
    assert per_txn["Handler_read_key"] == pytest.approx(1.0, abs=0.05)
    assert per_txn["Created_tmp_disk_tables"] == 0
    assert per_txn["Rows_read"] == pytest.approx(1.0, abs=0.05)
    assert "INNODB_METRICS.buffer_pool_reads" in per_txn
    assert 1 <= cell["status_gauges"]["Threads_running"] <= 3  # the window's mean: 2 clients + the sampler
    assert "Threads_running" not in per_txn


def test_series_are_stored_once_a_second(status_run):
    out, doc, _, freezes = status_run
    (cell,) = [c for c in used(doc["cells"]) if c["variant"]["tmp"] == "default"]
    times = [s["t"] for s in cell["status_samples"]]
    # a pause of this VM: in the warm-up, the window starts that late while sysbench's clock ran on
    # (a shorter window); after sysbench's end, the last sample is that late; inside, the seconds
    # it took are not sampled
    lost = freezes.in_cell(cell)
    assert times[0] == 0.0 and DURATION - 0.5 - lost <= times[-1] <= DURATION + 1.5 + lost, (times, freezes.pauses)
    assert len(times) >= DURATION - math.ceil(lost) and all(b > a for a, b in itertools.pairwise(times)), times
    handler = [s["values"]["Handler_read_key"] for s in cell["status_samples"]]
    assert handler == sorted(handler) and handler[-1] > handler[0]  # a counter, growing
    db = sqlite3.connect(out / "results.db")
    query = "SELECT COUNT(DISTINCT t), COUNT(DISTINCT name) FROM status_samples WHERE cell_id = ?"
    rows = db.execute(query, (cell["id"],)).fetchone()
    assert rows[0] == len(times) and rows[1] > 300
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_a_server_that_refuses_the_query_fails_its_cell_with_the_cause(status_run):
    _, doc, output, _ = status_run
    (cell,) = [c for c in used(doc["cells"]) if c["variant"]["tmp"] == "tiny"]
    assert cell["status"] == "failed"
    assert "status sampling: SHOW GLOBAL STATUS failed: ERROR 1114" in cell["error"]
    assert "is full" in cell["error"]
    assert cell["status_per_txn"] is None and cell["status_samples"] == []
    assert "status sampling" in output


def test_the_report_tables_the_counters_that_differ_most(status_run):
    out, doc, _, _ = status_run
    (qc,) = [c for c in doc["cells"] if c["variant"]["tmp"] == "qc"]
    assert qc["status"] == "ok", qc["error"]
    assert qc["status_per_txn"]["Qcache_hits"] > 0.5  # the cache served most point selects
    assert qc["status_per_txn"]["Handler_read_key"] < 0.5
    done = perflab("report", str(out), "--format", "markdown")
    assert done.returncode == 0, done.stderr
    (base,) = [c for c in doc["cells"] if c["variant"]["tmp"] == "default"]
    if not (base["settled"] and qc["settled"]):  # a busy machine: the counters of settled repeats only, none here
        assert "## Server counters" not in done.stdout
        return
    section = done.stdout.split("## Server counters", 1)[1].split("\n## ", 1)[0]
    assert "**qc**, 2 threads" in section
    rows = {line.split("|")[1].strip(): line.split("|") for line in section.splitlines() if line.startswith("| ")}
    assert float(rows["Handler_read_key"][2]) == pytest.approx(1.0, abs=0.05)  # the baseline's
    assert float(rows["Handler_read_key"][3]) < 0.5
    assert rows["Handler_read_key"][4].strip().endswith("×")
    # the text and HTML reports table the same counters
    text = perflab("report", str(out))
    assert text.returncode == 0, text.stderr
    assert (
        "Server counters: qc at 2 threads" in text.stdout
        and "Handler_read_key" in text.stdout.split("Server counters")[1]
    )
    page = out / "status-report.html"
    html = perflab("report", str(out), "--html", "-o", str(page))
    assert html.returncode == 0, html.stderr
    section = page.read_text().split('<section id="server-counters">', 1)[1].split("</section>", 1)[0]
    assert "<h3>qc, 2 threads</h3>" in section and '<td class="l">Handler_read_key</td>' in section
