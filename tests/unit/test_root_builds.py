"""A build from another Debian suite's private root (issue 34): the file's keys, the launcher a
Build puts before its binary, the server's own linked allocator, and the program behind a loader."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from perflab import elf
from perflab.run import allocator_proof
from perflab.builds import Build, launcher
from perflab.places.here import HERE
from perflab.spec.builds import BuildSpec


def test_a_package_of_a_suite_may_name_no_version_and_suite_needs_a_package():
    spec = BuildSpec.model_validate({"package": "mysql-server-core", "suite": "sid"})
    assert spec.kind == "package" and spec.suite == "sid"
    assert BuildSpec.model_validate({"package": "mysql-server-core=9.7.4-2", "suite": "sid"}).suite == "sid"
    with pytest.raises(ValidationError, match="a NAME alone only with suite"):
        BuildSpec.model_validate({"package": "mysql-server-core"})
    with pytest.raises(ValidationError, match="suite only with package"):
        BuildSpec.model_validate({"basedir": "/usr", "suite": "sid"})
    with pytest.raises(ValidationError, match="suite"):
        BuildSpec.model_validate({"package": "mysql-server-core", "suite": "woody"})


def test_a_build_of_a_root_runs_through_its_loader():
    root = {
        "dir": "/c/r",
        "loader": "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
        "library_path": ["usr/lib/a", "lib/b"],
    }
    build = Build("m", "package", Path("/c/r/usr/sbin/mysqld"), "9.7.4", "0" * 64, None, extra={"root": root})
    assert build.launcher == [
        "/c/r/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
        "--inhibit-cache",
        "--library-path",
        "/c/r/usr/lib/a:/c/r/lib/b",
    ]
    assert launcher(None) == [] and Build("i", "installed", Path("/usr/sbin/mariadbd"), "", "", None).launcher == []


def test_the_allocator_a_server_links_is_its_own_default():
    needed = {"libtcmalloc.so.4", "libc.so.6"}
    assert allocator_proof._links("/r/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4.6.5", needed)
    assert not allocator_proof._links("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", needed)
    assert not allocator_proof._links("/usr/lib/x86_64-linux-gnu/libtcmalloc.so.40", needed)  # another soname
    assert "libc.so.6" in elf.needed(Path("/bin/sleep"))
    assert allocator_proof.glibc_of(None) is None


def test_the_program_behind_a_loader_is_found(tmp_path: Path):
    """A process started as `ld-linux ... PROGRAM` has the loader as /proc/PID/exe: its program
    is the one profiles and stack quality must read."""
    loader = next(
        p for p in ("/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2") if Path(p).exists()
    )
    child = subprocess.Popen([loader, "--inhibit-cache", "--library-path", str(tmp_path), "/bin/sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/cmdline").read_bytes().count(b"\0") < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert HERE.program(child.pid) == "/bin/sleep"
    finally:
        child.kill()
        child.wait()
    assert HERE.program(1 << 30) is None
