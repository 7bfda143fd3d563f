"""`perflab doctor`: what this machine has for perflab, and how to get what it lacks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from rich.console import Console
from rich.table import Table

from perflab import allocators
from perflab.preflight import TOOLS, which
from perflab.run.workdir import TMPFS, remove_stale_workdirs, stale_workdirs


def _version(path: str, flag: str) -> str:
    try:
        done = subprocess.run([path, flag], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return path
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0][:70] if done.returncode == 0 and text else path


def clean(console: Console) -> None:
    """Stop what killed perflab runs left behind (only processes they started) and remove it."""
    removed = remove_stale_workdirs(Path(TMPFS))
    for path, killed in removed:
        console.print(f"removed {path}" + (f"; stopped {', '.join(map(str, killed))}" if killed else ""))
    if not removed:
        console.print("nothing left behind by earlier runs")


def render(console: Console) -> bool:
    """Print the tables; True if everything required is present."""
    ok = True
    tools = Table(title="tools", title_justify="left")
    for col in ("tool", "status", "version / path", "purpose", "get it"):
        tools.add_column(col)
    for tool in TOOLS:
        path = which(tool.name)
        if path is None and tool.required:
            ok = False
        status = "[green]ok[/]" if path else ("[red]missing[/]" if tool.required else "[yellow]missing[/]")
        version = _version(path, tool.version_flag) if path and tool.version_flag else (path or "")
        tools.add_row(tool.name, status, version, tool.purpose, "" if path else f"apt-get install {tool.package}")
    console.print(tools)

    allocs = Table(title="allocators (preload = ...)", title_justify="left")
    for col in ("name", "status", "library", "package", "get it"):
        allocs.add_column(col)
    allocs.add_row("glibc", "[green]ok[/]", "(built in)", os.confstr("CS_GNU_LIBC_VERSION") or "?", "")
    for name, alloc in allocators.KNOWN.items():
        try:
            path = allocators.resolve(name)
        except LookupError:
            allocs.add_row(name, "[yellow]missing[/]", "", "", f"apt-get install {alloc.package}")
            continue
        allocs.add_row(name, "[green]ok[/]", str(path), allocators.package_version(path) or "?", "")
    console.print(allocs)

    machine = Table(title="machine", title_justify="left")
    machine.add_column("check")
    machine.add_column("value")
    shm = shutil.disk_usage(TMPFS) if os.path.isdir(TMPFS) else None
    machine.add_row(f"tmpfs {TMPFS}", f"{shm.free / 2**30:.1f} GiB free" if shm else "[red]missing[/]")
    machine.add_row("CPUs available", str(len(os.sched_getaffinity(0))))
    try:
        with open("/proc/sys/kernel/perf_event_paranoid", encoding="ascii") as f:
            machine.add_row("perf_event_paranoid", f.read().strip())
    except OSError:
        machine.add_row("perf_event_paranoid", "unknown")
    machine.add_row("running as", "root" if os.geteuid() == 0 else f"uid {os.geteuid()}")
    stale = stale_workdirs(Path(TMPFS))
    machine.add_row(
        "leftovers of killed runs",
        "none"
        if not stale
        else f"[yellow]{len(stale)} work dir(s), {sum(len(p) for _, p in stale)} live process(es)[/]: "
        "perflab doctor --clean removes them",
    )
    console.print(machine)
    if not ok:
        console.print("[red]missing required tools[/]: run `make setup` (as root) to install them")
    return ok
