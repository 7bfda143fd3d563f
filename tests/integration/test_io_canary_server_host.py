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

from tests.integration.helpers import write_experiment
from tests.integration.sshhosts import SshLab, namespace_commands, perflab_via

EXPERIMENT = """
[experiment]
name = "it-io-canary-server-host"
duration = "2s"
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
    (cell,) = exported["cells"]
    assert cell["status"] == "ok" and cell["build"]["host"]["name"] == "db", cell.get("error")
    # the canary (perflab-canary-HASH, comm cut at 15 bytes) and perf ran in the host's namespace
    assert any(name.startswith("perflab-canary") for name in watch.seen), watch.seen
    assert "perf" in watch.seen and "mariadbd" in watch.seen, watch.seen
    speed = cell["host_speed"]  # the host's vCPUs over the window, each CPU the server may run on there
    assert speed["work_ns"] > 0 and speed["per_cpu"].keys() == {str(c) for c in os.sched_getaffinity(0)}, speed
    assert speed["samples"] >= 5 * len(speed["per_cpu"]) and [s for s, _ in speed["seconds"]] == [0, 1], speed
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
