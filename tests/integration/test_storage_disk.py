"""[experiment] storage on disk and [observe] io, on real servers: a tiny write workload per kind,
where the durability setting must show in the fsyncs per transaction, the I/O series and the
storage record must be stored, and perflab must leave the storage directory as it found it.
The disk is a temporary directory under /var/tmp (ext4 on this VM), removed at the end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import perflab
from tests.integration.helpers import used, write_experiment


def flat(text: str) -> str:
    """The console's text without its line wrapping."""
    return " ".join(text.split())


@pytest.fixture
def disk() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="plst-", dir="/var/tmp"))
    path.chmod(0o755)  # mkdtemp's 0700: the postgres user, who runs postgres, must reach its datadir
    (path / "theirs.txt").write_text("not perflab's\n")  # must survive the run
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_json(tmp_path: Path, body: str) -> tuple[dict, str]:
    spec = write_experiment(tmp_path / "e.toml", body)
    done = perflab("run", str(spec), "-o", str(tmp_path / "r"))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = perflab("export", str(tmp_path / "r"), "--format", "json")
    assert exported.returncode == 0, exported.stderr
    return json.loads(exported.stdout), done.stdout + done.stderr


def by_label(doc: dict, axis: str) -> dict[str, dict]:
    return {c["variant"][axis]: c for c in doc["cells"]}


def check_storage_and_series(doc: dict, disk: Path) -> None:
    storage = doc["storage"]
    assert storage["path"] == str(disk) and storage["on_disk"] is True and storage["fstype"] not in ("tmpfs", "")
    assert storage["block_device"] and storage["dev"].count(":") == 1
    for cell in doc["cells"]:
        assert cell["status"] == "ok", cell.get("error")
        assert cell["resources"]["restore_method"] in ("copy", "reflink") and cell["resources"]["restore_s"] >= 0
        writes = [s["values"]["disk.write_bytes"] for s in cell["status_samples"] if "disk.write_bytes" in s["values"]]
        assert len(writes) >= 4 and writes == sorted(writes) and writes[-1] > writes[0]  # once a second, growing
    assert sorted(p.name for p in disk.iterdir()) == ["theirs.txt"]  # its own directory only, and removed


def resident_bytes(path: Path) -> int:
    """Bytes of `path` in the page cache (util-linux fincore: mincore(2) on a mapping of it)."""
    done = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout.strip())


def test_drop_caches_empties_the_page_cache_of_a_file_on_disk(disk: Path) -> None:
    """Its effect, not its duration: a file's pages, in the page cache after it is written (dirty,
    which the sync first writes back), are not after drop_caches."""
    from perflab.run import storage

    data = disk / "cached.bin"
    data.write_bytes(os.urandom(8 << 20))
    assert data.read_bytes() and resident_bytes(data) == 8 << 20  # all of it cached
    storage.drop_caches()
    assert resident_bytes(data) == 0
    data.read_bytes()  # and the file is whole: read back from the disk
    assert resident_bytes(data) == 8 << 20


MARIADB = """
[experiment]
name = "it-disk-mariadb"
duration = "3s"
warmup = "1s"
repeats = 1
storage = "{disk}"
drop_caches = true  # global to the machine: this test runs under the measurement lock, as every integration test

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_write_only"
threads = [1]

[variants.flush]
"1" = {{ server_options = {{ innodb_flush_log_at_trx_commit = 1 }} }}
"2" = {{ server_options = {{ innodb_flush_log_at_trx_commit = 2 }} }}

[observe]
io = true
"""


def test_mariadb_on_disk_fsyncs_follow_innodb_flush_log_at_trx_commit(tmp_path: Path, disk: Path) -> None:
    doc, _ = run_json(tmp_path, MARIADB.format(disk=disk))
    check_storage_and_series(doc, disk)
    cells = by_label(doc, "flush")
    every, lazy = (cells[k]["resources"]["io"]["per_txn"] for k in ("1", "2"))
    # 1: the redo log is synced at every commit (one thread: no group commit); 2: once a second
    assert every["sys.fdatasync"] + every["sys.fsync"] >= 0.9, every
    assert lazy["sys.fdatasync"] + lazy["sys.fsync"] <= 0.1, lazy
    assert every["innodb.log_bytes_written"] > 100 and every["disk.write_bytes"] > 0
    assert "innodb.checkpoint_age" in cells["1"]["resources"]["io"]["levels"]
    assert all(0 <= c["resources"]["drop_caches_s"] < 60 for c in cells.values())  # dropped before each cell


PGBENCH = """
[experiment]
name = "it-disk-pg"
server = "postgresql"
duration = "3s"
warmup = "1s"
repeats = 1
storage = "{disk}"

[dataset]
scale = 1

[workload]
tool = "pgbench"
test = "tpcb-like"
threads = [1]

[variants.sync]
on = {{ server_options = {{ synchronous_commit = "on" }} }}
off = {{ server_options = {{ synchronous_commit = "off" }} }}

[observe]
io = true
"""


def test_postgresql_on_disk_fsyncs_follow_synchronous_commit(tmp_path: Path, disk: Path) -> None:
    doc, _ = run_json(tmp_path, PGBENCH.format(disk=disk))
    check_storage_and_series(doc, disk)
    cells = by_label(doc, "sync")
    on, off = (cells[k]["resources"]["io"]["per_txn"] for k in ("on", "off"))
    assert on["sys.fdatasync"] + on["sys.fsync"] >= 0.9, on  # the WAL is synced at every commit
    assert off["sys.fdatasync"] + off["sys.fsync"] <= 0.2, off  # the WAL writer's, a few a second
    assert on["pg.wal_bytes"] > 0 and "pg.checkpoints" in on
    confs = [p.read_text() for p in (tmp_path / "r" / "logs").rglob("postgresql.conf")]
    assert all(c["resources"]["drop_caches_s"] is None for c in cells.values())  # not asked for
    assert len(confs) == 2 and all("synchronous_commit = " in c and "fsync = " not in c for c in confs)  # its own


def test_bad_storage_is_refused_naming_it(tmp_path: Path, disk: Path) -> None:
    missing = tmp_path / "nowhere"
    spec = write_experiment(tmp_path / "m.toml", MARIADB.format(disk=missing))
    done = perflab("run", str(spec), "--check")
    assert done.returncode == 3 and f"{missing}: no such directory" in flat(done.stderr), done.stderr
    huge = MARIADB.format(disk=disk).replace("table_size = 1000", "table_size = 2000000000")
    huge = huge.replace("tables = 1", "tables = 1000")
    done = perflab("run", str(write_experiment(tmp_path / "h.toml", huge)), "--check")
    assert done.returncode == 3 and "MiB free" in done.stderr and "cell copy" in flat(done.stderr), done.stderr
    long = disk / ("d" * 40)
    long.mkdir()
    done = perflab("run", str(write_experiment(tmp_path / "l.toml", MARIADB.format(disk=long))), "--check")
    assert done.returncode == 3 and "a path of at most 43 bytes" in flat(done.stderr), done.stderr
    disk.chmod(0o700)  # postgres (perflab is root) could not reach its datadir: refused before anything starts
    done = perflab("run", str(write_experiment(tmp_path / "p.toml", PGBENCH.format(disk=disk))), "--check")
    disk.chmod(0o755)
    assert done.returncode == 3 and f"{disk} is not searchable by postgres" in flat(done.stderr), done.stderr


def test_a_durability_variant_on_tmpfs_is_warned_about(tmp_path: Path) -> None:
    body = MARIADB.replace('storage = "{disk}"\n', "").format()
    done = perflab("run", str(write_experiment(tmp_path / "t.toml", body)), "--check")
    assert done.returncode == 0, done.stderr
    warning = flat(done.stderr)
    assert "durability variant on tmpfs: innodb_flush_log_at_trx_commit" in warning and "storage =" in warning


PG_SYSBENCH = """
[experiment]
name = "it-disk-pg-sysbench"
server = "postgresql"
duration = "3s"
warmup = "1s"
repeats = 1
storage = "{disk}"

[dataset]
tables = 1
table_size = 500

[workload]
test = "oltp_read_write"
threads = [2]

[observe]
io = true
"""


def test_sysbench_writes_run_on_postgresql(tmp_path: Path, disk: Path) -> None:
    """sysbench's pgsql driver on a write test: a deadlock is rolled back and counted, the run goes on."""
    doc, _ = run_json(tmp_path, PG_SYSBENCH.format(disk=disk))
    (cell,) = used(doc["cells"])
    assert cell["status"] == "ok", cell.get("error")
    assert cell["summary"]["transactions"] > 0 and sum(iv["writes"] or 0 for iv in cell["intervals"]) > 0
    io = cell["resources"]["io"]["per_txn"]
    assert io["sys.fdatasync"] + io["sys.fsync"] >= 0.5 and io["pg.wal_bytes"] > 0  # synchronous_commit on: its own
