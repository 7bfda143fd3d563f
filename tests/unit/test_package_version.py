"""allocators.package_version looks a file up once per process (each cell asks it of its allocator
and C library), and again when the file was replaced; dpkg's answer on who owns a path is kept
across runs while dpkg's database is unchanged (perflab/dpkg.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from perflab import allocators, dpkg


@pytest.fixture
def dpkg_calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[list[str]]:
    monkeypatch.setenv("PERFLAB_CACHE", str(tmp_path / "cache"))
    status = tmp_path / "dpkg-status"
    status.write_text("Package: libc6\n")
    monkeypatch.setattr(dpkg, "STATUS", status)
    calls: list[list[str]] = []
    real = subprocess.run

    def counted(argv, *args, **kwargs):
        calls.append(list(argv))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(allocators.subprocess, "run", counted)
    allocators._package_version.cache_clear()
    return calls


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs Debian's dpkg (what perflab asks)")
def test_a_packaged_file_is_asked_once(dpkg_calls):
    libc = next(p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6") if os.path.exists(p))
    first = allocators.package_version(libc)
    assert first is not None and first.startswith("libc6 "), first
    asked = len(dpkg_calls)
    assert asked >= 2  # -S (who owns it), -W (its version)
    assert allocators.package_version(libc) == first and len(dpkg_calls) == asked


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs Debian's dpkg (what perflab asks)")
def test_a_replaced_file_is_asked_again(dpkg_calls, tmp_path: Path):
    library = tmp_path / "libfake.so"
    library.write_bytes(b"one")
    assert allocators.package_version(library) is None  # no package owns it
    asked, looked = len(dpkg_calls), allocators._package_version.cache_info().misses
    assert allocators.package_version(library) is None and len(dpkg_calls) == asked
    library.write_bytes(b"three")  # another size: another file, looked up again
    assert allocators.package_version(library) is None and allocators._package_version.cache_info().misses > looked
    assert len(dpkg_calls) == asked  # dpkg's database unchanged: its answer on the path kept
    dpkg.STATUS.write_text("Package: libc6\nPackage: libfake\n")  # a package installed since
    library.write_bytes(b"three more")
    assert allocators.package_version(library) is None and len(dpkg_calls) > asked
