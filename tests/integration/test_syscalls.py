"""The allocator's syscalls counted from the kernel's tracepoints: a real program's known
mmap/munmap/mprotect/madvise calls, exactly, with their sizes; nothing of other processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

from perflab.observers import syscalls

PROGRAM = Path(__file__).resolve().parent.parent / "data" / "alloc" / "syscalls.c"


def test_known_syscalls_are_counted_exactly(tmp_path: Path) -> None:
    exe = tmp_path / "calls"
    subprocess.run(["cc", "-O0", "-o", str(exe), str(PROGRAM)], check=True)
    with subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL) as proc:
        try:
            with syscalls.SyscallRecorder(proc.pid, tmp_path) as rec:
                subprocess.run(["true"], check=True)  # another process's calls must not count
                assert proc.stdin is not None
                proc.stdin.write(b"x")
                proc.stdin.close()
                assert proc.wait(30) == 0
            counts = rec.counts()
        finally:
            proc.kill()
    assert counts.calls["mmap"] == 17 and counts.bytes["mmap"] == 17 * (3 << 20)
    assert counts.calls["munmap"] == 17 and counts.by_class["munmap"][22] == 17  # 3 MiB: [2^21, 2^22)
    assert counts.calls["mprotect"] == 5 and counts.bytes["mprotect"] == 5 * 8192
    assert counts.calls["madvise"] == 4 and counts.bytes["madvise"] == 4 * 65536
    assert counts.calls["brk"] == 0


def test_an_armed_recorder_counts_from_its_resume_only(tmp_path: Path) -> None:
    """Started with its events off (perf's start-up takes seconds on a busy machine, so perflab
    starts it before the window), it counts nothing until resume(): the window's calls only."""
    exe = tmp_path / "calls"
    subprocess.run(["cc", "-O0", "-o", str(exe), str(PROGRAM)], check=True)
    with subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            with syscalls.SyscallRecorder(proc.pid, tmp_path, enabled=False) as rec:
                for resume in (False, True):  # a round before the window, then one in it
                    if resume:
                        rec.resume()
                    proc.stdin.write(b"x")
                    proc.stdin.flush()
                    assert proc.stdout.read(1) == b"d"
            counts = rec.counts()
            proc.stdin.close()
            assert proc.wait(30) == 0
        finally:
            proc.kill()
    assert counts.calls["mmap"] == 17 and counts.calls["munmap"] == 17 and counts.calls["madvise"] == 4
    assert rec.seconds > 0


def test_parse_recorded_lines() -> None:
    lines = [
        "syscalls:sys_enter_munmap: addr: 0x7f0e2c000000, len: 0x02001000",
        "syscalls:sys_enter_brk: brk: 0x55d1c6a4e000",
        "syscalls:sys_enter_openat: dfd: 0xffffff9c, filename: 0x7ffd",
    ]
    counts = syscalls.parse(lines)
    assert counts.calls == {"mmap": 0, "munmap": 1, "mprotect": 0, "madvise": 0, "brk": 1}
    assert counts.bytes["munmap"] == 0x02001000
