"""design = "interleaved" on real servers, what goes wrong: a variant that fails leaves the others
of its round running; an interrupt stops every server and every stopped client. (They check what
perflab does, not turn timings: unlike test_interleave_real.py, this module runs beside others.)"""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, perflab
from tests.integration.helpers import perflab_children, write_experiment
from tests.integration.test_interleave_real import INTERLEAVED, export


def test_a_variant_that_fails_leaves_the_others_of_its_round_running(tmp_path: Path):
    extra = 'bad = { server_options = { sort_buffer_size = "1Q" } }\n'  # a value mariadbd refuses at start
    # without [observe] status: the turns read 8 counters (status.LEAN_QUERY), two statements a sample
    body = INTERLEAVED.format(extra=extra).replace("repeats = 2", "repeats = 1")
    body = body.replace("status = true", "status = false")
    done = perflab("run", str(write_experiment(tmp_path / "bad.toml", body)), "-o", str(tmp_path / "out"))
    assert done.returncode == 1 and "1 of 3 cells failed" in done.stdout + done.stderr, done.stdout + done.stderr
    cells = {c["variant"]["alloc"]: c for c in export(tmp_path / "out")["cells"]}
    assert cells["bad"]["status"] == "failed" and "sort_buffer_size" in cells["bad"]["error"]
    assert cells["glibc"]["status"] == cells["jemalloc"]["status"] == "ok"
    for ok in (cells["glibc"], cells["jemalloc"]):
        # the sampler's own statements left out (two a sample: without that, ~+0.05 here); a transaction
        # in flight at each end of the window counts its commit on one side and some of its statements
        # on the other: up to 15 statements per client thread at each end
        edge = 2 * 15 * ok["threads"] / ok["summary"]["transactions"]
        assert ok["summary"]["queries"] / ok["summary"]["transactions"] == pytest.approx(16, abs=0.005 + edge), (
            ok["summary"]["queries"], ok["summary"]["transactions"], ok["threads"])
        assert ok["status_per_txn"] is None
    assert sorted(cells["glibc"]["design"]["group"]) == sorted(c["id"] for c in cells.values())


def test_an_interrupt_stops_every_server_and_stopped_client(tmp_path: Path):
    body = INTERLEAVED.format(extra="").replace('duration = "3s"', 'duration = "60s"')
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perflab", "run", str(write_experiment(tmp_path / "long.toml", body)), "-o", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline, workdir, children = time.monotonic() + 120, None, []
    while time.monotonic() < deadline and len(children) < 4:  # two servers, two clients
        time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        if workdir is None and (out / "results.db").exists():
            got = perflab("export", str(out))
            workdir = json.loads(got.stdout)["run"]["workdir"] if got.returncode == 0 else None
        children = perflab_children(workdir) if workdir else []
    assert len(children) == 4, children
    time.sleep(1.5)  # into the turns: one of the clients is stopped
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 130, stdout + stderr
    deadline = time.monotonic() + 10
    while perflab_children(workdir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert perflab_children(workdir) == []
    assert export(out)["run"]["status"] == "interrupted"


@pytest.mark.parametrize("status", [False, True])
def test_the_seconds_reads_are_the_clients_own(tmp_path: Path, status: bool):
    """oltp_point_select makes one SELECT a transaction and nothing else: every second's reads are its
    queries, whichever sampler read the server's counters (the lean one: one SELECT of its own a
    sample; [observe] status: two). They were qps + 1 while the sampler's SELECT was counted."""
    body = INTERLEAVED.format(extra="").replace("repeats = 2", "repeats = 1")
    body = body.replace("oltp_read_only", "oltp_point_select")
    body = body.replace("status = true", f"status = {str(status).lower()}")
    done = perflab("run", str(write_experiment(tmp_path / "reads.toml", body)), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    seconds = perflab("export", str(tmp_path / "out"), "--format", "seconds-csv")
    assert seconds.returncode == 0, seconds.stderr
    rows = list(csv.DictReader(io.StringIO(seconds.stdout)))
    assert len(rows) >= 8 and all(float(r["qps"]) > 0 for r in rows)  # 2 cells x 5 seconds
    for r in rows:
        assert float(r["reads"]) == pytest.approx(float(r["qps"]), abs=0.02), r
        assert float(r["other"]) == pytest.approx(0, abs=0.02) and float(r["writes"]) == 0, r
