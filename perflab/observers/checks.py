"""What [observe]'s profilers need of this machine, checked before any cell runs (preflight.py):
perf's system-wide cpu-clock sampling, ptrace for the stack sampler, its tool (eu-stack, libdw),
c++filt for C++ names, and [observe] io's fsync tracepoints.

    problems = profiler_problems(exp)    # [] when every profiler asked for can run here
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from perflab.errors import Problem
from perflab.observers.io import io_problems
from perflab.places.proc import which


def profiler_problems(observe: Any) -> list[Problem]:
    """perf and the stack sampler must work here, with this user's permissions, before any cell runs
    (`observe`: the experiment's [observe] section)."""
    problems = io_problems(observe.io)  # [observe] io: the fsync tracepoints through perf
    if observe.perf is not None:
        problems += perf_problems()
    if observe.pmp is not None:
        problems += _ptrace_allowed()
        if observe.pmp.tool == "eu-stack" and which("eu-stack") is None:
            problems.append(Problem("observe.pmp.tool", "eu-stack installed", "missing", "apt-get install elfutils"))
        if observe.pmp.tool == "libdw":
            import ctypes

            try:
                ctypes.CDLL("libdw.so.1")
            except OSError:
                problems.append(
                    Problem(
                        "observe.pmp",
                        "libdw.so.1 (elfutils' library)",
                        "missing",
                        "apt-get install libdw1 (or elfutils)",
                    )
                )
        if which("c++filt") is None:
            problems.append(Problem("observe.pmp", "c++filt (C++ names)", "missing", "apt-get install binutils"))
    return problems


def perf_problems() -> list[Problem]:
    if which("perf") is None:
        return [Problem("observe.perf", "perf installed", "missing", "apt-get install linux-perf (or `make setup`)")]
    import tempfile

    with tempfile.TemporaryDirectory(prefix="perflab-check-") as tmp:
        argv = [
            "perf",
            "record",
            "-q",
            "-a",
            "-e",
            "cpu-clock",
            "-F",
            "99",
            "-g",
            "-o",
            f"{tmp}/check.data",
            "--",
            "true",
        ]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
        except subprocess.TimeoutExpired:
            return [Problem("observe.perf", "perf record to work", "no result in 60s", "try `perf record -a -- true`")]
    if done.returncode == 0:
        return []
    tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:300]
    hint = (
        "system-wide cpu-clock sampling needs root or kernel.perf_event_paranoid <= 0: "
        "`sysctl kernel.perf_event_paranoid=0`; Debian's perf must match the running kernel (linux-perf)"
    )
    return [Problem("observe.perf", "perf record -a -e cpu-clock to work", f"exit {done.returncode}: {tail}", hint)]


def _ptrace_allowed() -> list[Problem]:
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", encoding="ascii") as f:
            scope = int(f.read().strip())
    except (OSError, ValueError):
        return []  # no Yama: classic ptrace rules, same user or root
    if scope >= 3 or (scope >= 2 and os.geteuid() != 0):
        return [
            Problem(
                "observe.pmp",
                "ptrace allowed (kernel.yama.ptrace_scope)",
                f"ptrace_scope = {scope}",
                "run as root, or `sysctl kernel.yama.ptrace_scope=1` (3 cannot be lowered until reboot)",
            )
        ]
    return []
