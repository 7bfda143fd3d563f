"""A host axis (`[variants.host]` whose labels set server_host, docs/hosts.md) on two real SSH hosts,
network namespaces with their own sshd (sshhosts.py): each host prepares its own dataset, every cell's
server runs on its label's host, each round runs as one block per host, the comparison across hosts
is a family of its own that waits for the A/A check on each host, and nothing is left on either."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.helpers import write_experiment
from tests.integration.sshhosts import SshLab, namespace_commands, perflab_via

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
    cells = sorted(doc["cells"], key=lambda c: c["id"])
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
