"""debug_symbols = true (builds/dbgsym.py) and where debug files are looked up (perflab/debuginfo.py):
the spec key, the debug archive's mirror and index, the -dbgsym added into a root (a real .deb made
with dpkg-deb stands in for the download), the reasons recorded when it cannot be, and the lookup
perf (--buildid-dir) and the stack sampler (libdw's debuginfo_path) use for a live process."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from perflab import debuginfo, elf
from perflab.errors import UsageError
from perflab.builds import aptindex as A
from perflab.builds import dbgsym as G
from perflab.builds.debroot import Root
from perflab.builds.package import debug_symbols_of
from perflab.observers.perf import buildid_dir
from perflab.observers.pmp_sampler import debuginfo_path
from perflab.spec.builds import BuildSpec
from tests.debarchive import make_deb

SLEEP = Path(shutil.which("sleep") or "/bin/sleep")
ID = elf.build_id(SLEEP) or ""


def test_debug_symbols_is_a_key_of_a_build_from_a_suite_only():
    assert BuildSpec.model_validate({"package": "mysql-server-core", "suite": "sid"}).debug_symbols is False
    spec = BuildSpec.model_validate({"package": "mysql-server-core", "suite": "sid", "debug_symbols": True})
    assert spec.debug_symbols is True
    with pytest.raises(ValidationError, match="debug_symbols only with suite"):
        BuildSpec.model_validate({"package": "mariadb-server-core=1:10.11.18-0+deb12u1", "debug_symbols": True})
    with pytest.raises(ValidationError, match="bool"):
        BuildSpec.model_validate({"package": "mysql-server-core", "suite": "sid", "debug_symbols": "yes"})


def test_the_debug_archive_has_its_own_mirror_and_a_file_mirror_is_copied(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(A.MIRROR_ENV, raising=False)
    monkeypatch.delenv(A.DEBUG_MIRROR_ENV, raising=False)
    assert (A.mirror("sid"), A.mirror("sid-debug")) == (A.MIRROR, "http://deb.debian.org/debian-debug")
    monkeypatch.setenv(A.DEBUG_MIRROR_ENV, "file:///srv/debian-debug")
    assert (A.mirror("sid"), A.mirror("trixie-debug")) == (A.MIRROR, "copy:///srv/debian-debug")
    monkeypatch.setenv(A.MIRROR_ENV, "http://mirror.example/debian")
    assert A.mirror("bookworm") == "http://mirror.example/debian"
    A.check_suite("sid-debug")
    with pytest.raises(UsageError, match="woody-debug"):
        A.check_suite("woody-debug")


def test_a_debug_index_lists_its_suite_and_forgets_its_update_when_the_mirror_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(A.DEBUG_MIRROR_ENV, "http://one.example/debian-debug")
    index = A._layout("sid-debug", tmp_path)
    sources = (index / "etc" / "sources.list").read_text()
    assert sources == f"deb [signed-by={A.KEYRING}] http://one.example/debian-debug sid-debug main\n"
    (index / "updated").write_text("2026-11-28T10:00:00+00:00\n")
    A._layout("sid-debug", tmp_path)
    assert A.updated(index) is not None  # unchanged: the update stands
    monkeypatch.setenv(A.DEBUG_MIRROR_ENV, "http://two.example/debian-debug")
    A._layout("sid-debug", tmp_path)
    assert A.updated(index) is None and A.age(index) == float("inf")  # the next use updates it


def test_apts_own_words_are_kept_in_the_reason():
    refused = (
        "apt-get update of sid-debug failed (exit 100):\nErr:1 http://deb.debian.org/debian-debug sid-debug InRelease\n"
        "  400  Bad Request [IP: 203.0.113.80 80]\nW: Download is performed unsandboxed as root\n"
        "E: Failed to fetch http://deb.debian.org/debian-debug/dists/sid-debug/InRelease  400  Bad Request\n"
        "E: The repository 'http://deb.debian.org/debian-debug sid-debug InRelease' is not signed."
    )
    assert G.apt_words(refused) == (
        "Failed to fetch http://deb.debian.org/debian-debug/dists/sid-debug/InRelease  400  Bad Request"
    )
    assert (
        G.apt_words("failed:\nReading package lists...\nE: Unable to locate package x") == "Unable to locate package x"
    )
    assert G.apt_words("apt-get update: no result after 1800s") == "apt-get update: no result after 1800s"
    assert G.dbgsym_of("postgresql-18=18.6-1") == "postgresql-18-dbgsym"


def fake_root(home: Path, packages: dict[str, str]) -> Root:
    tree = home / "root"
    (tree / "usr" / "sbin").mkdir(parents=True, exist_ok=True)
    shutil.copy2(SLEEP, tree / "usr" / "sbin" / "mysqld")  # a binary with a build ID
    loader = tree / "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    return Root(tree, loader, (), "2.43", packages, "sid", home.name)


def dbgsym_deb(workdir: Path, ident: str) -> Path:
    """A -dbgsym as Debian's look: the debug file by build ID, and its documentation (not moved)."""
    workdir.mkdir(parents=True, exist_ok=True)
    debug = workdir / "x.debug"
    debug.write_bytes(b"\x7fELF debug file stand-in")
    files = {f"usr/lib/debug/.build-id/{ident[:2]}/{ident[2:]}.debug": debug, "usr/share/doc/x/changelog": debug}
    deb = make_deb(workdir, "mysql-server-core-dbgsym", "9.7.4-2", files, depends="mysql-server-core (= 9.7.4-2)")
    return deb


def test_the_dbgsym_is_moved_into_the_root_recorded_and_then_read_from_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    root = fake_root(tmp_path / "roots" / "k1", {"mysql-server-core": "9.7.4-2", "libc6": "2.43-7"})
    (tmp_path / "index").mkdir()
    asked: list[str] = []
    monkeypatch.setattr(G, "suite_index", lambda suite, cache: asked.append(suite) or tmp_path / "index")
    monkeypatch.setattr(G, "known", lambda index, names: {"mysql-server-core-dbgsym": ["9.7.4-2"]})
    deb = dbgsym_deb(tmp_path / "debs", ID)
    monkeypatch.setattr(G, "download_alone", lambda index, package: deb)
    added = G.add(root, "mysql-server-core", tmp_path)
    relative = f"usr/lib/debug/.build-id/{ID[:2]}/{ID[2:]}.debug"
    assert added == G.DebugSymbols("mysql-server-core-dbgsym=9.7.4-2", "sid-debug", (relative,), None)
    assert asked == ["sid-debug"] and (root.dir / relative).is_file() and not deb.exists()
    assert not (root.dir / "usr/share/doc").exists() and not (root.dir.parent / ".debug.partial").exists()
    record = json.loads((root.dir.parent / "debug.json").read_text())
    assert record["files"] == [relative] and record["package"] == "mysql-server-core-dbgsym"
    assert debug_symbols_of(root.dir / "usr/sbin/mysqld", added) == f"dbgsym: {root.dir / relative}"
    monkeypatch.setattr(G, "suite_index", lambda suite, cache: pytest.fail("the record should serve"))
    assert G.add(root, "mysql-server-core=9.7.4-2", tmp_path) == added
    (root.dir / relative).unlink()  # a record whose file is gone is not a record
    assert G.recorded(root, "mysql-server-core-dbgsym", "9.7.4-2") is None


def test_without_the_archive_or_the_package_the_reason_is_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = fake_root(tmp_path / "roots" / "k2", {"mysql-server-core": "9.7.4-2"})
    binary = root.dir / "usr/sbin/mysqld"

    def refused(suite: str, cache: Path) -> Path:
        raise A.RootError(f"apt-get update of {suite} failed (exit 100):\nE: Failed to fetch URL  400  Bad Request")

    monkeypatch.setenv(A.DEBUG_MIRROR_ENV, "http://d.example/debian-debug")
    monkeypatch.setattr(G, "suite_index", refused)
    added = G.add(root, "mysql-server-core", tmp_path)
    assert added.files == () and added.reason == (
        "sid-debug could not be read (http://d.example/debian-debug): Failed to fetch URL  400  Bad Request"
    )
    assert debug_symbols_of(binary, added) == f"none: {added.reason}"
    (tmp_path / "index").mkdir()
    monkeypatch.setattr(G, "suite_index", lambda suite, cache: tmp_path / "index")
    monkeypatch.setattr(G, "known", lambda index, names: {"mysql-server-core-dbgsym": ["9.7.5-1"]})
    assert G.add(root, "mysql-server-core", tmp_path).reason == (
        "sid-debug has no mysql-server-core-dbgsym=9.7.4-2; it has 9.7.5-1"
    )
    monkeypatch.setattr(G, "known", lambda index, names: {})
    assert G.add(root, "mysql-server-core", tmp_path).reason == "sid-debug has no mysql-server-core-dbgsym=9.7.4-2"
    assert G.add(root, "mariadb-server-core", tmp_path).reason == "the root holds no mariadb-server-core"
    assert debug_symbols_of(binary, None).startswith("none: not asked for (debug_symbols = true")
    empty = G.DebugSymbols("mysql-server-core-dbgsym=9.7.4-2", "sid-debug", ("usr/lib/debug/other.debug",))
    assert debug_symbols_of(binary, empty) == (
        f"none: mysql-server-core-dbgsym=9.7.4-2 holds no debug file of mysqld's build ID {ID}"
    )


def test_a_debug_file_is_looked_up_in_the_binarys_own_tree_then_the_systems(tmp_path: Path):
    assert debuginfo.tree_debug_dir(Path("/c/roots/K/root/usr/sbin/mysqld")) == Path("/c/roots/K/root/usr/lib/debug")
    assert debuginfo.tree_debug_dir(Path("/usr/local/c/root/usr/sbin/m")) == Path("/usr/local/c/root/usr/lib/debug")
    assert debuginfo.tree_debug_dir(Path("/usr/sbin/mariadbd")) is None  # the system's: its /usr/lib/debug
    assert debuginfo.tree_debug_dir(Path("/opt/mariadb/bin/mariadbd")) is None
    remedy = debuginfo.remedy(Path("/c/roots/K/root/usr/sbin/mysqld"), "mysql-server-core-dbgsym")
    assert remedy.startswith("debug_symbols = true on its [builds] entry") and "dbgsym" not in remedy.split("(")[0]
    assert "e.g. mariadb-server-core-dbgsym" in debuginfo.remedy(
        Path("/usr/sbin/mariadbd"), "mariadb-server-core-dbgsym"
    )
    binary = tmp_path / "root" / "usr" / "bin" / "sleep"
    binary.parent.mkdir(parents=True)
    shutil.copy2(SLEEP, binary)
    system = tmp_path / "system-debug"
    assert debuginfo.debug_file(binary, system) is None
    debuginfo.at(system, ID).parent.mkdir(parents=True)
    debuginfo.at(system, ID).write_bytes(b"")
    assert debuginfo.debug_file(binary, system) == debuginfo.at(system, ID)
    own = debuginfo.at(tmp_path / "root" / "usr" / "lib" / "debug", ID)
    own.parent.mkdir(parents=True)
    own.write_bytes(b"")
    assert debuginfo.debug_file(binary, system) == own  # the root's first


def test_perf_and_the_sampler_are_given_the_debug_files_of_a_live_processs_root(tmp_path: Path):
    binary = tmp_path / "root" / "usr" / "bin" / "sleep"
    binary.parent.mkdir(parents=True)
    shutil.copy2(SLEEP, binary)
    own = debuginfo.at(tmp_path / "root" / "usr" / "lib" / "debug", ID)
    own.parent.mkdir(parents=True)
    own.write_bytes(b"")
    child = subprocess.Popen([str(binary), "30"])
    try:
        # until it has exec'd and the kernel has mapped the binary (a paused VM may take seconds): its
        # /proc/PID/exe changes before the ELF's segments are mapped (CI 2026-11-28 read the maps between)
        deadline = time.monotonic() + 30
        while str(binary) not in debuginfo.mapped_files(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        found = debuginfo.root_debug_files(child.pid)
        path = debuginfo_path(child.pid)
        assert str(binary) in debuginfo.mapped_files(child.pid)
    finally:
        child.kill()
        child.wait()
    assert found == {ID: own}
    assert path == f":.debug:/usr/lib/debug:{tmp_path / 'root' / 'usr' / 'lib' / 'debug'}"
    links = buildid_dir(found, tmp_path / "perf-1.debug")
    assert links == tmp_path / "perf-1.debug" and (links / ".build-id" / ID[:2] / ID[2:]).resolve() == own
    assert buildid_dir({}, tmp_path / "none") is None and not (tmp_path / "none").exists()
    assert debuginfo.mapped_files(child.pid) == [] and debuginfo_path(child.pid) == ":.debug:/usr/lib/debug"
