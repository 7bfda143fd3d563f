"""Builds from source: Debian's source package or a local tree, with a recipe, cached by key.

Steps, each logged to builds/KEY/logs/STEP.txt:
    fetch      apt-get source --download-only + dpkg-source -x (once per version), or the local tree
    configure  cmake: the recipe's compiler and flags, the server's own defaults (SERVER)
    build      only the server's target (its static engines; no plugins, clients or tests),
               progress from make's "[ NN%]" lines
    install    the binary, its error messages and charsets into builds/KEY/install

The key hashes what decides the binary: the source (Debian version and .dsc hash, or the
tree's git commit and changes, or its files' sizes and times), the compiler's and cmake's
versions, the flags, the cmake options, the stage and the PGO profile's hash. An unchanged
build is never rebuilt. One build tree per source (work/SOURCE/build) serves every build of
it in turn, so a PGO profile's object paths are the same in both stages.

    src = Source.of(spec.source, cache)                 # fetched once
    build = cmake_build(name, spec, src, cache, listen)  # cached or built (builds/recipes.py: by its kind)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perflab.errors import PerflabError, ToolMissingError
from perflab.builds import Build, BuildError, describe, read_manifest, write_manifest
from perflab.places.proc import Child, call, clean_env
from perflab.redact import redact_argv
from perflab.spec.builds import BuildSpec

RECIPE_VERSION = 1  # bump when the steps change what a key builds
DEBIAN_SOURCE = "mariadb"
# what a MariaDB server build needs beyond the recipe: Debian's own configuration, minus the
# parts whose build dependencies a benchmark machine lacks and a server run never loads
SERVER_CMAKE: dict[str, str] = {
    "CMAKE_BUILD_TYPE": "RelWithDebInfo",
    "BUILD_CONFIG": "mysql_release",
    # what mysql_release sets for Debian (-DDEB=...): system libraries, Debian's paths
    "INSTALL_LAYOUT": "DEB",
    "WITH_SSL": "system",
    "WITH_ZLIB": "system",
    "WITH_PCRE": "system",
    "WITH_URING": "ON",
    "WITH_LIBAIO": "ON",
    "CONC_DEFAULT_CHARSET": "utf8mb4",
    "WITH_EMBEDDED_SERVER": "OFF",
    "WITH_UNIT_TESTS": "OFF",
    **{f"PLUGIN_{p}": "NO" for p in ("AUTH_PAM", "COLUMNSTORE", "ROCKSDB", "MROONGA", "SPIDER", "CONNECT")},
    **{f"PLUGIN_{p}": "NO" for p in ("OQGRAPH", "SPHINX", "S3", "AWS_KEY_MANAGEMENT")},
}
TARGET = "mariadbd"
BINARY = "sql/mariadbd"  # in the build tree
MESSAGES = "sql/share"  # build tree: LANGUAGE/errmsg.sys, generated
CHARSETS = "sql/share/charsets"  # source tree
CCACHE_SIZE = "30G"  # a MariaDB build's objects with debug information take about 1.5 GB
FRAME_POINTERS = "-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer"
NO_FRAME_POINTERS = "-fomit-frame-pointer"
# MariaDB's CMakeLists adds -fno-omit-frame-pointer after the user's flags (so it would win)
# when these compiler checks pass; set in the cache, the checks are skipped and fail
NO_FRAME_POINTERS_CMAKE = {"have_C__fno_omit_frame_pointer": "0", "have_CXX__fno_omit_frame_pointer": "0"}
Listener = Callable[[str, dict[str, Any]], None]
_PERCENT = re.compile(rb"^\[\s*(\d+)%\]", re.MULTILINE)
# gcc: "warning: '/TREE/sql/CMakeFiles/mariadbd.dir/main.c.gcda' profile count data file not found"
_MISSING_PROFILE = re.compile(r"[\u2018'`]([^\u2019'`\n]+\.gcda)[\u2019'] profile count data file not found")


@dataclass(frozen=True)
class Source:
    tree: Path
    fingerprint: str  # decides the key
    label: str  # "debian mariadb 1:10.11.18-0+deb12u1" or the tree's path
    server: str = "mariadb"  # postgresql: an autoconf tree, built by servers/postgresql/source.py

    @property
    def work(self) -> Path:
        """This source's build tree (one per source; builds of it take turns)."""
        return self.tree.parent / "work" / hashlib.sha256(str(self.tree).encode()).hexdigest()[:12]


def toolchain(compiler: str) -> tuple[str, str]:
    """(C compiler, C++ compiler) for "gcc-12" / "clang-16"; a missing one is an environment problem."""
    family, version = compiler.split("-", 1)
    pair = (f"gcc-{version}", f"g++-{version}") if family == "gcc" else (f"clang-{version}", f"clang++-{version}")
    for tool in pair:
        if shutil.which(tool) is None:
            package = pair[1] if family == "gcc" else pair[0]
            raise ToolMissingError(f"compiler {compiler}: {tool} not found", f"apt-get install {package}")
    return pair


def flags(spec: BuildSpec, work: Path, stage: str = "plain") -> dict[str, str]:
    """CFLAGS, CXXFLAGS, LDFLAGS of the recipe: the base (Debian's or none), frame pointers, LTO,
    the PGO stage, then the user's own (last: they win)."""
    if spec.flags == "debian":
        env = {**clean_env(), "DEB_BUILD_MAINT_OPTIONS": "hardening=+all"}
        work.mkdir(parents=True, exist_ok=True)  # -ffile-prefix-map names the working directory

        def get(name: str) -> str:
            return call(["dpkg-buildflags", "--get", name], what="dpkg-buildflags", env=env, cwd=work).strip()

        cpp = get("CPPFLAGS")
        base = {"CFLAGS": f"{get('CFLAGS')} {cpp}", "CXXFLAGS": f"{get('CXXFLAGS')} {cpp}", "LDFLAGS": get("LDFLAGS")}
    else:
        base = {"CFLAGS": "", "CXXFLAGS": "", "LDFLAGS": ""}
    add: list[tuple[str, str]] = []
    if spec.frame_pointers is not None:
        add.append((FRAME_POINTERS if spec.frame_pointers else NO_FRAME_POINTERS, ""))
    if spec.lto:
        lto = "-flto=auto" if spec.compiler.startswith("gcc") else "-flto=thin"
        add.append((lto, lto))
    if stage == "generate":
        add.append(("-fprofile-generate -fprofile-update=atomic", "-fprofile-generate"))
    elif stage == "use":
        # a unit compiled without its counts is warned of (-Wmissing-profile), never an error: the
        # build log is then read to verify that the profile was used (profile_use)
        use = "-fprofile-use -fprofile-correction -Wno-error=missing-profile -Wno-error=coverage-mismatch"
        add.append((use, "-fprofile-use"))
    for compile_flags, link_flags in add:
        base["CFLAGS"] += f" {compile_flags}"
        base["CXXFLAGS"] += f" {compile_flags}"
        base["LDFLAGS"] += f" {link_flags}"
    base["CFLAGS"] += f" {spec.cflags}"
    base["CXXFLAGS"] += f" {spec.cxxflags}"
    base["LDFLAGS"] += f" {spec.ldflags}"
    return {k: " ".join(v.split()) for k, v in base.items()}


def cmake_options(spec: BuildSpec) -> dict[str, str]:
    def text(value: object) -> str:
        return ("ON" if value else "OFF") if isinstance(value, bool) else str(value)

    off = NO_FRAME_POINTERS_CMAKE if spec.frame_pointers is False else {}
    return {**SERVER_CMAKE, **off, **{k: text(v) for k, v in spec.cmake.items()}}


def cmake_recipe(spec: BuildSpec, src: Source, stage: str = "plain", profile: str | None = None) -> dict[str, Any]:
    """MariaDB's (and MySQL's) recipe: cmake and the compiler flags."""
    _, cxx = toolchain(spec.compiler)
    return {
        "recipe_version": RECIPE_VERSION,
        "source": src.label,
        "source_fingerprint": src.fingerprint,
        "compiler": spec.compiler,
        "compiler_version": _first_line([cxx, "--version"]),
        "cmake_version": _first_line(["cmake", "--version"]),
        "flags": flags(spec, src.work / "build", stage),
        "cmake": cmake_options(spec),
        "stage": stage,
        "profile": profile,
    }


def key_of(recipe: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def cmake_build(
    name: str,
    spec: BuildSpec,
    src: Source,
    cache: Path,
    listen: Listener,
    *,
    stage: str = "plain",
    profile: tuple[str, Path] | None = None,
) -> Build:
    """MariaDB's (and MySQL's) build: cmake, make, make install into the cache."""
    made = cmake_recipe(spec, src, stage, profile[0] if profile else None)
    key, home, found = home_for(made, cache)
    if found is not None:
        return found.named(name)
    started = time.monotonic()
    tree, resumed = _tree_for(src, key)
    cc, cxx = toolchain(spec.compiler)
    configure = ["cmake", "-S", str(src.tree), "-B", str(tree), "-G", "Unix Makefiles"]
    configure += [f"-DCMAKE_C_COMPILER={cc}", f"-DCMAKE_CXX_COMPILER={cxx}"]
    fl = made["flags"]
    configure += [f"-DCMAKE_C_FLAGS={fl['CFLAGS']}", f"-DCMAKE_CXX_FLAGS={fl['CXXFLAGS']}"]
    configure += [f"-DCMAKE_{kind}_LINKER_FLAGS={fl['LDFLAGS']}" for kind in ("EXE", "SHARED", "MODULE")]
    configure += [f"-D{k}={v}" for k, v in made["cmake"].items()]
    configure += _launcher()
    _step(name, "configure", configure, home, tree, listen, cache)
    if profile is not None:  # the training run's counts, back where the objects are compiled
        _restore_profile(profile[1], tree)
    jobs = spec.jobs or max(1, len(_cpus()))
    argv = ["cmake", "--build", str(tree), "--target", TARGET, "--parallel", str(jobs)]
    _step(name, "build", argv, home, tree, listen, cache)
    used = profile_use(name, profile[1], tree, home / "logs" / "build.txt") if profile is not None else {}
    listen("build_step", {"name": name, "step": "install"})
    built = _install(name, src, tree, home)
    share = home / "install" / "share" / "mysql"
    return finish(built, name, home, made, started, share=share, resumed=resumed, stage=stage, **used)


def profile_use(name: str, profile: Path, tree: Path, log: Path) -> dict[str, Any]:
    """After a profile-use build: verify that the compiler used the profile, else fail the build at
    `profile` (its variant's cells fail; a build without its profile is not the PGO build asked for).

    A .gcda file of the profile was used when the build compiled its object (`X.c.gcda` ->
    `X.c.o`, `X.gcda` -> `X.o`, beside it in the tree) and the compiler did not warn that the
    object's counts were missing (-Wmissing-profile, in the build log). None used (the objects
    are elsewhere: another tree, counts written under other paths) or any profiled object compiled
    without its counts fails the build. -> {"profile_use": {"files", "used", "without_profile"}};
    without_profile: units compiled with no counts at all (code the training never loaded, such as
    build tools), for the record."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    missing = {m.group(1) for m in _MISSING_PROFILE.finditer(text)}
    files = sorted(str(p.relative_to(profile)) for p in profile.rglob("*.gcda"))
    unread = {f for f in files if _named_in(f, missing)}
    used = [f for f in files if f not in unread and (tree / f).with_suffix(".o").is_file()]
    counts = {"files": len(files), "used": len(used), "without_profile": len(missing)}
    if unread:
        why = f"{len(unread)} profiled objects were compiled without their counts, such as {min(unread)}"
    elif not used:
        why = f"none of its {len(files)} .gcda files matched an object the build compiled in {tree}"
    else:
        return {"profile_use": counts}
    raise BuildError(name, "profile", log, f"the profile-use build did not use the PGO profile: {why}")


def _named_in(relative: str, paths: set[str]) -> bool:
    """Whether one of `paths` (absolute, or mangled by -fprofile-use=DIR: '/' as '#') ends with `relative`."""
    suffix = "/" + relative
    return any(p.replace("#", "/").endswith(suffix) for p in paths)


def home_for(made: dict[str, Any], cache: Path) -> tuple[str, Path, Build | None]:
    """The recipe's key and home in the cache, and its Build if one is stored there; else the
    home is emptied, with its logs/ directory, for a build to begin."""
    key = key_of(made)
    home = cache / "builds" / key
    found = read_manifest(home)
    if found is None:
        shutil.rmtree(home, ignore_errors=True)
        (home / "logs").mkdir(parents=True)
    return key, home, found


def finish(binary: Path, name: str, home: Path, made: dict[str, Any], started: float, **extra: Any) -> Build:
    """The installed `binary` described with its recipe, key and build time (`extra`: share,
    resumed, stage), its manifest written into `home`."""
    result = describe(
        binary,
        name=name,
        kind="source",
        recipe={k: v for k, v in made.items() if k != "source_fingerprint"},
        key=key_of(made),
        build_s=round(time.monotonic() - started, 1),  # this call's: less than a cold build's if resumed
        **extra,
    )
    write_manifest(home, result)
    return result


def _tree_for(src: Source, key: str) -> tuple[Path, bool]:
    """The source's build tree, kept if it was left by an interrupted build of this same key
    (make then goes on where it stopped: a PGO-instrumented build cannot use ccache), else
    emptied: objects of another recipe must not leak into this one."""
    tree = src.work / "build"
    marker = tree / ".perflab-key"
    if marker.is_file() and marker.read_text(encoding="utf-8").strip() == key:
        return tree, True
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    marker.write_text(key + "\n", encoding="utf-8")
    return tree, False


def _launcher() -> list[str]:
    """ccache, when installed: an interrupted build, or one that differs only in link flags,
    then recompiles nothing it compiled before. It does not change the binary, so it is not
    part of the key. The build tree's path is the same for every build of a source, so
    -ffile-prefix-map and debug paths match between builds and ccache can hit."""
    if shutil.which("ccache") is None:
        return []
    return ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]


def _step(name: str, step: str, argv: list[str], home: Path, tree: Path, listen: Listener, cache: Path) -> None:
    """One logged step; make's "[ NN%]" lines become progress. Stopped with its process group."""
    log = home / "logs" / f"{step}.txt"
    listen("build_step", {"name": name, "step": step})
    with open(log, "wb") as out:
        out.write(f"$ {shlex.join(redact_argv(argv))}\n".encode())
        out.flush()
        env = clean_env({"CCACHE_DIR": str(cache / "ccache"), "CCACHE_MAXSIZE": CCACHE_SIZE})
        child = Child(["nice", "-n", "10", *argv], env=env, cwd=tree, stdout=out)  # a build is background work
    try:
        seen = 0
        while child.poll() is None:
            time.sleep(1.0)
            seen = _progress(log, seen, name, step, listen)
        code = child.wait()
    except BaseException:
        child.kill()
        raise
    _progress(log, seen, name, step, listen)
    if code != 0:
        raise BuildError(name, step, log, _log_tail(log))


def _progress(log: Path, seen: int, name: str, step: str, listen: Listener) -> int:
    with open(log, "rb") as file:
        file.seek(seen)
        chunk = file.read()
    found = _PERCENT.findall(chunk)
    if found:
        listen("build_progress", {"name": name, "step": step, "fraction": int(found[-1]) / 100})
    return seen + len(chunk)


def _log_tail(log: Path, lines: int = 15) -> str:
    """The log's error lines if there are any (a compiler's "error:"), else its last lines."""
    text = log.read_text(encoding="utf-8", errors="replace").splitlines()
    errors = [ln for ln in text if re.search(r"\berror\b|Error \d|CMake Error", ln)]
    return "\n".join((errors or text)[-lines:])


def _install(name: str, src: Source, tree: Path, home: Path) -> Path:
    prefix = home / "install"
    binary = tree / BINARY
    if not binary.is_file():
        raise BuildError(name, "install", None, f"the build made no {BINARY}")
    (prefix / "sbin").mkdir(parents=True)
    shutil.copy2(binary, prefix / "sbin" / "mariadbd")
    share = prefix / "share" / "mysql"
    for messages in (tree / MESSAGES).glob("*/errmsg.sys"):
        (share / messages.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy2(messages, share / messages.parent.name / "errmsg.sys")
    if (src.tree / CHARSETS).is_dir():
        shutil.copytree(src.tree / CHARSETS, share / "charsets")
    return prefix / "sbin" / "mariadbd"


def _restore_profile(profile: Path, tree: Path) -> None:
    for data in profile.rglob("*.gcda"):
        target = tree / data.relative_to(profile)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(data, target)


def _first_line(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PerflabError(f"{argv[0]} --version failed: {exc}", "run `make setup`") from None
    return out.strip().splitlines()[0] if out.strip() else ""


def _cpus() -> set[int]:
    return os.sched_getaffinity(0)
