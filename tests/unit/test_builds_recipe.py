"""What a build recipe turns into (flags, cmake options, key) and what a binary says it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflab.builds import Build, server_kind
from perflab.builds import recipes as R
from perflab.builds import source as S
from perflab.spec.builds import BuildSpec

SRC = S.Source(Path("/nonexistent/src/tree"), "fingerprint", "a tree")


def recipe(**keys: object) -> BuildSpec:
    return BuildSpec.model_validate({"source": "debian", **keys})


def test_debian_flags_are_dpkg_buildflags_with_hardening(tmp_path: Path):
    flags = S.flags(recipe(), tmp_path / "build")
    assert "-O2" in flags["CFLAGS"] and "-fstack-protector-strong" in flags["CXXFLAGS"]
    assert "-D_FORTIFY_SOURCE=2" in flags["CFLAGS"]  # CPPFLAGS folded in, as debian/rules does
    assert f"-ffile-prefix-map={tmp_path / 'build'}=." in flags["CFLAGS"]
    assert "-z,relro" in flags["LDFLAGS"]


def test_recipe_flags_come_after_the_base_and_the_users_come_last(tmp_path: Path):
    spec = recipe(flags="none", frame_pointers=True, lto=True, cflags="-O3", ldflags="-Wl,-O1")
    flags = S.flags(spec, tmp_path)
    assert flags["CFLAGS"] == f"{S.FRAME_POINTERS} -flto=auto -O3"
    assert flags["CXXFLAGS"] == f"{S.FRAME_POINTERS} -flto=auto"
    assert flags["LDFLAGS"] == "-flto=auto -Wl,-O1"
    assert S.flags(recipe(flags="none", lto=True, compiler="clang-16"), tmp_path)["CFLAGS"] == "-flto=thin"


def test_frame_pointers_are_the_sources_choice_unless_forced_on_or_off(tmp_path: Path):
    default, on, off = (recipe(flags="none", frame_pointers=v) for v in (None, True, False))
    assert S.flags(default, tmp_path)["CFLAGS"] == "" and S.cmake_options(default) == S.SERVER_CMAKE
    assert S.flags(on, tmp_path)["CXXFLAGS"] == S.FRAME_POINTERS
    # off: -fomit-frame-pointer, and MariaDB's own -fno-omit-frame-pointer (added after ours) kept out
    assert S.flags(off, tmp_path)["CXXFLAGS"] == "-fomit-frame-pointer"
    assert S.cmake_options(off)["have_CXX__fno_omit_frame_pointer"] == "0"
    assert S.cmake_options(off)["have_C__fno_omit_frame_pointer"] == "0"
    assert len({S.key_of(R.recipe(r, SRC)) for r in (default, on, off)}) == 3


@pytest.mark.parametrize(
    ("stage", "compile_flag", "link_flag"),
    [
        ("generate", "-fprofile-generate -fprofile-update=atomic", "-fprofile-generate"),
        ("use", "-fprofile-use -fprofile-correction", "-fprofile-use"),
    ],
)
def test_pgo_stages_add_their_flags(tmp_path: Path, stage: str, compile_flag: str, link_flag: str):
    flags = S.flags(recipe(flags="none", cflags="-DX"), tmp_path, stage)
    assert flags["CFLAGS"].startswith(compile_flag) and flags["CFLAGS"].endswith("-DX")
    assert flags["LDFLAGS"] == link_flag


def test_cmake_options_keep_the_servers_and_let_the_recipe_override():
    options = S.cmake_options(recipe(cmake={"PLUGIN_PERFSCHEMA": "NO", "WITH_URING": False}))
    assert options["BUILD_CONFIG"] == "mysql_release" and options["PLUGIN_PERFSCHEMA"] == "NO"
    assert options["WITH_URING"] == "OFF"  # a bool is ON/OFF


def test_the_key_changes_with_anything_that_decides_the_binary():
    base = {"recipe_version": 1, "source": "s", "flags": {"CFLAGS": "-O2"}, "stage": "plain", "profile": None}
    assert S.key_of(base) == S.key_of(dict(base))
    for change in ({"flags": {"CFLAGS": "-O3"}}, {"stage": "use"}, {"profile": "ab"}, {"source": "t"}):
        assert S.key_of({**base, **change}) != S.key_of(base)


@pytest.mark.parametrize(
    ("version", "kind", "fmt"),
    [
        ("10.11.18-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)", "mariadb", "mariadb-10.11"),
        ("8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)", "mysql", "mysql-8.0"),
        ("8.0.35-27 for Linux on x86_64 (Percona Server (GPL), Release 27)", "percona", "percona-8.0"),
    ],
)
def test_the_server_kind_and_format_come_from_the_version(version: str, kind: str, fmt: str):
    build = Build(None, "basedir", Path("/x/mysqld"), version, "0" * 64, None)
    assert server_kind(version) == kind and build.format == fmt


@pytest.mark.parametrize(
    "bad",
    [
        {"source": "debian", "compiler": "gcc"},
        {"source": "debian", "cmake": {"CMAKE_C_FLAGS": "-O3"}},
        {"source": "debian", "cmake": {"bad name": "1"}},
        {"source": "debian", "train_duration": "10s"},
        {"source": "debian", "cflags": "-O2\n-O3"},
        {"basedir": "relative/path"},
        {},
    ],
)
def test_bad_recipes_are_refused(bad: dict):
    with pytest.raises(ValueError):
        BuildSpec.model_validate(bad)


def test_a_pgo_trainings_identity_survives_new_unset_keys():
    """Stored profiles are found by this hash: a change to it rebuilds every PGO build (about 80
    min each here). The value is the one examples/pgo.toml's profile was stored under
    (2026-11-22), before `dataset.scale` existed."""
    from perflab import spec
    from perflab.builds.resolve import training_id

    file = spec.load(Path(__file__).parents[2] / "examples" / "pgo.toml").file
    assert training_id(file, file.builds["pgo"]) == "fde22300cd68dff0"
    longer = file.builds["pgo"].model_copy(update={"train_duration": 60.0})
    assert training_id(file, longer) != "fde22300cd68dff0"


def test_a_stored_profile_whose_data_changed_is_trained_again(tmp_path: Path):
    """profile.json names the profile's hash; .gcda files deleted or changed since would give the
    profile-use build another profile than its key says (or none): it is not used."""
    from perflab.builds import pgo as G

    instrumented = Build(None, "source", tmp_path / "mariadbd", "v", "0" * 64, None, extra={"key": "k"})
    home = G.profile_dir(tmp_path, instrumented, "training")
    (home / "data" / "sql").mkdir(parents=True)
    (home / "data" / "sql" / "main.c.gcda").write_bytes(b"counts")
    digest = G.profile_hash(home / "data")
    (home / "profile.json").write_text(f'{{"hash": "{digest}", "files": 1}}')
    assert G.stored_profile(tmp_path, instrumented, "training") == (digest, home / "data")
    (home / "data" / "sql" / "main.c.gcda").unlink()
    assert G.stored_profile(tmp_path, instrumented, "training") is None
