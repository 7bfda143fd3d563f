"""[observe] alloc of a MariaDB server on another host (`server_host`, docs/hosts.md), the host being a
network namespace with its own sshd (sshhosts.py): the counter built here is copied there and
preloaded into the host's mariadbd, its file on the host's tmpfs is read over SSH at the window's
start and end, the allocator's syscalls are counted by perf there, and the sampled stacks are named
from the host's binaries. ORDER BY ranges sort in one buffer per query (Filesort_buffer::
alloc_sort_buffer, sized from the table's row estimate up to sort_buffer_size): one large malloc per
transaction, counted there as test_alloc.py counts it here. With glibc's mmap threshold fixed at
32 KiB, each is mmapped and munmapped: perf there must see those syscalls."""

from __future__ import annotations

import json
import os
from pathlib import Path

from perflab.units import size_class_label
from tests.integration.helpers import counted_share, used, write_experiment
from tests.integration.sshhosts import SshLab, namespace_commands, perflab_via

EXPERIMENT = """
[experiment]
name = "it-alloc-server-host"
duration = "4s"
warmup = "1s"
repeats = 1
server_host = "db"

[hosts.db]
ssh = "{ssh}"

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_read_only"
threads = [2]

[workload.options]
range_size = 100
point_selects = 0
simple_ranges = 0
sum_ranges = 0
distinct_ranges = 0
order_ranges = 1

[server_options]
sort_buffer_size = "2M"

[variants.allocator]  # buffers of 32 KiB or more mmapped and munmapped each time: syscalls for perf there
glibc-mmap = {{ env = {{ MALLOC_MMAP_THRESHOLD_ = "32768" }} }}

[observe]
alloc = {{ period = "64K" }}
"""


def sort_buffer(stacks: list[list[str]]) -> tuple[str, float]:
    """The sort buffer's leaf (`malloc:32K-64K`: sized from the range's row estimate, 100 rows here)
    and its sampled bytes, from the folded allocation stacks."""
    sort = [(stack.rsplit(";", 1)[1], int(n)) for stack, n in stacks if "alloc_sort_buffer;" in stack]
    assert sort, stacks[:5]
    (leaf,) = {leaf for leaf, _ in sort}  # one size class: one buffer size
    return leaf, sum(n for _, n in sort)


def test_alloc_counts_a_server_on_its_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    db = ssh_lab.hosts["db"]
    spec, out = write_experiment(tmp_path / "alloc.toml", EXPERIMENT.format(ssh=db.ssh)), tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    (cell,) = used(exported["cells"])
    assert cell["status"] == "ok", cell.get("error")
    assert cell["build"]["host"]["name"] == "db" and "libc.so" in cell["allocator_library"]  # the counter forwards
    alloc = cell["alloc"]
    calls = alloc["calls_per_txn"]
    assert calls["malloc"] > 1 and abs(calls["free"] - calls["malloc"]) <= 0.05 * calls["malloc"]
    assert counted_share(alloc, cell["summary"]["transactions"]) and alloc["threads"] >= 2
    assert "missing" not in alloc, alloc
    assert alloc["samples"] > 0 and alloc["dropped_samples"] == 0
    profile = out / "profiles" / f"cell-{cell['id']:04d}.alloc.folded"
    stacks = [line.rsplit(" ", 1) for line in profile.read_text().splitlines()]
    assert not any("perflab_alloc" in stack for stack, _ in stacks)  # the counter's own frames left out
    leaf, sampled = sort_buffer(stacks)  # named here from the host's mariadbd
    (counted,) = [r for r in alloc["by_size_class"] if f"malloc:{size_class_label(r['low'], r['high'])}" == leaf]
    # one per transaction: the counts are exact over their span, its transactions the window's in
    # proportion to time (accounting.share), so the window is 4 s: with 2 s, under CI's load, the
    # round trip the span misses at the start weighed enough to read 0.876 (ci5)
    assert 0.95 <= counted["calls_per_txn"]["malloc"] <= 1.1, alloc["by_size_class"]
    # perf there counts what the preload counts: an mmap and a munmap per allocation of 32 KiB or more
    large = sum(sum(r["calls_per_txn"].get(op, 0) for op in ("malloc", "calloc", "realloc", "memalign"))
                for r in alloc["by_size_class"] if r["low"] >= 32768)  # fmt: skip
    syscalls = alloc["syscalls_per_txn"]
    # (perf's window lags the counter's by a round trip or two at each end: a few calls of ~750)
    assert counted["calls_per_txn"]["malloc"] * 0.95 <= syscalls["munmap"] <= large * 1.05, (syscalls, large)
    assert abs(syscalls["mmap"] - syscalls["munmap"]) <= 0.05 * syscalls["munmap"], syscalls
    # the sampled bytes (weighted) agree with the counted ones, within sampling error
    assert 0.7 < sampled / alloc["transactions"] / counted["bytes_per_txn"] < 1.3, (sampled, counted)
    meta = json.loads(profile.with_suffix(".json").read_text())
    assert meta["binary"].startswith("db:") and meta["binary"].endswith("/mariadbd")
    assert namespace_commands(ssh_lab, "db") == ["sshd"]  # the server and perf stopped there
    assert not Path(exported["hosts"]["hosts"]["db"]["dir"]).exists()


HERE = """
[experiment]
name = "it-alloc-client-host"
duration = "2s"
warmup = "2s"
repeats = 1
client_host = "load"

[hosts.load]
ssh = "{ssh}"

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_read_write"
threads = [2]

[workload.options]
range_size = 100
point_selects = 0
simple_ranges = 0
sum_ranges = 0
distinct_ranges = 0
order_ranges = 1

[server_options]
sort_buffer_size = "2M"
log_bin = "binlog"
sync_binlog = 1

[observe]
alloc = {{ period = "64K" }}
io = true
host_speed = true
"""


def test_alloc_io_and_the_canary_of_a_server_here_with_its_client_on_a_host(
    ssh_lab: SshLab, tmpfs, tmp_path: Path
) -> None:
    """mariadbd here, sysbench on the client host: the counter, the I/O observer and the canary run
    here as for a local client, over the remote client's window (hosts/client.py)."""
    load = ssh_lab.hosts["load"]
    spec, out = write_experiment(tmp_path / "here.toml", HERE.format(ssh=load.ssh)), tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    (cell,) = used(exported["cells"])
    assert cell["status"] == "ok" and cell["client"]["host"] == "load" and "host" not in cell["build"], cell.get(
        "error"
    )
    transactions = cell["summary"]["transactions"]
    alloc = cell["alloc"]
    calls = alloc["calls_per_txn"]
    assert counted_share(alloc, transactions) and "missing" not in alloc, alloc
    assert calls["malloc"] > 1 and abs(calls["free"] - calls["malloc"]) <= 0.1 * calls["malloc"], calls
    assert alloc["samples"] > 0 and alloc["syscalls_per_txn"] is not None, alloc
    profile = out / "profiles" / f"cell-{cell['id']:04d}.alloc.folded"
    leaf, _ = sort_buffer([line.rsplit(" ", 1) for line in profile.read_text().splitlines()])
    (counted,) = [r for r in alloc["by_size_class"] if f"malloc:{size_class_label(r['low'], r['high'])}" == leaf]
    # a sort buffer a transaction. The counts' span opens late on a busy machine (0.2 s beside 1.83 cores
    # of others in CI) and its transactions are taken from the client's per-second counts: even within
    # a second. A paced client is not: with a 1 s warm-up its first second (a cold server) fell behind
    # its rate (137 of 200) and caught up at the window's start, and 0.894 was read (ci64); 2 s of warm-up
    # absorb that
    assert 0.95 <= counted["calls_per_txn"]["malloc"] <= 1.1, alloc["by_size_class"]
    io = cell["resources"]["io"]  # the server's own counters and its fsyncs, here
    per_txn = io["per_txn"]
    assert io["lost_chunks"] == 0 and per_txn["binlog.bytes_written"] > 100, io
    assert 0.2 <= per_txn["sys.fsync"] + per_txn["sys.fdatasync"] <= 4, per_txn  # a binlog sync per group commit
    speed = cell["host_speed"]  # this machine's vCPUs over the window
    assert speed["work_ns"] > 0 and speed["per_cpu"].keys() == {str(c) for c in os.sched_getaffinity(0)}, speed
    assert [s for s, _ in speed["seconds"]] == [0, 1], speed
    assert namespace_commands(ssh_lab, "load") == ["sshd"]


PG = """
[experiment]
name = "it-alloc-pg-server-host"
duration = "4s"
warmup = 0
repeats = 1
server = "postgresql"
server_host = "db"

[hosts.db]
ssh = "{ssh}"

[dataset]
scale = 1

[workload]
tool = "pgbench"
test = "select-only"
threads = [2]

[observe]
alloc = {{ period = "64K" }}

[server_options]
autovacuum = "off"  # a worker forked in the window mallocs what it keeps (40 s here: 2.34 a transaction, 3.53 freed)
"""


def test_alloc_counts_a_postgresql_server_on_its_host_over_every_backend(
    ssh_lab: SshLab, tmpfs, tmp_path: Path
) -> None:
    """The counter preloaded into the postmaster there counts in every backend it forks, a slot each,
    summed; perf there counts the syscalls of the whole tree (observers/alloc/tracer.py on its place)."""
    db = ssh_lab.hosts["db"]
    spec, out, shm = (
        write_experiment(tmp_path / "pg.toml", PG.format(ssh=db.ssh)),
        tmp_path / "results",
        tmpfs("shm", "1G"),
    )
    shm.parent.chmod(0o755)  # the postgres user must reach its directories
    done = perflab_via(ssh_lab, shm, "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    (cell,) = used(exported["cells"])
    assert cell["status"] == "ok" and cell["build"]["host"]["name"] == "db", cell.get("error")
    alloc = cell["alloc"]
    assert counted_share(alloc, cell["summary"]["transactions"]) > 100 and "missing" not in alloc, alloc
    # the postmaster, pgbench's backends and the auxiliary processes: a slot each (not one shared),
    # none forked within the window (autovacuum off)
    assert alloc["threads"] >= 4 and alloc["shared_slot_threads"] == 0 and alloc["threads_started"] == 0, alloc
    assert alloc["started_calls_share"] == 0.0, alloc
    # select-only's index scan: btbeginscan's two palloc'd chunks, each over the chunk limit, a malloc
    # of its own (8-16 KiB and 16-32 KiB) per transaction, in the backends. A backend missed would
    # give 0.5, one counted twice 2. Under load (CI's parallel phase; here beside 3 busy loops) both
    # backends malloc more at once, in the same stretch, some of it kept: 16-32 KiB up to 1.13 (CI),
    # 1.09 here, 8-16 KiB up to 1.04, each backend's slot alike; the sampled stacks hold the planner
    # (GetCachedPlan re-planning) beside btbeginscan. Quiet, 1.00-1.01 (test_postgresql's 0.95-1.05).
    scan = {r["low"]: r["calls_per_txn"].get("malloc", 0) for r in alloc["by_size_class"] if r["low"] in (8192, 16384)}
    said = (scan, cell["summary"]["transactions"])
    assert scan.keys() == {8192, 16384} and all(0.9 <= n <= 1.2 for n in scan.values()), said
    # the counts end at the end mark, before pgbench's clients disconnect (alloc.tracer.end_mark): each
    # malloc freed within the transaction (until 2026-11-28 the exiting backends' frees of what their
    # postmaster had malloc'd were in, and free exceeded malloc)
    calls = alloc["calls_per_txn"]
    assert calls["malloc"] >= 2 * 0.9 and abs(calls["free"] - calls["malloc"]) <= 0.1 * calls["malloc"], calls
    assert alloc["syscalls_per_txn"] is not None and alloc["samples"] > 0 and alloc["dropped_samples"] == 0, alloc
    profile = out / "profiles" / f"cell-{cell['id']:04d}.alloc.folded"
    stacks = [line.rsplit(" ", 1) for line in profile.read_text().splitlines()]
    assert any(";btbeginscan;" in stack for stack, _ in stacks), stacks[:5]  # named here from the host's postgres
    meta = json.loads(profile.with_suffix(".json").read_text())
    assert meta["binary"] == "db:/usr/lib/postgresql/15/bin/postgres", meta["binary"]
    assert namespace_commands(ssh_lab, "db") == ["sshd"]
