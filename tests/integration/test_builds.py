"""Builds as variants: the pipeline on a tiny cmake fixture (source -> configure -> build ->
install -> cache hit -> PGO generate/train/use), another Debian package version unpacked
into the cache, a basedir, and the bad input of each. No database server is built here
(CI must not build MariaDB): the fixture has the server's layout (sql/mariadbd, its
errmsg.sys, charsets) around a small C program."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from perflab.errors import EnvironmentProblem, SpecError, ToolMissingError
from perflab.builds import BuildError, sha256
from perflab.cache import cache_root, writable_cache
from perflab.builds import package as P
from perflab.builds import pgo as G
from perflab.builds import resolve as R
from perflab.builds import recipes as K
from perflab.builds import source as S
from perflab.builds.fetch import fetch
from perflab.spec import parse
from perflab.spec.builds import BuildSpec
from tests.archive import installed_version, mariadb_says, other_version, upstream
from tests.conftest import perflab
from tests.integration.helpers import write_experiment



def old_package() -> str:
    """Another version of the installed server that apt serves now (bookworm's, beside the installed
    bookworm-security one), as a `package` build names it."""
    return f"mariadb-server-core={other_version('mariadb-server-core')}"


def old_says() -> str:
    """What that version's mariadbd calls itself: "10.11.18-MariaDB-0+deb12u1"."""
    return mariadb_says(other_version("mariadb-server-core"))


def installed_says() -> str:
    return upstream(installed_version("mariadb-server-core")) + "-MariaDB"  # "10.11.19-MariaDB"


MAIN_C = r"""
#include <stdio.h>
#include <string.h>
static long work(long n) { long s = 0; for (long i = 0; i < n; i++) s += (i % 7 == 0) ? i : -1; return s; }
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("%s  Ver 10.11.99-MariaDB-fixture for debian-linux-gnu on x86_64 (test)\n", argv[0]);
        return 0;
    }
    printf("%ld\n", work(argc > 1 ? 1000000 : 10));
    return 0;
}
"""


def fixture_tree(root: Path, body: str = MAIN_C) -> Path:
    (root / "sql" / "share" / "charsets").mkdir(parents=True)
    (root / "sql" / "share" / "charsets" / "Index.xml").write_text("<charsets/>\n")
    (root / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(fixture C)\nadd_subdirectory(sql)\n"
    )
    (root / "sql" / "CMakeLists.txt").write_text(
        textwrap.dedent(
            """\
            add_executable(mariadbd main.c)
            add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/share/english/errmsg.sys
                COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/share/english
                COMMAND ${CMAKE_COMMAND} -E touch ${CMAKE_CURRENT_BINARY_DIR}/share/english/errmsg.sys)
            add_custom_target(GenError DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/share/english/errmsg.sys)
            add_dependencies(mariadbd GenError)
            """
        )
    )
    (root / "sql" / "main.c").write_text(body)
    return root


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PERFLAB_CACHE", str(tmp_path / "cache"))
    return writable_cache(cache_root())


def events() -> tuple[list[tuple[str, dict]], S.Listener]:
    heard: list[tuple[str, dict]] = []
    return heard, lambda event, data: heard.append((event, data))


def spec(tree: Path, **recipe: object) -> BuildSpec:
    return BuildSpec.model_validate({"source": str(tree), "flags": "none", **recipe})


def test_a_source_build_is_configured_built_installed_and_then_cached(tmp_path: Path, cache: Path):
    tree = fixture_tree(tmp_path / "src")
    heard, listen = events()
    src = fetch(str(tree), cache, "mine")
    first = K.build("mine", spec(tree, cflags="-O1"), src, cache, listen)
    assert first.binary.is_file() and first.binary.parent.name == "sbin"
    assert first.version.startswith("10.11.99-MariaDB-fixture") and first.format == "mariadb-10.11"
    assert first.compiler is not None and first.compiler.startswith("GCC: ")  # from .comment
    assert first.compiler_source == ".comment" and first.record()["compiler_source"] == ".comment"
    assert (first.share / "english" / "errmsg.sys").is_file() and (first.share / "charsets" / "Index.xml").is_file()
    assert first.recipe is not None and "-O1" in first.recipe["flags"]["CFLAGS"]
    steps = [d["step"] for e, d in heard if e == "build_step"]
    assert steps == ["configure", "build", "install"]
    assert any(e == "build_progress" and d["fraction"] == 1.0 for e, d in heard)  # make's [100%]
    logs = cache / "builds" / first.extra["key"] / "logs"
    assert "Built target mariadbd" in (logs / "build.txt").read_text()
    # compiled through ccache (an interrupted build resumes), into the cache's own ccache directory
    assert "-DCMAKE_C_COMPILER_LAUNCHER=ccache" in (logs / "configure.txt").read_text()
    assert any((cache / "ccache").rglob("*")), "ccache wrote into the build cache"

    heard.clear()
    started = time.monotonic()
    again = K.build("again", spec(tree, cflags="-O1"), fetch(str(tree), cache, "again"), cache, listen)
    assert again.sha256 == first.sha256 and again.name == "again" and heard == []  # nothing rebuilt
    assert time.monotonic() - started < 5
    other = K.build("o2", spec(tree, cflags="-O2"), src, cache, listen)  # another recipe: another key
    assert other.extra["key"] != first.extra["key"]
    assert R.status("x", spec(tree, cflags="-O1"), cache).startswith("cached")
    assert R.status("x", spec(tree, cflags="-O3"), cache).startswith("to build")


def test_an_interrupted_build_goes_on_in_its_tree_and_another_recipe_starts_afresh(tmp_path: Path, cache: Path):
    tree = fixture_tree(tmp_path / "src")
    src = fetch(str(tree), cache, "mine")
    first = K.build("mine", spec(tree, cflags="-O1"), src, cache, lambda *_: None)
    home = cache / "builds" / first.extra["key"]
    (home / "build.json").unlink()  # as if stopped before its manifest was written
    shutil.rmtree(cache / "ccache")  # and nothing cached: only the tree can spare the compiler
    again = K.build("mine", spec(tree, cflags="-O1"), src, cache, lambda *_: None)
    assert again.sha256 == first.sha256 and again.extra["resumed"] and not first.extra["resumed"]
    assert "Building C object" not in (home / "logs" / "build.txt").read_text()  # make had nothing to do
    other = K.build("o2", spec(tree, cflags="-O2"), src, cache, lambda *_: None)
    assert "Building C object" in (cache / "builds" / other.extra["key"] / "logs" / "build.txt").read_text()
    assert (src.work / "build" / ".perflab-key").read_text().strip() == other.extra["key"]


def test_a_changed_source_tree_is_another_build(tmp_path: Path, cache: Path):
    tree = fixture_tree(tmp_path / "src")
    before = fetch(str(tree), cache, "x").fingerprint
    time.sleep(0.01)
    (tree / "sql" / "main.c").write_text(MAIN_C.replace("i % 7", "i % 5"))
    assert fetch(str(tree), cache, "x").fingerprint != before


def test_pgo_trains_the_instrumented_build_and_keys_the_final_build_on_its_profile(tmp_path: Path, cache: Path):
    tree = fixture_tree(tmp_path / "src")
    src = fetch(str(tree), cache, "pgo")
    trained: list[Path] = []

    def train(build):  # the fixture's "workload": it exits cleanly, so libgcov writes the .gcda
        trained.append(build.binary)
        return subprocess.run([str(build.binary), "train"], check=True, capture_output=True, text=True).stdout

    _, listen = events()
    final = G.pgo("pgo", spec(tree, pgo=True), src, cache, listen, train, "t1")
    assert len(trained) == 1
    assert "-fprofile-generate" in K.recipe(spec(tree), src, "generate")["flags"]["CFLAGS"]
    assert final.recipe["stage"] == "use" and "-fprofile-use" in final.recipe["flags"]["CFLAGS"]
    assert final.recipe["profile"] == final.extra["profile"]
    stored = list((cache / "profiles").rglob("*.gcda"))
    assert stored, "the training's profile is kept in the cache"
    # the final build is not the instrumented one that trained, and it used every file of the profile
    assert sha256(trained[0]) == final.extra["instrumented"] != final.sha256
    assert final.extra["profile_use"] == {"files": len(stored), "used": len(stored), "without_profile": 0}
    use_log = (cache / "builds" / final.extra["key"] / "logs" / "build.txt").read_text()
    assert "-fprofile-use" in final.recipe["flags"]["CFLAGS"] and "profile count data file not found" not in use_log
    # cached: neither trained nor built again
    again = G.pgo("pgo", spec(tree, pgo=True), src, cache, listen, train, "t1")
    assert len(trained) == 1 and again.sha256 == final.sha256
    assert R.status("pgo", spec(tree, pgo=True), cache, "t1") == "cached (PGO)"
    # another training (workload, dataset, duration) is another profile: trained again
    G.pgo("pgo", spec(tree, pgo=True), src, cache, listen, train, "t2")
    assert len(trained) == 2


def test_a_profile_use_build_that_finds_no_counts_fails_at_profile(tmp_path: Path, cache: Path):
    """The training's counts stored under paths where the objects are not (as a GCOV_PREFIX
    mapped wrong would): the compiler builds without them, which used to pass silently."""
    tree = fixture_tree(tmp_path / "src")
    src = fetch(str(tree), cache, "pgo")

    def train(build):
        subprocess.run([str(build.binary), "train"], check=True, capture_output=True)
        for data in list((src.work / "build").rglob("*.gcda")):
            moved = src.work / "build" / "misplaced" / data.name
            moved.parent.mkdir(exist_ok=True)
            data.rename(moved)
        return ""

    with pytest.raises(BuildError) as caught:
        G.pgo("pgo", spec(tree, pgo=True), src, cache, lambda *_: None, train, "t1")
    error = caught.value
    assert error.step == "profile" and error.log is not None and error.log.name == "build.txt"
    assert "did not use the PGO profile: none of its 1 .gcda files matched an object" in error.message
    assert "main.c.gcda' profile count data file not found" in error.log.read_text().replace("\u2019", "'")


def test_a_training_that_writes_no_profile_fails_the_build_at_train(tmp_path: Path, cache: Path):
    tree = fixture_tree(tmp_path / "src")
    _, listen = events()
    with pytest.raises(BuildError) as caught:
        G.pgo("pgo", spec(tree, pgo=True), fetch(str(tree), cache, "p"), cache, listen, lambda build: "", "t1")
    assert caught.value.step == "train" and "wrote no profile data" in caught.value.message


def test_a_build_that_fails_to_compile_names_its_step_and_log(tmp_path: Path, cache: Path):
    tree = fixture_tree(tmp_path / "src", MAIN_C.replace("return 0;\n}", "return undefined_thing;\n}"))
    _, listen = events()
    with pytest.raises(BuildError) as caught:
        K.build("broken", spec(tree), fetch(str(tree), cache, "broken"), cache, listen)
    error = caught.value
    assert error.step == "build" and error.log is not None and error.log.name == "build.txt"
    assert "undefined_thing" in error.message and str(error.log) in error.message


def test_a_missing_compiler_is_named_with_its_package(tmp_path: Path, cache: Path):
    tree = fixture_tree(tmp_path / "src")
    with pytest.raises(ToolMissingError) as caught:
        K.recipe(spec(tree, compiler="gcc-99"), fetch(str(tree), cache, "x"))
    assert "gcc-99" in caught.value.message and caught.value.hint == "apt-get install g++-99"


def test_a_cache_that_is_not_writable_is_an_environment_problem(tmp_path: Path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(EnvironmentProblem) as caught:
        writable_cache(blocked / "cache")
    assert "PERFLAB_CACHE" in caught.value.problems[0].hint


def test_another_package_version_is_unpacked_once_and_described(cache: Path):
    build = P.unpack("old", old_package(), cache)
    assert build.kind == "package" and build.binary.name == "mariadbd"
    assert build.version.startswith(old_says()) and build.format == "mariadb-10.11"
    assert (build.share / "english" / "errmsg.sys").is_file()
    installed = R.installed()
    assert installed.sha256 != build.sha256 and installed.format == build.format
    assert P.cached("again", old_package(), cache).sha256 == build.sha256
    basedir = R.from_basedir("tree", build.binary.parent.parent)  # root/usr: sbin/mariadbd, share/mysql
    assert basedir.sha256 == build.sha256 and basedir.share == build.share


def test_a_package_version_apt_does_not_know_fails_its_build_with_apts_words(cache: Path):
    with pytest.raises(BuildError) as caught:
        P.unpack("nope", "mariadb-server-core=1:10.11.0-nope", cache)
    assert caught.value.step == "download" and "was not found" in caught.value.message
    assert "apt-cache madison mariadb-server-core" in caught.value.message


@pytest.mark.parametrize(
    ("build", "key", "words"),
    [
        ('{ source = "debian", compiler = "icc" }', "builds.b.compiler", 'a compiler such as "gcc-12"'),
        ('{ source = "/nonexistent/tree" }', "builds.b.source", "a source tree with a CMakeLists.txt"),
        ('{ basedir = "/tmp" }', "builds.b.basedir", "a directory with a server binary"),
        ('{ package = "mariadb-server-core" }', "builds.b.package", "NAME=VERSION"),
        ('{ package = "x=1", pgo = true }', "builds.b", "no pgo with package"),
        ('{ source = "debian", package = "x=1" }', "builds.b", "exactly one of package, basedir or source"),
    ],
)
def test_bad_builds_are_refused_with_their_key(build: str, key: str, words: str):
    text = f'[experiment]\nname = "x"\n[builds]\nb = {build}\n[variants.s]\na = {{}}\nb = {{ build = "b" }}\n'
    with pytest.raises(SpecError) as caught:
        parse(text, "<t>")
    problems = {p.path: p.render() for p in caught.value.problems}
    assert key in problems and words in problems[key], problems


def test_a_variant_naming_an_unknown_build_is_refused():
    text = '[experiment]\nname = "x"\n[builds]\nold = { package = "ab=1" }\n[variants.s]\nb = { build = "olde" }\n'
    with pytest.raises(SpecError) as caught:
        parse(text, "<t>")
    rendered = caught.value.problems[0].render()
    assert "olde" in rendered and "defined builds: old" in rendered


UPGRADE = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-builds"
duration = "3s"
warmup = "1s"
repeats = 1

[dataset]
tables = 1
table_size = 2000

[workload]
test = "oltp_read_only"
threads = [1]

[builds.old]
package = "{old}"

[builds.broken]
source = "{broken}"
flags = "none"

[variants.server]
current = {{}}
old     = {{ build = "old" }}
broken  = {{ build = "broken" }}
"""


def test_each_variant_runs_its_own_binary_and_a_failed_build_fails_only_its_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The binary-per-variant path end to end: the installed server and another version apt serves, unpacked,
    share one dataset and each cell records (and ran) its own binary; a build that does not
    compile fails only its variant's cell, with its step and log."""
    monkeypatch.setenv("PERFLAB_CACHE", str(tmp_path / "cache"))
    broken = fixture_tree(tmp_path / "broken", MAIN_C.replace("return 0;\n}", "return undefined_thing;\n}"))
    spec_file = write_experiment(tmp_path / "b.toml", UPGRADE.format(old=old_package(), broken=broken))
    checked = perflab("run", str(spec_file), "--check", "--format", "json")
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["builds"]["old"] == "to download and unpack (seconds)"
    out = tmp_path / "results"
    done = perflab("run", str(spec_file), "-o", str(out))
    assert done.returncode == 1, done.stdout + done.stderr  # one cell failed: exit 1, the rest ran
    assert "build broken failed" in done.stderr
    doc = json.loads(perflab("export", str(out), "--format", "json").stdout)
    cells = {c["variant"]["server"]: c for c in doc["cells"]}
    assert cells["current"]["status"] == "ok" and cells["old"]["status"] == "ok"
    current, old = cells["current"]["build"], cells["old"]["build"]
    assert current["name"] is None and current["kind"] == "installed" and current["binary"] == "/usr/sbin/mariadbd"
    assert old["name"] == "old" and old["version"].startswith(old_says()) and old["sha256"] != current["sha256"]
    # the server that ran says which version it was, in its own log
    logs = sorted((out / "logs").glob("cell-*/error.log"))
    versions = {log.parent.name: log.read_text() for log in logs}
    assert any(old_says() in text for text in versions.values())
    assert any(installed_says() in text for text in versions.values())
    failed = cells["broken"]
    assert failed["status"] == "failed" and failed["build"] is None
    assert "build 'broken' failed at build" in failed["error"] and "undefined_thing" in failed["error"]
    assert doc["builds"]["old"]["sha256"] == old["sha256"] and "error" in doc["builds"]["broken"]
    again = perflab("run", str(spec_file), "--check")  # the package is cached now
    assert "build old: cached" in again.stdout
    report = perflab("report", str(out)).stdout
    assert f"build old: {old_says()}, package, sha256 " + old["sha256"][:12] in report
    assert f"build installed: {installed_says()}" in report and "build broken: failed: build 'broken'" in report
    markdown = perflab("report", str(out), "--format", "markdown", "-o", str(tmp_path / "r.md"))
    assert markdown.returncode == 0, markdown.stderr
    assert f"| old | {old_says()}, package" in (tmp_path / "r.md").read_text()
    assert perflab("report", str(out), "--html", "-o", str(tmp_path / "r.html")).returncode == 0
    assert f"<dt>build old</dt><dd>{old_says()}, package" in (tmp_path / "r.html").read_text()


def test_an_unwritable_cache_stops_the_run_before_anything_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("PERFLAB_CACHE", str(blocked / "cache"))
    text = UPGRADE.format(old=old_package(), broken=fixture_tree(tmp_path / "src"))
    checked = perflab("run", str(write_experiment(tmp_path / "b.toml", text)), "--check")
    assert checked.returncode == 3, checked.stdout + checked.stderr
    assert "build cache" in checked.stderr and "PERFLAB_CACHE" in checked.stderr
    assert "Traceback" not in checked.stderr


def test_perflab_build_makes_the_builds_and_says_what_it_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PERFLAB_CACHE", str(tmp_path / "cache"))
    # "broken" names a fixture that compiles
    text = UPGRADE.format(old=old_package(), broken=fixture_tree(tmp_path / "src"))
    spec_file = write_experiment(tmp_path / "b.toml", text)
    made = perflab("build", str(spec_file), "--format", "json")
    assert made.returncode == 0, made.stderr
    builds = json.loads(made.stdout)["builds"]
    assert set(builds) == {"old", "broken"}
    assert builds["old"]["version"].startswith(old_says()) and builds["broken"]["kind"] == "source"
    assert builds["broken"]["version"].startswith("10.11.99-MariaDB-fixture")
    # a [builds] entry no variant names is not made
    unnamed = text.replace('broken  = { build = "broken" }\n', "")
    assert unnamed != text
    made = perflab("build", str(write_experiment(tmp_path / "c.toml", unnamed)), "--format", "json")
    assert made.returncode == 0, made.stderr
    assert set(json.loads(made.stdout)["builds"]) == {"old"}
