"""A host axis (`[variants.host]` whose labels set server_host, docs/hosts.md) on two real SSH hosts,
network namespaces with their own sshd (sshhosts.py): each host prepares its own dataset, every cell's
server runs on its label's host, each round runs as one block per host, the comparison across hosts
is a family of its own that waits for the A/A check on each host, and nothing is left on either."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from tests.integration.helpers import used, write_experiment
from tests.integration.sshhosts import ROOT, SshLab, namespace_commands, perflab_via, ssh_hosts, wire

EXPERIMENT = """
[experiment]
name = "it-host-axis"
duration = "2s"
warmup = "1s"
repeats = 1  # the blocks and the A/A gate show in one round; the statistics are unit-tested

[hosts.db]
ssh = "{db}"
[hosts.load]
ssh = "{load}"

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_point_select"
threads = [2]

[variants.host]
a = {{ server_host = "db" }}
b = {{ server_host = "load" }}

[variants.log]
OFF = {{}}
ON = {{ server_options = {{ general_log = "ON" }} }}
"""


def test_a_host_axis_runs_each_hosts_block_on_its_own_dataset(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    hosts = {"db": ssh_lab.hosts["db"], "load": ssh_lab.hosts["load"]}
    body = EXPERIMENT.format(db=hosts["db"].ssh, load=hosts["load"].ssh)
    out = tmp_path / "results"
    done = perflab_via(
        ssh_lab, tmpfs("shm", "1G"), "run", str(write_experiment(tmp_path / "h.toml", body)), "-o", str(out)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    cells = used(sorted(doc["cells"], key=lambda c: c["id"]))  # a retry stands in for an unsettled cell
    assert len(cells) == 4 and all(c["status"] == "ok" for c in cells), [c.get("error") for c in cells]
    label_host = {"a": "db", "b": "load"}
    for cell in cells:  # each server on its label's host, at that host's address
        host = cell["build"]["host"]
        assert host["name"] == label_host[cell["variant"]["host"]] and host["address"] == hosts[host["name"]].address
        assert cell["client"]["address"] == host["address"]
    order = [c["build"]["host"]["name"] for c in cells]  # a round is one block per host
    assert order in (["db", "db", "load", "load"], ["load", "load", "db", "db"]), order
    assert {h: r["mariadb-10.11"]["init"] for h, r in doc["host_datasets"].items()} == {
        "db": "mariadb-install-db on host db",
        "load": "mariadb-install-db on host load",
    }
    rows = {
        (c["axis"], c["variant"]["host"], c["variant"]["log"]): c for c in doc["comparisons"] if c["metric"] == "qps"
    }
    across = rows[("host", "b", "OFF")]  # host b against host a, general_log off on both
    assert across["across_hosts"] and across["verdict"] == "inconclusive"
    assert "A/A check on host" in across["aa_check"] and "1 settled round(s)" in across["aa_check"]
    within = rows[("log", "a", "ON")]  # general_log's own effect on host db: no A/A gate (one round: no interval)
    assert not within["across_hosts"] and within["aa_check"] is None
    for name in hosts:  # nothing the run started is left on either host
        assert namespace_commands(ssh_lab, name) == ["sshd"]
    report = perflab_via(ssh_lab, tmp_path, "report", str(out))
    assert report.returncode == 0 and "server on host db" in report.stdout and "server on host load" in report.stdout


LANES = """
[experiment]
name = "it-host-lanes"
duration = "2s"
warmup = "1s"
repeats = 1

[hosts.db]
ssh = "{db}"
[hosts.db2]
ssh = "{db2}"
[hosts.l1]
ssh = "{l1}"
[hosts.l2]
ssh = "{l2}"

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_point_select"
threads = [1]

[variants.host]
a = {{ server_host = "db", client_host = "l1" }}
b = {{ server_host = "db2", client_host = "l2" }}
"""


def test_independent_hosts_of_an_axis_run_at_once_each_with_its_own_client_host(tmpfs, tmp_path: Path) -> None:
    """Two server hosts, each with a client host of its own: their rounds run at once (their windows
    overlap), each client drives its own host's server; SIGTERM in the second round stores no cell in
    flight (none as failed) and leaves nothing on any of the four hosts; --resume completes the run."""
    import datetime as dt
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    names = ["db", "db2", "l1", "l2"]
    with ssh_hosts(tmp_path / "lab", names) as lab:
        wire(lab, "l1", "db")  # each client host reaches its own server host only
        wire(lab, "l2", "db2")
        body = LANES.format(**{name: lab.hosts[name].ssh for name in names}).replace("repeats = 1", "repeats = 2")
        out, shm = tmp_path / "results", tmpfs("shm", "1G")
        env = {**lab.env(), "PERFLAB_TMPFS": str(shm)}
        argv = [
            sys.executable,
            "-m",
            "perflab",
            "run",
            str(write_experiment(tmp_path / "l.toml", body)),
            "-o",
            str(out),
        ]
        run = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stored: list = []
        deadline = time.monotonic() + 240
        while len(stored) < 2 and run.poll() is None and time.monotonic() < deadline:  # the first round stored
            time.sleep(0.3)
            if (out / "results.db").exists():
                with contextlib.closing(sqlite3.connect(out / "results.db")) as db, contextlib.suppress(sqlite3.Error):
                    stored = db.execute("SELECT status FROM cells").fetchall()
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=120)
        assert run.returncode == 130, err
        with contextlib.closing(sqlite3.connect(out / "results.db")) as db:
            kept = [s for (s,) in db.execute("SELECT status FROM cells")]
        assert len(kept) >= 2 and set(kept) == {"ok"}, (kept, err)  # the cells in flight: not stored as failed
        for name in names:
            assert namespace_commands(lab, name) == ["sshd"]
        done = perflab_via(lab, shm, "run", "--resume", str(out))
        assert done.returncode == 0, done.stdout + done.stderr
        doc = json.loads(perflab_via(lab, tmp_path, "export", str(out), "--format", "json").stdout)
        cells = used(sorted(doc["cells"], key=lambda c: c["id"]))  # a retry stands in for an unsettled cell
        assert len(cells) == 4 and all(c["status"] == "ok" for c in cells), [c.get("error") for c in cells]
        for cell in cells:  # each client on its label's client host, against its own server's address
            pair = {"a": ("db", "l1"), "b": ("db2", "l2")}[cell["variant"]["host"]]
            assert (cell["build"]["host"]["name"], cell["client"]["host"]) == pair
            assert cell["client"]["address"] == lab.hosts[pair[0]].address
        schedule = doc["host_schedule"]
        assert schedule["concurrent"] is True and schedule["lanes"] == {"db": ["db", "l1"], "db2": ["db2", "l2"]}
        for repeat in (1, 2):  # one at a time, the second starts when (or after) the first ends: at once, they overlap
            spans = [
                (dt.datetime.fromisoformat(c["started_at"]), dt.datetime.fromisoformat(c["ended_at"]))
                for c in cells
                if c["repeat"] == repeat
            ]
            assert max(s for s, _ in spans) < min(e for _, e in spans), spans
        for name in names:
            assert namespace_commands(lab, name) == ["sshd"]
        report = perflab_via(lab, tmp_path, "report", str(out)).stdout
        assert "hosts db, db2 ran each round at once" in report and "client on host l2" in report
