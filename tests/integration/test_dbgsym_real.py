"""debug_symbols = true for real (builds/dbgsym.py), against a local signed archive: a tiny C
"server" with a build ID, its debug info split off as dh_strip does (objcopy --only-keep-debug,
strip), packaged with dpkg-deb as `perflab-spin-server` (with a libc6 of this system's loader and
C library) in suite sid and `perflab-spin-server-dbgsym` in sid-debug, both read through perflab's
private apt indexes (file:// mirrors from PERFLAB_DEBIAN_MIRROR and PERFLAB_DEBIAN_DEBUG_MIRROR,
InRelease signed by a throw-away key given as the keyring). The build's root gets the debug file,
its record says so, and the stack sampler's libdw and `perf script` name a static function the
stripped binary alone shows as mysqld+0xOFFSET. An unreachable debug archive leaves the build
working, its record saying why. A few seconds; perf and ptrace need the measure lock."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from perflab.debuginfo import mapped_files
from perflab.builds import aptindex as A
from perflab.builds.package import from_root
from perflab.observers.perf import PerfRecorder
from perflab.observers.pmp_sampler import Sampler
from tests.debarchive import make_deb, publish, signing_key
from tests.freezes import sleep_running

pytestmark = pytest.mark.integration

SERVER = "perflab-spin-server"
SPIN = "perflab_hidden_spin"
SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static volatile unsigned long sink;
static __attribute__((noinline)) unsigned long perflab_hidden_spin(unsigned long n) {
    unsigned long x = sink;
    for (unsigned long i = 0; i < n; i++) x += i * i ^ (x >> 3);
    return x;
}
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--version") == 0) { puts("mysqld  Ver 1.0-perflab-spin for Linux"); return 0; }
    double seconds = argc > 2 ? atof(argv[2]) : 1.0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        sink += perflab_hidden_spin(100000 + (unsigned long)argc);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
    return 0;
}
"""


def _run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """(the archive, its keyring, the server's build ID)."""
    top = tmp_path_factory.mktemp("dbgsym")
    (top / "spin.c").write_text(SOURCE)
    binary, debug = top / "mysqld", top / "mysqld.debug"
    _run("cc", "-g", "-O2", "-fno-omit-frame-pointer", "-Wl,--build-id", "-o", str(binary), str(top / "spin.c"))
    ident = _run("readelf", "-n", str(binary)).split("Build ID:")[1].split()[0]
    _run("objcopy", "--only-keep-debug", str(binary), str(debug))  # as dh_strip does
    _run("strip", "--strip-all", "--remove-section=.comment", str(binary))
    libdir = "usr/lib/x86_64-linux-gnu"
    libc = {
        f"{libdir}/ld-linux-x86-64.so.2": Path(os.path.realpath("/lib64/ld-linux-x86-64.so.2")),
        f"{libdir}/libc.so.6": Path(os.path.realpath(f"/{libdir}/libc.so.6")),
    }
    debs = top / "debs"
    debs.mkdir()
    main = [
        make_deb(debs, "libc6", "2.36-99perflab", libc),
        make_deb(debs, SERVER, "1.0-1", {"usr/sbin/mysqld": binary}, depends="libc6"),
    ]
    dbgsym = make_deb(
        debs,
        f"{SERVER}-dbgsym",
        "1.0-1",
        {f"usr/lib/debug/.build-id/{ident[:2]}/{ident[2:]}.debug": debug},
        depends=f"{SERVER} (= 1.0-1)",
    )
    with signing_key(top / "gnupg") as key:
        publish(top / "archive", "sid", main, key)
        publish(top / "archive", "sid-debug", [dbgsym], key)
    return top / "archive", key.keyring, ident


@pytest.fixture
def mirrors(archive: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch) -> str:
    """Both mirrors on the local archive (the debug one may be changed by the test); the build ID."""
    top, keyring, ident = archive
    monkeypatch.setenv(A.MIRROR_ENV, f"file://{top}")
    monkeypatch.setenv(A.DEBUG_MIRROR_ENV, f"file://{top}")
    monkeypatch.setattr(A, "KEYRING", keyring)
    return ident


def spinning(argv: list[str]) -> subprocess.Popen:
    """The program spinning, once its loader has mapped it (however long a paused VM makes that)."""
    child = subprocess.Popen([*argv, "spin", "30"], start_new_session=True)
    deadline = time.monotonic() + 30
    while argv[-1] not in mapped_files(child.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return child


def sampled_frames(argv: list[str], samples: int = 4) -> set[str]:
    """The frame names the stack sampler gives the spinning program's thread."""
    child = spinning(argv)
    try:
        sampler = Sampler(child.pid)
        try:
            return {frame for _ in range(samples) for _, stack in sampler.stacks() for frame in stack.split(";")}
        finally:
            sampler.close()
    finally:
        child.kill()
        child.wait()


def test_an_unreachable_debug_archive_leaves_the_build_working_and_says_why(
    mirrors: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(A.DEBUG_MIRROR_ENV, f"file://{tmp_path}/debian-debug")  # no archive there
    build = from_root("spin", SERVER, "sid", tmp_path / "cache", debug_symbols=True)
    record = build.record()
    assert record["version"] == "1.0-perflab-spin for Linux" and record["recipe"]["debug_symbols"] is True
    why = f"none: sid-debug could not be read (copy://{tmp_path}/debian-debug): The repository "  # apt's words
    assert record["debug_symbols"].startswith(why), record["debug_symbols"]
    assert record["debug_symbols"].endswith("does not have a Release file."), record["debug_symbols"]
    assert record["compiler_source"] == "none: stripped"
    frames = sampled_frames(build.launcher + [str(build.binary)])
    assert SPIN not in " ".join(frames) and any(f.startswith("mysqld+0x") for f in frames), frames


def test_the_dbgsym_lands_in_the_root_and_names_static_functions(mirrors: str, tmp_path: Path):
    ident = mirrors
    build = from_root("spin", SERVER, "sid", tmp_path / "cache", debug_symbols=True)
    root = Path(build.extra["root"]["dir"])
    debug = root / "usr/lib/debug/.build-id" / ident[:2] / f"{ident[2:]}.debug"
    assert debug.is_file()
    assert build.extra["debug_symbols"] == f"dbgsym: {debug}"
    assert build.compiler_source == f"dbgsym: {debug}" and (build.compiler or "").startswith("GCC: ")
    added = json.loads((root.parent / "debug.json").read_text())
    assert (added["package"], added["version"], added["suite"]) == (f"{SERVER}-dbgsym", "1.0-1", "sid-debug")
    assert added["files"] == [str(debug.relative_to(root))]
    argv = build.launcher + [str(build.binary)]
    frames = sampled_frames(argv)
    assert any(f.startswith(SPIN) for f in frames), frames
    # perf: the same program, system-wide as perflab records, folded with and without the root's debug file
    child = spinning(argv)
    try:
        with PerfRecorder(child.pid, tmp_path / "perf", frequency=499) as recorder:
            sleep_running(0.6)  # 0.6 s of this machine running, whatever pause it takes (tests/freezes.py)
    finally:
        child.kill()
        child.wait()
    assert recorder.buildid_dir is not None
    named, _ = recorder.fold()
    recorder.buildid_dir = None
    unnamed, _ = recorder.fold()
    assert sum(n for stack, n in named.items() if SPIN in stack) > 0.5 * sum(named.values()), named.most_common(3)
    assert not any(SPIN in stack for stack in unnamed) and any("mysqld+0x" in s for s in unnamed), unnamed
