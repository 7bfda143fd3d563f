"""tool = "go-tpc" with a PostgreSQL server on another host, and with its client on one (docs/hosts.md,
"go-tpc on hosts"), the hosts being network namespaces with their own sshd (sshhosts.py): the real
go-tpc v1.0.12 and PostgreSQL 15. The run's role logs in over TCP with the run's password, which
lib/pq reads from PGPASSFILE (a file only its owner reads), never from a command line; the dataset
is `go-tpc tpcc prepare` run here against the server host. On a client host go-tpc's output is
streamed back and stamped on arrival, as a local go-tpc's is. Every cell has NOPM per second and
its transaction types; nothing is left on the hosts."""

from __future__ import annotations

import json
import re
from pathlib import Path

from perflab.workloads import gotpc
from tests.integration.helpers import used, write_experiment
from tests.integration.sshhosts import SshLab, namespace_commands, perflab_via, wire

WARMUP, DURATION = 1, 3

EXPERIMENT = """
[experiment]
name = "it-tpcc-hosts"
server = "postgresql"
duration = "{duration}s"
warmup = "{warmup}s"
repeats = 1
{placement}

{hosts}
[workload]
tool = "go-tpc"
test = "tpcc"
warehouses = 1
threads = [2]

[variants.sb]
"64MB" = {{ server_options = {{ shared_buffers = "64MB" }} }}
"""


def _run(
    ssh_lab: SshLab, tmpfs, tmp_path: Path, placement: str, *hosts: str, body: str = EXPERIMENT, cells: int = 1
) -> tuple[Path, dict, list[dict]]:
    tables = "".join(f'[hosts.{name}]\nssh = "{ssh_lab.hosts[name].ssh}"\n' for name in hosts)
    body = body.format(duration=DURATION, warmup=WARMUP, placement=placement, hosts=tables)
    spec, out, shm = write_experiment(tmp_path / "tpcc.toml", body), tmp_path / "results", tmpfs("shm", "2G")
    shm.parent.chmod(0o755)  # the postgres account reaches its directories
    done = perflab_via(ssh_lab, shm, "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    ran = used(exported["cells"])
    assert len(ran) == cells and all(c["status"] == "ok" for c in ran), [c.get("error") for c in ran]
    return out, exported, ran


def _assert_nopm_every_second(out: Path, exported: dict, cell: dict) -> list[str]:
    """NOPM per second over the window and each transaction type; go-tpc's stamped output, with no password in it."""
    assert exported["run"]["throughput"]["metric"] == "NOPM"
    steady = [iv for iv in cell["intervals"] if not iv["warmup"]]
    assert DURATION - 1 <= len(steady) <= DURATION and sum(iv["qps"] > 0 for iv in steady) >= len(steady) - 1
    types = cell["summary"]["transaction_types"]
    assert set(types) == set(gotpc.TYPES) and types["NEW_ORDER"]["count"] > 0 and types["PAYMENT"]["count"] > 0
    assert types["NEW_ORDER"]["per_minute"] == cell["summary"]["qps"] > 0
    lines = (out / "logs" / f"cell-{cell['id']:04d}" / "go-tpc.txt").read_text().splitlines()
    assert any(re.match(r"\s*\d+\.\d{3} \| \[Current\] NEW_ORDER", line) for line in lines), lines[:5]
    options = cell["sysbench_options"]  # what go-tpc ran with: the run's role, no password
    assert options["driver"] == "postgres" and "password" not in options, options
    # the run's password (32 hex digits) appears nowhere: not in go-tpc's argv, output or the row
    assert not re.search(r"\b[0-9a-f]{32}\b", "\n".join(lines) + json.dumps(cell)), "a password was recorded"
    return lines


def test_go_tpc_on_a_client_host_against_postgresql_here(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    load = ssh_lab.hosts["load"]
    out, exported, (cell,) = _run(ssh_lab, tmpfs, tmp_path, 'client_host = "load"', "load")
    _assert_nopm_every_second(out, exported, cell)
    local_address = load.address.rsplit(".", 1)[0] + ".1"  # this machine's end of the host's link
    client = cell["client"]
    assert client["host"] == "load" and client["address"] == local_address, client
    assert client["version"] == f"go-tpc {gotpc.VERSION} (go install)", client  # read from the binary there
    assert client["cpu_s"] > 0 and 100 < client["bytes_per_txn"] < 200_000, client  # go-tpc's CPU, there
    conf = (out / "logs" / "cell-0000" / "postgresql.conf").read_text()
    assert f"listen_addresses = '{local_address}'" in conf, conf  # reached over the link only
    host_dir = exported["hosts"]["hosts"]["load"]["dir"]
    assert namespace_commands(ssh_lab, "load") == ["sshd"] and not Path(host_dir).exists()


def test_go_tpc_here_and_on_a_client_host_against_a_postgresql_server_host(
    ssh_lab: SshLab, tmpfs, tmp_path: Path
) -> None:
    """One dataset on the server host (`go-tpc tpcc prepare` here against it), two cells of a host axis:
    go-tpc here, and on a client host (its password in a passfile there, the login over the hosts' own
    link). Each over TCP as the run's role; nothing left running on either host."""
    wire(ssh_lab, "load", "db")  # the client host reaches the server host
    axis = '[variants.placement]\nhere = {{ server_host = "db" }}\n'
    axis += 'there = {{ server_host = "db", client_host = "load" }}'
    body = EXPERIMENT.replace('[variants.sb]\n"64MB" = {{ server_options = {{ shared_buffers = "64MB" }} }}', axis)
    out, exported, cells = _run(ssh_lab, tmpfs, tmp_path, "", "db", "load", body=body, cells=2)
    by_label = {c["variant"]["placement"]: c for c in cells}
    for cell in cells:
        _assert_nopm_every_second(out, exported, cell)
        assert cell["build"]["host"]["name"] == "db" and cell["resources"]["server_cpu_s"] > 0  # postgres there
        address, _, port = cell["sysbench_options"]["targets"].rpartition(":")  # over TCP, as the run's role
        assert address == ssh_lab.hosts["db"].address and port.isdigit(), cell["sysbench_options"]
    here, there = by_label["here"], by_label["there"]
    assert "host" not in here["client"] and here["sysbench_options"]["conn_params"] == "sslmode=disable"
    assert there["client"]["host"] == "load" and there["client"]["address"] == ssh_lab.hosts["db"].address
    assert there["client"]["cpu_s"] > 0, there["client"]
    (log,) = (out / "logs").glob("prepare*.txt")  # one go-tpc prepare (prepare-on-db.txt), here, against the host
    prepared = log.read_text()
    assert prepared.count("creating table warehouse") == 1 and "creating table order_line" in prepared
    assert namespace_commands(ssh_lab, "db") == namespace_commands(ssh_lab, "load") == ["sshd"]
