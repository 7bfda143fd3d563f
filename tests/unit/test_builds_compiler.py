"""Which compiler built a server binary, and where that was read (builds.compiler_of): its
.comment section; when stripped (Debian's packages), its -dbgsym debug file's or its package's
buildinfo; else null with the reason, "none: stripped". Small binaries compiled here stand in."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest

import perflab.builds as B

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("objcopy") is None, reason="needs gcc")


def compiled(path: Path) -> Path:
    """A tiny binary with a build ID and a .comment section ("GCC: (Debian ...) ...")."""
    path.parent.mkdir(parents=True, exist_ok=True)
    source = path.parent / "main.c"
    source.write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-g", "-Wl,--build-id", "-o", str(path), str(source)], check=True)
    return path


def stripped(path: Path) -> Path:
    subprocess.run(["objcopy", "--strip-debug", "--remove-section=.comment", str(path)], check=True)
    return path


def test_an_unstripped_binary_names_its_compiler_from_comment(tmp_path: Path):
    compiler, source = B.compiler_of(compiled(tmp_path / "mariadbd"))
    assert compiler is not None and compiler.startswith("GCC: ") and source == ".comment"


def test_a_stripped_binary_records_why_it_has_no_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(B, "DEBUG_ROOT", tmp_path / "no-debug")
    binary = stripped(compiled(tmp_path / "mariadbd"))
    assert B.compiler_of(binary) == (None, "none: stripped")
    build = B.describe(binary, name=None, kind="installed")
    assert build.compiler is None and build.record()["compiler_source"] == "none: stripped"


def test_a_stripped_binary_takes_its_compiler_from_its_dbgsym_debug_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    binary = compiled(tmp_path / "mariadbd")
    build_id = subprocess.run(["readelf", "-n", str(binary)], capture_output=True, text=True, check=True).stdout
    hex_id = build_id.split("Build ID:")[1].split()[0]
    debug = tmp_path / "debug" / ".build-id" / hex_id[:2] / f"{hex_id[2:]}.debug"
    debug.parent.mkdir(parents=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(binary), str(debug)], check=True)  # as dh_strip does
    stripped(binary)
    monkeypatch.setattr(B, "DEBUG_ROOT", tmp_path / "debug")
    compiler, source = B.compiler_of(binary)
    assert compiler is not None and compiler.startswith("GCC: ") and source == f"dbgsym: {debug}"


DH_BUILDINFO = """\
Desired=Unknown/Install/Remove/Purge/Hold
||/ Name           Version      Architecture Description
ii  cmake          3.25.1-1     amd64        cross-platform, open-source make system
ii  g++-12         12.2.0-14    amd64        GNU C++ compiler
ii  gcc-12         12.2.0-14    amd64        GNU C compiler
"""
DEB_BUILDINFO = """\
Format: 1.0
Source: mariadb
Installed-Build-Depends:
 binutils (= 2.40-2),
 gcc-12 (= 12.2.0-14+deb12u1),
 g++-12 (= 12.2.0-14+deb12u1),
 make (= 4.3-4.1),
"""


def test_a_stripped_unpacked_package_takes_its_compiler_from_its_buildinfo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(B, "DEBUG_ROOT", tmp_path / "no-debug")
    root = tmp_path / "packages" / "mariadb-server-core_1" / "root"
    binary = stripped(compiled(root / "usr" / "sbin" / "mariadbd"))
    doc = root / "usr" / "share" / "doc" / "mariadb-server-core"
    doc.mkdir(parents=True)
    (doc / "buildinfo_amd64.gz").write_bytes(gzip.compress(DH_BUILDINFO.encode()))
    assert B.compiler_of(binary) == ("g++-12 12.2.0-14", f"buildinfo: {doc / 'buildinfo_amd64.gz'}")


def test_a_debian_buildinfo_names_the_cxx_compiler_first(tmp_path: Path):
    (tmp_path / "mariadb_1_amd64.buildinfo").write_text(DEB_BUILDINFO)
    assert B.compiler_in_buildinfo(tmp_path / "mariadb_1_amd64.buildinfo") == "g++-12 12.2.0-14+deb12u1"
    (tmp_path / "none.buildinfo").write_text("Format: 1.0\nInstalled-Build-Depends:\n make (= 4.3-4.1),\n")
    assert B.compiler_in_buildinfo(tmp_path / "none.buildinfo") is None


def test_a_manifest_written_before_compiler_source_reads_as_unknown():
    old = {"name": "x", "kind": "source", "binary": "/b", "version": "v", "sha256": "0", "compiler": "GCC: 12"}
    build = B.Build.from_manifest(old)
    assert build.compiler_source is None and "compiler_source" not in build.extra


def test_the_report_says_where_a_compiler_not_in_the_binary_was_read():
    from perflab.report.model import build_facts

    build = {"name": "old", "version": "10.11.18-MariaDB", "kind": "package", "sha256": "0" * 64}
    found = {**build, "compiler": "g++-12 12.2.0-14", "compiler_source": "buildinfo: /usr/share/doc/x/buildinfo.gz"}
    facts = dict(build_facts({"builds": {"old": found, "stripped": {**build, "compiler": None}}}, []))
    assert facts["old"].endswith("g++-12 12.2.0-14 (from its buildinfo)")
    assert facts["stripped"].endswith("compiler unknown (.comment stripped)")
