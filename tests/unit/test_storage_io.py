"""[experiment] storage and [observe] io without a server: mountinfo, sysfs, diskstats (golden files
in tests/data/storage), reflink-or-copy, the durability rules, the samples' arithmetic and the
findings' wording."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from perflab import spec
from perflab.errors import SpecError
from perflab.report import io_findings
from perflab.places import copy
from perflab.run import storage
from perflab.servers import dataset
from perflab.observers import io
from perflab.servers import kind, mysqld_io
from perflab.servers.mysqld import Mysqld
from perflab.servers.postgresql import io as pg_io
from perflab.servers.postgresql.server import PostgreSQL
from perflab.servers.postgresql.user import run_user
from perflab.spec.design import choose, design_problems

DATA = Path(__file__).resolve().parents[1] / "data" / "storage"
MOUNTS = storage.parse_mountinfo((DATA / "mountinfo-debian12-vm.txt").read_text())


def test_mountinfo_finds_the_mount_that_holds_a_path():
    root = storage.mount_of(Path("/var/tmp/lab"), MOUNTS)
    assert (root.fstype, root.source, root.dev, root.mount_point) == ("ext4", "/dev/vda", "254:0", "/")
    assert root.options == "rw,relatime,discard,resv_strict,resuid=65534,resgid=65534"  # per mount + superblock
    shm = storage.mount_of(Path("/dev/shm/perflab-x"), MOUNTS)
    assert (shm.fstype, shm.dev) == ("tmpfs", "0:27")  # the later of two mounts on /dev/shm hides the first
    assert storage.mount_of(Path("/dev/shmx"), MOUNTS).fstype == "devtmpfs"  # a prefix is not a parent


def test_mountinfo_unescapes_spaces_and_skips_optional_fields():
    inner = storage.mount_of(Path("/var/lib/with space/inner/db"), MOUNTS)
    assert (inner.fstype, inner.source, inner.mount_point) == ("xfs", "/dev/sdb1", "/var/lib/with space/inner")
    outer = storage.mount_of(Path("/var/lib/with space/x"), MOUNTS)
    assert (outer.fstype, outer.options.split(",")[:2]) == ("btrfs", ["rw", "noatime"])
    netns = [m for m in MOUNTS if m.mount_point == "/run/netns"]
    assert netns and netns[0].fstype == "ext4"  # "shared:1" before the separator is skipped


def test_block_device_and_scheduler_from_sysfs():
    sysfs = DATA / "sys" / "dev" / "block"
    assert storage.block_device("254:0", sysfs) == ("vda", "mq-deadline")
    assert storage.block_device("8:17", sysfs) == ("sdb1", "none")  # a partition: its disk's scheduler
    assert storage.block_device("0:27", sysfs) == (None, None)  # tmpfs: no block device
    assert storage.scheduler_of("none [mq-deadline] kyber bfq\n") == "mq-deadline"
    assert storage.scheduler_of("none\n") == "none"


def test_describe_this_machine(tmp_path):
    here = storage.describe(tmp_path)
    mount = storage.mount_of(tmp_path.resolve(), storage.parse_mountinfo(Path("/proc/self/mountinfo").read_text()))
    assert (here.fstype, here.dev, here.on_disk) == (mount.fstype, mount.dev, mount.fstype not in storage.MEMORY_FS)
    assert here.record()["path"] == str(tmp_path)


def test_diskstats_golden():
    a = io.parse_diskstats((DATA / "diskstats-a.txt").read_text(), "254:0")
    b = io.parse_diskstats((DATA / "diskstats-b.txt").read_text(), "254:0")
    assert a == io.DiskCounters(933281, 29638658 * 512, 1379328, 298632112 * 512, 450816)
    assert (b.reads - a.reads, b.writes - a.writes, b.write_bytes - a.write_bytes) == (6, 9, 72 * 512)
    old = io.parse_diskstats((DATA / "diskstats-old.txt").read_text(), "8:1")
    assert old == io.DiskCounters(50, 1000 * 512, 100, 800 * 512, 0)  # no flush fields before 5.5
    assert io.parse_diskstats((DATA / "diskstats-a.txt").read_text(), "8:99") is None


def test_clone_file_copies_and_says_how(tmp_path):
    src = tmp_path / "a"
    src.write_bytes(os.urandom(100_000))
    os.chmod(src, 0o640)
    method = copy.clone_file(str(src), str(tmp_path / "b"))
    fstype = storage.describe(tmp_path).fstype
    assert method == ("reflink" if fstype in ("btrfs", "xfs", "bcachefs") else "copy")
    assert (tmp_path / "b").read_bytes() == src.read_bytes() and os.stat(tmp_path / "b").st_mode & 0o777 == 0o640


def test_a_sparse_copy_leaves_whole_mibs_of_zeros_as_holes(tmp_path):
    """A kept snapshot (run/datasets.py): InnoDB's fallocated redo log is mostly zeros; the copy holds
    the same bytes, its zero MiBs (the last one too) as holes, so it takes the records' blocks only."""
    mib = 1 << 20
    data = b"header" + bytes(mib - 6) + bytes(3 * mib) + os.urandom(mib) + bytes(2 * mib) + b"tail"
    src, dense, sparse = tmp_path / "ib_logfile0", tmp_path / "dense", tmp_path / "sparse"
    src.write_bytes(data)
    copy.clone_file(str(src), str(dense))
    copy.clone_file(str(src), str(sparse), sparse=True)
    assert sparse.read_bytes() == data == dense.read_bytes()
    if storage.describe(tmp_path).fstype not in ("btrfs", "xfs", "bcachefs"):  # a reflink shares all extents
        used = os.stat(sparse).st_blocks * 512
        assert 2 * mib <= used <= 3 * mib < os.stat(dense).st_blocks * 512, (used, os.stat(dense).st_blocks * 512)


def test_an_in_memory_copy_writes_the_data_and_allocates_the_rest():
    """A cell's restore on tmpfs (places/copy._data_copy): InnoDB's redo log is fallocated, its
    unwritten pages read as holes there; the copy has the same bytes and the whole length allocated,
    as the server made it, its unwritten pages left unwritten (the source's holes, the copy's too)."""
    mib = 1 << 20
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        src, dst, empty = Path(shm) / "ib_logfile0", Path(shm) / "copy", Path(shm) / "empty"
        with open(src, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, 8 * mib)
            f.write(b"header")  # a record at the start and one in the middle: two data ranges
            f.seek(5 * mib + 100)
            f.write(os.urandom(3000))
        empty.touch()
        (Path(shm) / "dense").write_bytes(dense := os.urandom(mib + 5))  # no hole: copied whole, nothing allocated
        copy.clone_file(str(src), str(dst), in_memory=True)
        copy.clone_file(str(empty), str(Path(shm) / "empty-copy"), in_memory=True)
        copy.clone_file(str(Path(shm) / "dense"), str(Path(shm) / "dense-copy"), in_memory=True)
        assert (Path(shm) / "dense-copy").read_bytes() == dense
        assert dst.read_bytes() == src.read_bytes() and len(dst.read_bytes()) == 8 * mib
        assert os.stat(dst).st_blocks * 512 >= 8 * mib  # allocated: the server's writes find their pages
        with open(src, "rb") as a, open(dst, "rb") as b:  # the same ranges of data, the same holes
            for at, whence in ((0, os.SEEK_HOLE), (mib, os.SEEK_DATA), (5 * mib + 4096, os.SEEK_HOLE)):
                assert os.lseek(a.fileno(), at, whence) == os.lseek(b.fileno(), at, whence), (at, whence)
        assert (Path(shm) / "empty-copy").read_bytes() == b""


def test_a_server_hosts_restore_allocates_as_one_here_does():
    """The scripts a server host restores a cell's datadir with (hosts/server.py), run with this
    machine's sh, find, cp and fallocate: the snapshot's holes (tar --sparse kept them there) come out
    allocated to each file's length, the bytes the same, on tmpfs (cp -a, then fallocate) as on a
    disk (cp --sparse=never: zeros written, as a byte copy here); a file without holes, an empty one
    and the last file listed having none do not fail it."""
    from perflab.hosts.server import _ALLOCATE, _RESTORE, _RESTORE_ON_DISK  # noqa: PLC0415

    mib = 1 << 20
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm, tempfile.TemporaryDirectory(dir="/var/tmp") as disk:
        snap = Path(shm) / "snapshot"
        (snap / "db").mkdir(parents=True)
        with open(snap / "ib_logfile0", "wb") as f:  # a hole of 4 MiB after a record
            f.write(b"header")
            f.truncate(4 * mib)
        (snap / "db" / "t.ibd").write_bytes(dense := os.urandom(70000))
        (snap / "empty").touch()
        assert os.stat(snap / "ib_logfile0").st_blocks * 512 < mib  # the hole is one
        for script, target in ((_RESTORE + _ALLOCATE, Path(shm) / "datadirs" / "cell"),
                               (_RESTORE_ON_DISK, Path(disk) / "datadirs" / "cell")):  # fmt: skip
            done = subprocess.run(["sh", "-c", script, str(target.parent), str(snap), str(target)],
                                  capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
            assert done.returncode == 0, done.stderr
            log = target / "ib_logfile0"
            assert log.read_bytes() == (snap / "ib_logfile0").read_bytes()
            assert (target / "db" / "t.ibd").read_bytes() == dense and (target / "empty").read_bytes() == b""
            assert os.stat(log).st_blocks * 512 >= 4 * mib, (target, os.stat(log).st_blocks)


def test_restore_reports_its_method_and_time(tmp_path):
    (tmp_path / "snap" / "db").mkdir(parents=True)
    (tmp_path / "snap" / "db" / "t.ibd").write_bytes(b"x" * 65536)
    (tmp_path / "snap" / "link").symlink_to("db")
    seconds, method = dataset.restore_with_method(dataset.Snapshot(tmp_path / "snap", 65536, 0.0), tmp_path / "c")
    assert method in ("copy", "reflink") and 0 <= seconds < 30
    assert (tmp_path / "c" / "db" / "t.ibd").read_bytes() == b"x" * 65536 and (tmp_path / "c" / "link").is_symlink()


@pytest.fixture
def short() -> Iterator[Path]:
    """A directory with a short path (pytest's tmp_path is longer than a storage path may be)."""
    path = Path(tempfile.mkdtemp(prefix="plst-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path)


def test_storage_directory_problems(short, monkeypatch):
    tmp_path = short
    assert storage.directory_problems(tmp_path) == []
    missing = storage.directory_problems(tmp_path / "nope")
    assert missing[0].path == "experiment.storage" and "no such directory" in missing[0].found
    deep = tmp_path / ("d" * (storage.MAX_PATH_BYTES - len(str(tmp_path))))  # one byte too many
    deep.mkdir()
    assert "bytes" in storage.directory_problems(deep)[0].found  # a socket's path must fit below it
    (tmp_path / "f").write_text("")
    assert "not a directory" in storage.directory_problems(tmp_path / "f")[0].found
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # root may write anywhere: the answer, mocked
    assert "not writable" in storage.directory_problems(tmp_path)[0].found


def test_drop_caches_needs_a_writable_proc_file(monkeypatch):
    assert storage.drop_caches_problems(False) == []
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    (problem,) = storage.drop_caches_problems(True)
    assert problem.path == "experiment.drop_caches" and "/proc/sys/vm/drop_caches" in problem.expected


def test_a_disk_too_small_gives_the_figures(tmp_path):
    where = storage.describe(tmp_path)
    assert storage.room_problems(where, 1 << 20, 1) == []
    problem = storage.room_problems(where, 1 << 60, 1)[0]
    assert "1099511627776 MiB" in problem.expected and "MiB free" in problem.found and where.fstype in problem.found


BASE = '[experiment]\nname = "s"\n{extra}\n[workload]\ntest = "oltp_write_only"\n[variants.f]\na = {{}}\nb = {{}}\n'


def test_storage_values():
    assert spec.parse(BASE.format(extra="")).file.experiment.storage == "tmpfs"
    assert spec.parse(BASE.format(extra='storage = "/var/tmp/x"')).file.experiment.on_disk
    for bad in ('"var/tmp"', '""', "3", '"/a\\nb"'):
        with pytest.raises(SpecError) as exc:
            spec.parse(BASE.format(extra=f"storage = {bad}"))
        assert exc.value.problems[0].path == "experiment.storage", bad


def test_io_is_on_by_default_on_a_disk():
    """On a disk a write verdict's Why is its fsyncs and redo/WAL bytes: [observe] io unasked, and the
    design sequential for it (saying how to interleave); off on tmpfs; the file's own word wins."""
    disk = spec.parse(BASE.format(extra='storage = "/var/tmp/x"'))
    assert disk.file.observe.io is True and disk.file.experiment.design == "sequential"
    assert "[observe] io" in disk.design_reason and "io = false" in disk.design_reason
    assert spec.parse(BASE.format(extra="")).file.observe.io is False
    assert spec.parse(BASE.format(extra="") + "[observe]\nio = true\n").file.observe.io is True  # asked on tmpfs
    off = spec.parse(BASE.format(extra='storage = "/var/tmp/x"') + "[observe]\nio = false\n")
    assert off.file.observe.io is False and off.file.experiment.design == "interleaved"
    # design = "interleaved" asked on a disk: io would need one server at a time, so unset means off
    forced = spec.parse(BASE.format(extra='storage = "/var/tmp/x"\ndesign = "interleaved"'))
    assert forced.file.observe.io is False and forced.file.experiment.design == "interleaved"


def test_io_and_drop_caches_need_one_server_at_a_time():
    for extra, key in (("drop_caches = true", "drop_caches"), ("[observe]\nio = true", "io")):
        text = BASE.format(extra=extra) if key == "drop_caches" else BASE.format(extra="") + extra + "\n"
        file = spec.parse(text).file
        chosen, why = choose(file.model_copy(update={"experiment": file.experiment.model_copy(update={"design": None})}))
        assert chosen.experiment.design == "sequential" and key in why
        forced = file.experiment.model_copy(update={"design": "interleaved"})
        assert any(key in p.path for p in design_problems(file.model_copy(update={"experiment": forced})))


def test_durability_defaults_are_tmpfs_only(tmp_path):
    pg = PostgreSQL(tmp_path, tmp_path / "d", {})
    assert pg.options["fsync"] is False and pg.options["synchronous_commit"] is False
    durable = PostgreSQL(tmp_path, tmp_path / "d", {"wal_compression": "on"}, durable=True)
    assert not {"fsync", "synchronous_commit", "full_page_writes"} & durable.options.keys()
    assert durable.options["wal_compression"] == "on" and durable.options["max_wal_size"] == "1GB"
    assert "skip-log-bin" in Mysqld(tmp_path, tmp_path / "d", {}).options
    assert "skip-log-bin" not in Mysqld(tmp_path, tmp_path / "d", {}, durable=True).options
    binlog = Mysqld(tmp_path, tmp_path / "d", {"log_bin": "binlog", "sync_binlog": 1})  # on tmpfs too
    assert "skip-log-bin" not in binlog.options and binlog.options["log_bin"] == "binlog"


def test_server_counters_parse():
    text = "Innodb_os_log_written\t1000\nInnodb_buffer_pool_pages_flushed\t7\nInnodb_page_size\t16384\nUptime\t9\n"
    assert mysqld_io.parse(text) == {"innodb.log_bytes_written": 1000.0, "innodb.pages_flushed": 7.0,
                                      "innodb.page_size": 16384.0}  # fmt: skip
    mysql = mysqld_io.parse("Innodb_lsn_current\t5000\nInnodb_lsn_last_checkpoint\t3500\n")
    assert mysql == {"innodb.checkpoint_age": 1500.0}  # MySQL: the age from the LSNs
    row = "3|1|100|5|6|0|900|40|123456|30|29|8192"
    pg = pg_io.parse(row + "\n")
    assert pg["pg.checkpoints"] == 4 and pg["pg.checkpoint_write_bytes"] == 100 * 8192 and pg["pg.wal_bytes"] == 123456
    assert pg_io.parse("1|2\n") == {}


def samples() -> list[io.Sample]:
    out = []
    for t in range(-1, 6):
        burst = 2 << 30 if t >= 3 else 0  # a checkpoint between t=2 and t=3
        out.append((float(t), {"disk.write_bytes": 1e6 * t + burst, "pg.checkpoints": 1.0 * (t >= 3),
                               "pg.checkpoint_write_bytes": float(burst), "innodb.pages_dirty": 10.0 * t}))  # fmt: skip
    return out


def test_fields_per_transaction_and_levels():
    series = samples()
    io.add_calls(series, {"fsync": [100.5, 101.5, 101.7], "fdatasync": []}, origin=100.0)
    assert [v["sys.fsync"] for _, v in series] == [0, 0, 1, 3, 3, 3, 3]
    f = io.fields(series, 0.0, 4.0, 400)
    assert f["per_txn"]["sys.fsync"] == 3 / 400 and f["per_txn"]["disk.write_bytes"] == (4e6 + (2 << 30)) / 400
    assert f["levels"] == {"innodb.pages_dirty": 20.0} and "innodb.pages_dirty" not in f["per_txn"]  # a level
    assert io.fields(series, 0.0, 4.0, 0)["per_txn"] == {}


def test_a_stall_says_what_the_checkpoint_wrote():
    grown = io.stall_io(samples(), 2.0, 3.0)
    assert grown["pg.checkpoints"] == 1 and grown["pg.checkpoint_write_bytes"] == 2 << 30
    phrase = io_findings.stall_phrase(grown)
    assert phrase.startswith("; in it a checkpoint wrote 2.0 GiB") and "the disk wrote 2.0 GiB" in phrase
    assert io_findings.stall_phrase({"sys.fdatasync": 1.0}) == "; in it 1 fdatasync call"
    assert io_findings.stall_phrase({}) == "" and io_findings.stall_phrase(None) == ""


def test_a_stall_says_what_innodb_checkpointed_and_flushed():
    series = [(0.0, {"innodb.log_bytes_written": 0.0, "innodb.checkpoint_age": 900e6, "innodb.pages_flushed": 0.0,
                     "innodb.page_size": 16384.0}),
              (1.0, {"innodb.log_bytes_written": 50e6, "innodb.checkpoint_age": 350e6, "innodb.pages_flushed": 64e3,
                     "innodb.page_size": 16384.0})]  # fmt: skip
    grown = io.stall_io(series, 0.0, 1.0)
    assert grown["innodb.checkpointed_bytes"] == 600e6 and grown["innodb.flushed_bytes"] == 64e3 * 16384
    phrase = io_findings.stall_phrase(grown)
    assert "InnoDB's checkpoint advanced over 572.2 MiB of redo, InnoDB flushed 1000.0 MiB of pages" in phrase


def test_into_row_annotates_stalls_and_puts_the_series_on_the_windows_clock():
    row = {"resources": {}, "stalls": [{"start_s": 2.0, "end_s": 3.0}]}
    stored = io.into_row(row, {"fields": {"per_txn": {}}, "samples": samples(), "window_s": 1.0}, [(0.0, {"x": 1.0})])
    assert row["resources"]["io"] == {"per_txn": {}} and row["stalls"][0]["io"]["pg.checkpoints"] == 1
    assert stored[0] == (0.0, {"x": 1.0}) and [t for t, _ in stored[1:3]] == [-2.0, -1.0]
    assert io.into_row(row, None, []) == []


def test_durability_on_tmpfs_is_a_finding():
    cells = [{"id": 0, "server_options": {"innodb_flush_log_at_trx_commit": 1}},
             {"id": 1, "server_options": {"sort_buffer_size": "2M"}}]  # fmt: skip
    meta = {"experiment": {"server": "mariadb"}, "storage": {"on_disk": False, "fstype": "tmpfs"}}
    (finding,) = io_findings.durability_findings(cells, meta)
    assert finding.cells == (0,) and "innodb_flush_log_at_trx_commit" in finding.text and "storage =" in finding.text
    assert io_findings.durability_findings(cells, {**meta, "storage": {"on_disk": True}}) == []
    durability = list(kind("postgresql").durability_options())
    pg = io_findings.durability_names(durability, [{"synchronous_commit": "off", "work_mem": "4MB"}])
    assert pg == ["synchronous_commit"]


def test_postgresql_needs_a_storage_its_user_can_reach(short):
    inner = short / "db"
    inner.mkdir()
    short.chmod(0o700)
    problems = kind("postgresql").storage_problems(inner)
    if run_user() is None:  # not root: postgres runs as perflab's own user, who reaches it
        assert problems == []
        return
    assert problems[0].found == f"{short} is not searchable by postgres" and problems[0].hint == f"chmod o+x {short}"
    # mariadbd runs as mysql (issue 48): the same rule
    assert kind("mariadb").storage_problems(inner)[0].found == f"{short} is not searchable by mysql"
    short.chmod(0o755)
    assert kind("postgresql").storage_problems(inner) == [] and kind("mariadb").storage_problems(inner) == []
