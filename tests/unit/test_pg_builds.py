"""PostgreSQL builds: the autoconf recipe, its key and command lines, the on-disk format of a
postgres version, the bad input refused before anything starts, and the PGO training's .gcda
files moved from GCOV_PREFIX back into the build tree. No server is built here."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflab import servers, spec
from perflab.errors import EXIT_USAGE, SpecError
from perflab.servers.postgresql import train as pgtrain
from perflab.builds import Build, BuildError
from perflab.servers.postgresql import source as PG
from perflab.builds import recipes as R
from perflab.builds import source as S
from perflab.spec.builds import BuildSpec

PG_SRC = S.Source(Path("/nonexistent/pg/tree"), "fingerprint", "debian postgresql-15 15.18-0+deb12u1", "postgresql")
MARIADB_SRC = S.Source(Path("/nonexistent/src/tree"), "fingerprint", "a tree")
HEAD = '[experiment]\nname = "t"\nserver = "postgresql"\n[dataset]\nscale = 1\n[workload]\ntool = "pgbench"\n'
HEAD += 'test = "select-only"\n'


def recipe(**keys: object) -> BuildSpec:
    return BuildSpec.model_validate({"source": "debian", **keys})


def test_debian_flags_keep_debians_amd64_frame_pointers_unless_the_recipe_decides(tmp_path: Path):
    default = PG.flags(recipe(), tmp_path)
    assert default["CFLAGS"].startswith("-fno-omit-frame-pointer ") and "-D_FORTIFY_SOURCE=2" in default["CFLAGS"]
    assert "-fno-omit-frame-pointer" not in PG.flags(recipe(frame_pointers=False), tmp_path)["CFLAGS"]
    assert PG.flags(recipe(flags="none"), tmp_path)["CFLAGS"] == ""


def test_pgo_stages_are_the_same_flags_as_mariadbs(tmp_path: Path):
    generate = PG.flags(recipe(flags="none"), tmp_path, "generate")
    assert generate == {"CFLAGS": "-fprofile-generate -fprofile-update=atomic", "CXXFLAGS": generate["CXXFLAGS"],
                        "LDFLAGS": "-fprofile-generate"}  # fmt: skip
    use = PG.flags(recipe(flags="none"), tmp_path, "use")["CFLAGS"]
    assert use.startswith("-fprofile-use -fprofile-correction -Wno-error=missing-profile")  # profile_use reads it
    assert "-Wno-missing-profile" not in use


def test_the_recipe_is_autoconfs_and_its_key_follows_what_decides_the_binary():
    made = R.recipe(recipe(flags="none"), PG_SRC)  # source.recipe hands a PostgreSQL source to pgsource
    assert made["server"] == "postgresql" and "cmake" not in made and made["configure"] == list(PG.CONFIGURE)
    assert made["compiler_version"].startswith("gcc-12") and made["make_version"].startswith("GNU Make")
    keys = {
        S.key_of(R.recipe(r, PG_SRC, stage))
        for r, stage in [
            (recipe(flags="none"), "plain"),
            (recipe(flags="none", configure=["--with-lz4"]), "plain"),
            (recipe(flags="none", cflags="-O3"), "plain"),
            (recipe(flags="none"), "generate"),
        ]
    }
    assert len(keys) == 4
    extra = R.recipe(recipe(flags="none", configure=["--with-lz4"]), PG_SRC)["configure"]
    assert extra[-1] == "--with-lz4"  # after perflab's: it wins


def test_a_mariadb_recipe_is_unchanged_by_postgresqls():
    """A stored MariaDB build's key must not move: its recipe has exactly the keys it had."""
    made = R.recipe(recipe(flags="none"), MARIADB_SRC)
    assert set(made) == {"recipe_version", "source", "source_fingerprint", "compiler", "compiler_version",
                         "cmake_version", "flags", "cmake", "stage", "profile"}  # fmt: skip
    assert R.recipe(recipe(flags="none", configure=["--with-lz4"]), MARIADB_SRC) == made


def test_command_lines_are_argv_lists_with_one_argument_per_setting(tmp_path: Path):
    made = R.recipe(recipe(cflags="-O3 -march=native"), PG_SRC)
    argv = PG.configure_argv(PG_SRC, made, "gcc-12", tmp_path / "install")
    assert argv[0] == "/nonexistent/pg/tree/configure" and argv[1] == f"--prefix={tmp_path / 'install'}"
    assert "--without-icu" in argv and "--with-system-tzdata=/usr/share/zoneinfo" in argv
    assert "CC=gcc-12" in argv
    cflags = next(a for a in argv if a.startswith("CFLAGS="))
    assert cflags.endswith("-O3 -march=native") and " " in cflags  # one argument, never split by a shell
    assert PG.make_argv(tmp_path, 2) == ["make", "-C", str(tmp_path / "src"), "-j2"]
    assert PG.make_argv(tmp_path, 1, "install")[-1] == "install"


@pytest.mark.parametrize(
    ("version", "fmt"),
    [
        ("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)", "postgresql-15"),
        ("postgres (PostgreSQL) 15.18", "postgresql-15"),  # perflab's own build of the same source
        ("postgres (PostgreSQL) 16.4", "postgresql-16"),  # another major: its own dataset
    ],
)
def test_postgresqls_on_disk_format_is_its_major_version(version: str, fmt: str):
    build = Build(name="b", kind="source", binary=Path("/x/bin/postgres"), version=version, sha256="0" * 64,
                  compiler=None)  # fmt: skip
    assert build.server == "postgresql" and build.format == fmt


def _basedir(root: Path, *binaries: str) -> Path:
    for binary in binaries:
        (root / binary).parent.mkdir(parents=True, exist_ok=True)
        (root / binary).write_text("#!/bin/sh\n")
        (root / binary).chmod(0o755)
    return root


def test_builds_of_the_other_server_are_refused_with_the_key_and_the_fix(tmp_path: Path):
    mariadb_tree = tmp_path / "mariadb"
    mariadb_tree.mkdir()
    (mariadb_tree / "CMakeLists.txt").write_text("")
    mariadb_base = _basedir(tmp_path / "mbase", "sbin/mariadbd")
    no_initdb = _basedir(tmp_path / "noinit", "bin/postgres")
    builds = {
        "deb": recipe(source="debian=1:10.11.18-0+deb12u1"),
        "tree": recipe(source=str(mariadb_tree)),
        "base": BuildSpec.model_validate({"basedir": str(mariadb_base)}),
        "half": BuildSpec.model_validate({"basedir": str(no_initdb)}),
        "pkg": BuildSpec.model_validate({"package": "mariadb-server-core=1:10.11.18-0+deb12u1"}),
        "cm": recipe(cmake={"PLUGIN_X": "NO"}),
        "fine": recipe(source="debian=15.18-0+deb12u1"),
    }
    problems = {p.path: p for p in servers.kind("postgresql").build_problems(builds)}
    assert set(problems) == {"builds.deb.source", "builds.tree.source", "builds.base.basedir",
                             "builds.half.basedir", "builds.pkg.package", "builds.cm.cmake"}  # fmt: skip
    assert "apt-cache showsrc postgresql-15" in problems["builds.deb.source"].hint
    assert "bin/postgres and bin/initdb" in problems["builds.half.basedir"].expected
    pg_base = _basedir(tmp_path / "pgbase", "bin/postgres", "bin/initdb")
    on_mariadb = servers.kind("mariadb").build_problems({"p": BuildSpec.model_validate({"basedir": str(pg_base)}),
                                            "c": recipe(configure=["--with-lz4"])})  # fmt: skip
    assert {p.path for p in on_mariadb} == {"builds.p.basedir", "builds.c.configure"}
    assert not servers.kind("postgresql").build_problems({"ok": BuildSpec.model_validate({"basedir": str(pg_base)})})


def test_an_experiment_with_a_mariadb_build_on_postgresql_exits_2_naming_the_key():
    text = HEAD + '[builds.old]\nsource = "debian=1:10.11.18-0+deb12u1"\n[variants.build]\nold = { build = "old" }\n'
    with pytest.raises(SpecError) as info:
        spec.parse(text, "bad.toml")
    assert info.value.exit_code == EXIT_USAGE
    assert [p.path for p in info.value.problems] == ["builds.old.source"]
    ok = HEAD + '[builds.s]\nsource = "debian"\npgo = true\n[variants.build]\ns = { build = "s" }\n'
    assert spec.parse(ok, "ok.toml").file.builds["s"].pgo


def test_a_basedir_without_a_server_binary_is_refused_at_its_key(tmp_path: Path):
    empty = tmp_path / "empty"
    (empty / "bin").mkdir(parents=True)
    text = HEAD + f'[builds.b]\nbasedir = "{empty}"\n[variants.build]\nb = {{ build = "b" }}\n'
    with pytest.raises(SpecError) as info:
        spec.parse(text, "bad.toml")
    assert info.value.exit_code == EXIT_USAGE
    assert [p.path for p in info.value.problems] == ["builds.b.basedir"]
    assert "bin/postgres" in info.value.problems[0].hint


def test_bad_configure_options_are_refused():
    for bad in (["--prefix=/usr"], ["-O3"], ["--with-x\n"]):
        with pytest.raises(ValueError):
            recipe(configure=bad)


def test_training_counts_move_from_gcov_prefix_back_to_the_objects(tmp_path: Path):
    tree = tmp_path / "work" / "build"
    gcov = tmp_path / "run" / "gcov"
    for name in ("src/backend/main/main.gcda", "src/backend/tcop/postgres.gcda"):
        written = gcov / str(tree / name).lstrip("/")  # libgcov: GCOV_PREFIX + the object's absolute path
        written.parent.mkdir(parents=True)
        written.write_bytes(b"counts")
    (tree / "src/backend/main").mkdir(parents=True)
    assert pgtrain.collect(gcov) == 2
    assert (tree / "src/backend/tcop/postgres.gcda").read_bytes() == b"counts"
    assert not list(gcov.rglob("*.gcda"))


def test_pkglibdir_stays_in_the_prefix_and_an_install_outside_it_fails_the_build(tmp_path: Path):
    """Debian's 50-per-version-dirs.patch sets pkglibdir to /usr/lib/postgresql/15/lib unless
    libdir names postgres: perflab's libdir does, and make install goes to a DESTDIR stage first."""
    made = R.recipe(recipe(flags="none"), PG_SRC)
    argv = PG.configure_argv(PG_SRC, made, "gcc-12", tmp_path / "install")
    assert f"--libdir={tmp_path / 'install'}/lib/postgresql" in argv
    prefix, stage = tmp_path / "install", tmp_path / "stage"
    inside = stage / str(prefix).lstrip("/") / "bin" / "postgres"
    inside.parent.mkdir(parents=True)
    inside.write_text("x")
    PG._unstage("b", stage, prefix, tmp_path / "install.txt")
    assert (prefix / "bin" / "postgres").read_text() == "x" and not stage.exists()
    inside.parent.mkdir(parents=True)
    inside.write_text("x")
    stray = stage / "usr/lib/postgresql/15/lib/plpgsql.so"
    stray.parent.mkdir(parents=True)
    stray.write_text("y")
    with pytest.raises(BuildError, match="/usr/lib/postgresql/15/lib/plpgsql.so") as info:
        PG._unstage("b", stage, prefix, tmp_path / "install.txt")
    assert info.value.step == "install"
