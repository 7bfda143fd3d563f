"""glibc as an axis and servers from another suite's private root, without the network
(issue 34 items 3-4): the file's rules, a binary's symbol-version needs, the C library a server
mapped, the glibc build and PostgreSQL's wrappers. The real thing: tests/integration/
test_sid_servers_real.py."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from perflab import elf, preflight
from perflab.errors import SpecError
from perflab.run import allocator_proof
from perflab.builds import Build, BuildError, debroot, glibc
from perflab.spec import parse

SYSTEM_LIBC = Path("/usr/lib/x86_64-linux-gnu/libc.so.6")
SYSTEM_VERSION = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]  # "2.36"

HEAD = """
[experiment]
name = "g"
"""


def test_a_glibc_variant_reaches_its_cells_and_the_others_keep_their_own():
    exp = parse(HEAD + '[variants.libc]\nbookworm = {}\nsid = { glibc = "sid" }\n')
    assert {c.variant["libc"]: c.glibc for c in exp.cells()} == {"bookworm": None, "sid": "sid"}


def test_two_axes_naming_two_suites_are_refused():
    text = HEAD + '[variants.a]\nx = { glibc = "sid" }\n[variants.b]\ny = { glibc = "trixie" }\n'
    with pytest.raises(SpecError, match="glibc to both sid and trixie"):
        parse(text)


@pytest.mark.parametrize("same_axis", [True, False])
def test_glibc_on_a_build_from_a_private_root_is_refused(same_axis: bool):
    builds = '[builds.m]\npackage = "mysql-server-core"\nsuite = "sid"\n'
    variants = (
        '[variants.server]\nm = { build = "m", glibc = "sid" }\n'
        if same_axis
        else '[variants.server]\nm = { build = "m" }\nmariadb = {}\n[variants.libc]\nsid = { glibc = "sid" }\n'
    )
    with pytest.raises(SpecError) as caught:
        parse(HEAD + builds + variants)
    text = str(caught.value) + (caught.value.hint or "") + repr(caught.value.problems)
    assert "glibc" in text and "builds.m runs from its own sid private root" in text


def test_an_unknown_suite_is_refused_with_the_known_ones():
    with pytest.raises(SpecError) as caught:
        parse(HEAD + '[variants.libc]\nold = { glibc = "jessie" }\n')
    assert "sid" in repr(caught.value.problems) and "jessie" in repr(caught.value.problems)


def test_symbol_versions_are_read_per_library():
    needs = elf.version_needs(Path("/bin/ls"))
    assert "GLIBC_2.2.5" in needs["libc.so.6"]  # x86_64's first glibc symbol version
    newest = elf.glibc_needed(Path("/bin/ls"))
    assert newest is not None and (2, 3) <= newest <= tuple(int(p) for p in SYSTEM_VERSION.split("."))
    assert elf.version_needs(Path("/etc/hostname")) == {} and elf.glibc_needed(Path("/etc/hostname")) is None


def test_a_basedir_needing_a_newer_glibc_is_refused_naming_the_symbol_version(tmp_path, monkeypatch):
    (tmp_path / "sbin").mkdir()
    shutil.copy("/bin/ls", tmp_path / "sbin" / "mariadbd")  # an ELF whose needs are known
    needed = ".".join(map(str, elf.glibc_needed(Path("/bin/ls"))))
    exp = parse(HEAD + f'[builds.b]\nbasedir = "{tmp_path}"\n[variants.server]\nb = {{ build = "b" }}\n')
    assert preflight._glibc_too_old(exp) == []  # this system's C library runs it
    monkeypatch.setattr(preflight.os, "confstr", lambda name: "glibc 2.2")
    (problem,) = preflight._glibc_too_old(exp)
    assert problem.path == "builds.b.basedir" and f"GLIBC_{needed}" in problem.found and "2.2" in problem.expected
    # with a glibc variant, its cells run another C library: not this system's to judge
    with_libc = HEAD + f'[builds.b]\nbasedir = "{tmp_path}"\n[variants.server]\nb = {{ build = "b", glibc = "sid" }}\n'
    assert preflight._glibc_too_old(parse(with_libc)) == []


def test_the_mapped_c_library_says_its_own_version(tmp_path):
    mapped = allocator_proof.libc_mapped({str(SYSTEM_LIBC), "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"})
    assert mapped is not None and mapped["library"] == str(SYSTEM_LIBC) and mapped["version"] == SYSTEM_VERSION
    assert mapped["build"].startswith("Debian GLIBC ")
    fake = tmp_path / "libc.so.6"
    fake.write_bytes(b"\0ELF junk GNU C Library (Debian GLIBC 2.43-7) stable release version 2.43.\0")
    assert allocator_proof.libc_mapped({str(fake)})["version"] == "2.43"
    fake.write_bytes(b"no version here")
    assert allocator_proof.libc_mapped({str(fake)}) == {"library": str(fake), "version": None, "build": None}
    assert allocator_proof.libc_mapped({"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}) is None


def _root(tmp_path: Path, suite: str = "sid") -> debroot.Root:
    base = tmp_path / "root"
    (base / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    return debroot.Root(base, base / "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
                        (base / "usr/lib/x86_64-linux-gnu",), "2.43", {"libc6": "2.43-7"}, suite, "k1")  # fmt: skip


def _installed() -> Build:
    return Build(name=None, kind="installed", binary=Path("/usr/sbin/mariadbd"), version="10.11.19-MariaDB-0+deb12u1", sha256="ab" * 32, compiler=None)


def test_a_glibc_build_is_the_same_binary_through_the_suites_loader(tmp_path):
    libc = _root(tmp_path)
    build = glibc.with_glibc(_installed(), libc)
    assert build.binary == Path("/usr/sbin/mariadbd") and build.format == _installed().format
    assert build.extra["glibc"] == "sid" and build.extra["root"]["glibc_version"] == "2.43"
    assert build.launcher[0] == str(libc.loader) and build.launcher[-1] == str(libc.library_path[0])
    rooted = dataclasses.replace(_installed(), name="m", extra={"root": {**libc.record(), "suite": "trixie"}})
    with pytest.raises(BuildError, match="its own trixie private root"):
        glibc.with_glibc(rooted, libc)


def test_postgresql_programs_in_a_root_run_through_wrappers(tmp_path, monkeypatch):
    """Each program gets a wrapper that execs the loader (here the system's) with the program;
    all but postgres with --argv0 "$0", so initdb finds postgres's wrapper beside its own."""
    from perflab.servers.postgresql import user
    from perflab.servers.postgresql.rooted import ShadowBin

    monkeypatch.setattr(user, "run_user", lambda: None)  # as a user: the root is reachable
    base = tmp_path / "root"
    bindir = base / "usr/lib/postgresql/18/bin"
    bindir.mkdir(parents=True)
    (base / "usr/share/postgresql/18").mkdir(parents=True)
    for name in ("postgres", "initdb"):
        shutil.copy("/bin/echo", bindir / name)
    loader = Path(os.path.realpath("/lib64/ld-linux-x86-64.so.2"))
    record = {"dir": str(base), "loader": os.path.relpath(loader, base), "library_path": [],
              "suite": "sid", "key": "k2", "glibc_version": "2.36"}  # fmt: skip
    build = Build(name="pg18", kind="package", binary=bindir / "postgres", version="postgres (PostgreSQL) 18.6", sha256="cd" * 32, compiler=None,
                  extra={"root": record})  # fmt: skip
    shadow = ShadowBin.make(build, tmp_path / "work")
    assert shadow.real("postgres") == bindir / "postgres"
    wrappers = {p.name: p.read_text() for p in shadow.bindir.iterdir()}
    assert set(wrappers) == {"postgres", "initdb"}
    assert '--argv0 "$0"' in wrappers["initdb"] and "--argv0" not in wrappers["postgres"]
    out = subprocess.run([shadow.bindir / "postgres", "it", "runs"], capture_output=True, text=True, check=True)
    assert out.stdout == "it runs\n"
    share = shadow.bindir.parents[3] / "share"  # initdb finds its input files from its own path
    assert (share / "postgresql/18").is_dir() and share.resolve() == (base / "usr/share").resolve()


def test_this_systems_postgres_with_a_roots_c_library_gets_wrappers_too(tmp_path, monkeypatch):
    """[variants] glibc on PostgreSQL: the program is the system's (outside the root), its loader
    and C library the root's; its share/ stays the system's."""
    from perflab.servers.postgresql import user
    from perflab.servers.postgresql.rooted import ShadowBin

    monkeypatch.setattr(user, "run_user", lambda: None)
    system_bin = tmp_path / "usr/lib/postgresql/15/bin"  # stands for /usr/lib/postgresql/15/bin
    system_bin.mkdir(parents=True)
    shutil.copy("/bin/echo", system_bin / "postgres")
    libc = _root(tmp_path / "libc")
    build = glibc.with_glibc(dataclasses.replace(_installed(), binary=system_bin / "postgres"), libc)
    shadow = ShadowBin.make(build, tmp_path / "work")
    assert shadow.real("postgres") == system_bin / "postgres"
    assert shadow.bindir == tmp_path / "work/pg-roots/k1/shadow" / system_bin.relative_to("/")
    wrapper = (shadow.bindir / "postgres").read_text()
    assert str(libc.loader) in wrapper and str(system_bin / "postgres") in wrapper
    assert (tmp_path / "work/pg-roots/k1/shadow/usr/share").resolve() == Path("/usr/share").resolve()
