"""[observe] host_speed and io of a MariaDB server on another host (`server_host`, docs/hosts.md), the
host being a network namespace with its own sshd (sshhosts.py): the canary built here is copied into
the host's run directory and runs there, one thread per CPU, its samples stamped on the host's clock
and cut by the window; the server's own I/O counters are read there once a second, and its fsyncs are
counted by perf there. With the binary log synced at every commit (sync_binlog = 1), every group
commit calls fsync or fdatasync, which the server's tmpfs does not spare (its redo log may be mapped
there: MariaDB maps ib_logfile0 on tmpfs and syncs nothing for it)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Self

import pytest

from tests.integration.helpers import used, write_experiment
from tests.integration.sshhosts import SshLab, namespace_commands, perflab_via

EXPERIMENT = """
[experiment]
name = "it-io-canary-server-host"
duration = "4s"  # 20 canary periods a CPU: one CPU's 5 (MIN_SAMPLES) survive a second-long stall (CI, 5 workers)
warmup = "1s"
repeats = 1
server_host = "db"

[hosts.db]
ssh = "{ssh}"

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_write_only"
threads = [2]

[server_options]
log_bin = "binlog"
sync_binlog = 1

[observe]
host_speed = true
io = true
"""


class Watch:
    """The command names seen in a host's namespace while a run goes on (every 0.1 s)."""

    def __init__(self, lab: SshLab, name: str) -> None:
        self.lab, self.name, self.seen = lab, name, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            self.seen.update(namespace_commands(self.lab, self.name))

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def test_the_canary_and_the_io_observer_run_on_the_server_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    db = ssh_lab.hosts["db"]
    spec, out = write_experiment(tmp_path / "io.toml", EXPERIMENT.format(ssh=db.ssh)), tmp_path / "results"
    with Watch(ssh_lab, "db") as watch:
        done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    (cell,) = used(exported["cells"])
    assert cell["status"] == "ok" and cell["build"]["host"]["name"] == "db", cell.get("error")
    # the canary (perflab-canary-HASH, comm cut at 15 bytes) and perf ran in the host's namespace
    assert any(name.startswith("perflab-canary") for name in watch.seen), watch.seen
    assert "perf" in watch.seen and "mariadbd" in watch.seen, watch.seen
    speed = cell["host_speed"]  # the host's vCPUs over the window, each CPU the server may run on there
    assert speed["work_ns"] > 0 and speed["per_cpu"].keys() == {str(c) for c in os.sched_getaffinity(0)}, speed
    assert speed["samples"] >= 5 * len(speed["per_cpu"]) and [s for s, _ in speed["seconds"]] == [0, 1, 2, 3], speed
    io = cell["resources"]["io"]
    per_txn, transactions = io["per_txn"], cell["summary"]["transactions"]
    assert transactions > 0 and io["lost_chunks"] == 0, io
    assert per_txn["innodb.log_bytes_written"] > 100 and per_txn["binlog.bytes_written"] > 100, per_txn
    assert 0.2 <= per_txn["sys.fsync"] + per_txn["sys.fdatasync"] <= 4, per_txn  # a binlog sync per group commit
    assert not any(k.startswith("disk.") for k in per_txn)  # the host's tmpfs: no block device
    series = [s for s in cell["status_samples"] if "innodb.log_bytes_written" in s["values"]]  # once a second
    written = [s["values"]["innodb.log_bytes_written"] for s in series]
    assert len(series) >= 3 and written == sorted(written) and written[-1] > written[0], series
    syncs = [s["values"]["sys.fsync"] + s["values"]["sys.fdatasync"] for s in series]
    assert syncs == sorted(syncs) and syncs[-1] > syncs[0], syncs  # the calls, on this machine's clock
    assert namespace_commands(ssh_lab, "db") == ["sshd"]  # the canary, perf and the server stopped there


def test_the_canary_and_io_on_the_server_host_with_sysbench_on_a_client_host(
    ssh_lab: SshLab, tmpfs, tmp_path: Path
) -> None:
    """The same with sysbench on a client host (hosts/client.py's window): the lab's hosts reach
    this machine only, so the client host is the server's own, as a client on the server host."""
    db = ssh_lab.hosts["db"]
    body = EXPERIMENT.format(ssh=db.ssh).replace('server_host = "db"', 'server_host = "db"\nclient_host = "db"')
    spec, out = write_experiment(tmp_path / "both.toml", body), tmp_path / "results"
    with Watch(ssh_lab, "db") as watch:
        done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = used(json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)["cells"])
    assert cell["status"] == "ok" and cell["client"]["host"] == "db", cell.get("error")
    assert any(name.startswith("perflab-canary") for name in watch.seen), watch.seen  # there, not here
    speed, io = cell["host_speed"], cell["resources"]["io"]
    assert speed["work_ns"] > 0 and [s for s, _ in speed["seconds"]] == [0, 1, 2, 3], speed
    per_txn = io["per_txn"]
    assert io["lost_chunks"] == 0 and per_txn["binlog.bytes_written"] > 100, io
    assert 0.2 <= per_txn["sys.fsync"] + per_txn["sys.fdatasync"] <= 4, per_txn
    assert namespace_commands(ssh_lab, "db") == ["sshd"]


PGBENCH = """
[experiment]
name = "it-io-canary-pgbench"
duration = "4s"  # as above (CI 2026-11-30, a 2 s window beside four workers: 8 canary samples, 4 a CPU)
warmup = 0
repeats = 1
server = "postgresql"
{where}

[hosts.db]
ssh = "{db}"

[hosts.load]
ssh = "{load}"

[dataset]
scale = 1

[workload]
tool = "pgbench"
test = "tpcb-like"
threads = [2]

[server_options]  # each commit's WAL synced (perflab's tmpfs defaults turn both off)
fsync = "on"
synchronous_commit = "on"

[observe]
host_speed = true
io = true
alloc = true
"""


@pytest.mark.parametrize(
    ("where", "canary_on"),
    [
        ('server_host = "db"', "db"),  # pgbench here (run/window.py, the server in its host's home)
        ('server_host = "db"\nclient_host = "db"', "db"),  # pgbench on a client host (client_host.py), the same
        ('client_host = "load"', None),  # the server here, pgbench on the client host: the canary here
    ],
    ids=["pgbench-here", "pgbench-on-client-host", "server-here"],
)
def test_the_canary_and_io_where_postgresql_runs_with_pgbench(
    ssh_lab: SshLab, tmpfs, tmp_path: Path, where: str, canary_on: str | None
) -> None:
    """pgbench's window, cut at perflab's marks: the canary, the server's I/O and its allocations where
    the server runs."""
    db, load = ssh_lab.hosts["db"], ssh_lab.hosts["load"]
    body = PGBENCH.format(where=where, db=db.ssh, load=load.ssh)
    spec, out, shm = write_experiment(tmp_path / "pg.toml", body), tmp_path / "results", tmpfs("shm", "1G")
    shm.parent.chmod(0o755)  # the postgres user must reach its directories
    with Watch(ssh_lab, "db") as on_db, Watch(ssh_lab, "load") as on_load:
        done = perflab_via(ssh_lab, shm, "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = used(json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)["cells"])
    assert cell["status"] == "ok" and cell["summary"]["transactions"] > 100, cell.get("error")
    canaries = {name for name, w in (("db", on_db), ("load", on_load)) if any(
        n.startswith("perflab-canary") for n in w.seen)}  # fmt: skip
    assert canaries == ({canary_on} if canary_on else set()), (on_db.seen, on_load.seen)
    speed = cell["host_speed"]
    assert speed["work_ns"] > 0 and speed["samples"] >= 5 * len(speed["per_cpu"]), speed
    io = cell["resources"]["io"]
    per_txn = io["per_txn"]
    assert io["lost_chunks"] == 0 and per_txn["pg.wal_bytes"] > 100, io  # tpcb-like's updates and insert
    assert 0.5 <= per_txn["sys.fsync"] + per_txn["sys.fdatasync"] <= 3, per_txn  # a WAL sync per commit
    series = [s["values"]["pg.wal_bytes"] for s in cell["status_samples"] if "pg.wal_bytes" in s["values"]]
    assert len(series) >= 2 and series == sorted(series) and series[-1] > series[0], series
    alloc = cell["alloc"]  # [observe] alloc where the server runs: every backend's, a slot each
    assert alloc["threads"] >= 4 and 1 < alloc["calls_per_txn"]["malloc"] < 1000, alloc
    assert namespace_commands(ssh_lab, "db") == ["sshd"] and namespace_commands(ssh_lab, "load") == ["sshd"]
