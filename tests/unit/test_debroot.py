"""Private roots without the network (builds/debroot.py, aptindex.py): the package and suite
arguments, what apt prints (recorded in tests/data/debroot/ by tests/data/regen_debroot.py),
the private apt configuration, the cache key, the manifest and the loader's argv. The real sid
root is tests/integration/test_debroot_real.py."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from perflab.errors import EXIT_ENVIRONMENT, EXIT_USAGE, UsageError
from perflab.builds import aptindex as A
from perflab.builds import debroot as D

DATA = Path(__file__).resolve().parent.parent / "data" / "debroot"
LOADER_LINE = "ld.so (Debian GLIBC 2.43-7) stable release version 2.43.\nCopyright (C) 2026 Free Software Foundation"


def recorded(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("mysql-server-core", ("mysql-server-core", None)),
        ("mysql-server-core=9.7.4-2", ("mysql-server-core", "9.7.4-2")),
        ("mariadb-server-core=1:11.8.9+ds-4", ("mariadb-server-core", "1:11.8.9+ds-4")),
        ("libstdc++6=16.2.0-4", ("libstdc++6", "16.2.0-4")),
    ],
)
def test_a_package_is_a_name_with_an_optional_version(spec: str, parsed: tuple[str, str | None]):
    assert D.parse_spec(spec) == parsed


@pytest.mark.parametrize(
    "spec", ["", "-oAPT::Get::AllowUnauthenticated=1", "mysql-server-core=", "Mysql", "a b", "x=1;rm"]
)
def test_anything_else_is_refused_before_apt_sees_it(spec: str):
    with pytest.raises(UsageError) as raised:
        D.parse_spec(spec)
    assert raised.value.exit_code == EXIT_USAGE
    assert "NAME or NAME=VERSION" in raised.value.message and "mysql-server-core=9.7.4-2" in raised.value.hint


def test_an_unknown_suite_is_exit_2_naming_the_known_ones(tmp_path: Path):
    with pytest.raises(UsageError) as raised:
        D.make_root("mysql-server-core", "stretch", tmp_path)
    assert raised.value.exit_code == EXIT_USAGE
    assert "'stretch'" in raised.value.message
    assert raised.value.hint == "use one of: bookworm, bookworm-backports, trixie, sid"
    assert not (tmp_path / "debroot").exists()  # refused before any directory or apt


def test_a_version_the_suite_lacks_is_exit_2_listing_the_ones_it_has():
    have = A.parse_madison(recorded("madison.txt"))
    assert have == {"mysql-server-core": ["9.7.4-2"], "mariadb-server-core": ["1:11.8.9+ds-4"]}
    D.check_versions([("mysql-server-core", "9.7.4-2"), ("mariadb-server-core", None)], have, "sid")
    with pytest.raises(UsageError) as raised:
        D.check_versions([("mysql-server-core", "9.7.0-1")], have, "sid")
    assert raised.value.exit_code == EXIT_USAGE
    assert raised.value.message == "sid has no mysql-server-core=9.7.0-1; it has 9.7.4-2"
    assert raised.value.hint == 'use "mysql-server-core=9.7.4-2", or "mysql-server-core" for the newest'
    with pytest.raises(UsageError, match="sid has no package 'mysql-server'"):
        D.check_versions([("mysql-server", None)], have, "sid")


def test_the_closure_apt_resolves_holds_libc6_and_names_each_download():
    packages = A.parse_simulation(recorded("simulate.txt"))
    versions = {p.name: p.version for p in packages}
    assert len(packages) == 55 and len(versions) == 55
    assert versions["mysql-server-core"] == "9.7.4-2"
    assert versions["libc6"] == "2.43-7"  # "Inst libc6 (2.43-7 Debian:unstable [amd64]) []"
    assert {p.arch for p in packages} == {"amd64", "all"}
    crypt = next(p for p in packages if p.name == "libcrypt1")
    assert crypt.deb == "libcrypt1_1%3a4.5.2+20251210-1_amd64.deb"  # apt writes an epoch's colon as %3a


def test_unresolvable_dependencies_are_exit_3_in_apts_words():
    error = A.unresolvable(["mysql-server-core", "mariadb-server-core"], "sid", recorded("conflict.txt"))
    assert error.exit_code == EXIT_ENVIRONMENT
    first, *rest = error.message.splitlines()
    assert first == (
        "apt cannot resolve mysql-server-core mariadb-server-core in sid: "
        "unmet dependencies of mariadb-server-core, mysql-server-core"
    )
    assert " mysql-server-core : Conflicts: mariadb-server-core but 1:11.8.9+ds-4 is to be installed" in rest
    assert rest[-1] == "E: Unable to correct problems, you have held broken packages."
    assert A.parse_simulation(recorded("conflict.txt")) == []


def test_an_apt_failure_without_an_unmet_block_keeps_its_last_lines():
    error = A.unresolvable(["nosuch"], "sid", "Reading package lists...\nE: Unable to locate package nosuch\n")
    assert error.message == "apt cannot resolve nosuch in sid\nE: Unable to locate package nosuch"


def test_the_private_apt_configuration_reads_and_writes_nothing_of_the_systems(tmp_path: Path):
    index = tmp_path / "debroot" / "index" / "sid"
    text = A.apt_conf(index, {"Acquire::Check-Valid-Until": "false"})
    settings = A.SETTING_RE.findall(text)
    directories = {key: value for key, value in settings if key.startswith("Dir::")}
    assert directories.pop("Dir::Etc::Main") == "/dev/null"
    assert all(value.startswith(f"{index}/") for value in directories.values()), directories
    for key in ("Dir::Etc::Parts", "Dir::Etc::SourceParts", "Dir::State::status", "Dir::Cache", "Dir::State"):
        assert key in directories
    assert ("APT::Architecture", "amd64") in settings and 'APT::Architectures { "amd64"; };' in text
    assert ("Acquire::Check-Valid-Until", "false") in settings  # inherited, last: it wins
    assert "AllowUnauthenticated" not in text and "trusted=yes" not in text


def test_only_the_inherited_system_settings_are_kept():
    kept = A.system_settings()
    assert set(kept) <= set(A.INHERITED)


def test_the_key_is_the_suite_and_the_resolved_versions():
    packages = A.parse_simulation(recorded("simulate.txt"))
    key = D.root_key("sid", packages)
    assert len(key) == 16 and key == D.root_key("sid", list(reversed(packages)))
    assert D.root_key("trixie", packages) != key
    bumped = [A.Package(p.name, "2.43-8", p.arch) if p.name == "libc6" else p for p in packages]
    assert D.root_key("sid", bumped) != key


def fake_root(tmp_path: Path, key: str = "0123456789abcdef") -> D.Root:
    tree = tmp_path / "roots" / key / "root"
    (tree / "usr" / "lib" / "x86_64-linux-gnu").mkdir(parents=True)
    loader = tree / "usr" / "lib" / "x86_64-linux-gnu" / D.LOADER
    loader.write_text(f"#!/bin/sh\necho '{LOADER_LINE}'\n")
    loader.chmod(0o755)
    (tree / "usr" / "lib64").mkdir()
    (tree / "usr" / "lib64" / D.LOADER).symlink_to(f"../lib/x86_64-linux-gnu/{D.LOADER}")
    return D.Root(
        dir=tree,
        loader=loader,
        library_path=(tree / "usr" / "lib" / "x86_64-linux-gnu",),
        glibc_version="2.43",
        packages={"libc6": "2.43-7", "mysql-server-core": "9.7.4-2"},
        suite="sid",
        key=key,
    )


def test_the_manifest_round_trips_and_only_a_complete_current_one_counts(tmp_path: Path):
    root = fake_root(tmp_path)
    home = root.dir.parent
    assert D.read_root(home) is None  # no manifest: not a root
    data = D.manifest(root, ["mysql-server-core"], 8.04)
    assert data["format"] == D.FORMAT == 1
    assert data["loader"] == "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    assert data["library_path"] == ["usr/lib/x86_64-linux-gnu"]
    assert data["packages"] == [
        {"name": "libc6", "version": "2.43-7"},
        {"name": "mysql-server-core", "version": "9.7.4-2"},
    ]
    assert (data["glibc_version"], data["suite"], data["key"], data["setup_s"]) == ("2.43", "sid", root.key, 8.0)
    D._write_manifest(home, data)
    assert D.read_root(home) == root
    D._write_manifest(home, {**data, "format": 2})  # a format this perflab does not know: made again
    assert D.read_root(home) is None
    D._write_manifest(home, {**data, "key": "fedcba9876543210"})  # not the key it is stored under
    assert D.read_root(home) is None
    D._write_manifest(home, data)
    root.loader.unlink()
    assert D.read_root(home) is None


def test_a_binary_runs_through_the_roots_loader_with_the_roots_libraries(tmp_path: Path):
    root = fake_root(tmp_path)
    lib = str(root.dir / "usr/lib/x86_64-linux-gnu")
    assert root.argv("usr/sbin/mysqld", ["--version"]) == [
        f"{lib}/ld-linux-x86-64.so.2", "--inhibit-cache", "--library-path", lib, f"{root.dir}/usr/sbin/mysqld", "--version"
    ]  # fmt: skip
    assert root.argv(root.dir / "usr/bin/x")[-1] == f"{root.dir}/usr/bin/x"


def test_the_loader_is_the_real_file_and_its_version_is_glibcs(tmp_path: Path):
    root = fake_root(tmp_path)
    assert D.find_loader(root.dir) == root.loader  # not the usr/lib64 symlink
    assert D.glibc_version(root.loader) == "2.43"
    root.loader.unlink()
    with pytest.raises(A.RootError) as raised:
        D.find_loader(root.dir)
    assert raised.value.exit_code == EXIT_ENVIRONMENT and D.LOADER in raised.value.message


def test_a_bookworm_style_absolute_symlink_is_never_taken_for_the_loader(tmp_path: Path):
    tree = tmp_path / "root"
    (tree / "lib64").mkdir(parents=True)
    (tree / "lib64" / D.LOADER).symlink_to(f"/lib/x86_64-linux-gnu/{D.LOADER}")  # the system's
    with pytest.raises(A.RootError):
        D.find_loader(tree)


def test_set_id_bits_are_dropped_from_an_unpacked_tree(tmp_path: Path):
    tool = tmp_path / "usr" / "bin" / "tool"
    tool.parent.mkdir(parents=True)
    tool.write_text("")
    os.chmod(tool, 0o6755)
    D._drop_setid(tmp_path)
    assert stat.S_IMODE(tool.stat().st_mode) == 0o755


def test_a_remembered_resolution_lasts_until_the_next_update(tmp_path: Path):
    index = tmp_path / "index"
    index.mkdir()
    (index / "updated").write_text("2026-11-27T15:00:00+00:00\n")
    D._remember(index, "mysql-server-core", "0123456789abcdef")
    D._remember(index, "mysql-server-core=9.7.4-2", "0123456789abcdef")
    assert D._resolved(index) == {
        "mysql-server-core": "0123456789abcdef",
        "mysql-server-core=9.7.4-2": "0123456789abcdef",
    }
    (index / "updated").write_text("2026-11-28T15:00:00+00:00\n")
    assert D._resolved(index) == {}


def test_an_index_is_fresh_for_a_day(tmp_path: Path):
    assert A.age(tmp_path) == float("inf") and A.updated(tmp_path) is None
    (tmp_path / "updated").write_text("2026-11-27T15:00:00+00:00\n")
    assert A.age(tmp_path) < 60 < A.FRESH_S == 24 * 3600
    os.utime(tmp_path / "updated", (0, 0))
    assert A.age(tmp_path) > A.FRESH_S


# apt-get update's words (2026-11-27): sid against a keyring without its keys, and sid's expired
# Release file with Acquire::Check-Valid-Until true
UNSIGNED = """\
Err:1 http://deb.debian.org/debian sid InRelease
  The following signatures couldn't be verified because the public key is not available: NO_PUBKEY 6ED0E7B82643E131
E: The repository 'http://deb.debian.org/debian sid InRelease' is not signed."""
EXPIRED = "E: Release file for http://deb.debian.org/debian/dists/sid/InRelease is expired (invalid since 21d 7h)."


def test_a_failed_update_says_whether_the_signature_the_expiry_or_the_network_failed():
    assert "does not verify against /usr/share/keyrings/debian-archive-keyring.gpg" in A.update_hint(UNSIGNED)
    assert "never skips the check" in A.update_hint(UNSIGNED)
    assert "Valid-Until" in A.update_hint(EXPIRED)
    assert A.update_hint("E: Failed to fetch http://deb.debian.org/debian/dists/sid/InRelease") == A.NETWORK_HINT
