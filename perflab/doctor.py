"""`perflab doctor`: what this machine has for perflab, and how to get what it lacks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from perflab import allocators
from perflab.places.proc import which
from perflab.tools import TOOLS, Tool
from perflab.run import storage_dirs
from perflab.run.workdir import TMPFS, foreign, remove_stale_workdirs, stale_workdirs


def _version(path: str, flag: str) -> str:
    try:
        done = subprocess.run([path, flag], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return path
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0][:70] if done.returncode == 0 and text else path


def looked_in() -> list[Path]:
    """Where killed runs' work directories can be: the tmpfs, and the storage directories runs used."""
    return list(dict.fromkeys([Path(TMPFS), *(p for p in storage_dirs.used() if p.is_dir())]))


def clean(console: Console) -> None:
    """Stop what killed perflab runs left behind (only processes they started) and remove it."""
    removed = []
    for base in looked_in():
        for path, _ in stale_workdirs(base):
            _clean_hosts(console, path)
        removed += remove_stale_workdirs(base)
    for path, killed in removed:
        console.print(f"removed {path}" + (f"; stopped {', '.join(map(str, killed))}" if killed else ""))
    on_hosts = _clean_host_storages(console)
    if not removed and not on_hosts:
        where = [*map(str, looked_in()), *(f"{ssh}:{path}" for ssh, path in storage_dirs.used_on_hosts())]
        console.print(f"nothing left behind by earlier runs (looked in {', '.join(where)})")
    for base in looked_in():
        for path, why in foreign(base):  # docs/trust.md#the-sweep
            text = f"{path}: {why}; not made by this perflab (uid {os.geteuid()})"
            console.print(f"[yellow]left alone:[/] {escape(text)}", highlight=False, soft_wrap=True)


def _clean_host_storages(console: Console) -> int:
    """The storage directories runs used on hosts, swept (hosts/clean.py); how many were removed."""
    if not storage_dirs.used_on_hosts():
        return 0
    from perflab.hosts.clean import clean_host_storages

    outcomes = clean_host_storages()
    for host, path, killed, why in outcomes:
        if why is None:
            console.print(f"removed {host}:{path}" + (f"; stopped {', '.join(map(str, killed))}" if killed else ""))
        else:
            console.print(f"[yellow]left {host}:{path}[/]: {why}")
    return sum(1 for *_, why in outcomes if why is None)


def _clean_hosts(console: Console, workdir: Path) -> None:
    """What the dead run at `workdir` left on its remote hosts (docs/hosts.md), stopped and removed."""
    if not (workdir / "hosts.json").exists():
        return
    from perflab.hosts.clean import clean_remote

    for host, path, killed, why in clean_remote(workdir):
        if why is None:
            console.print(f"removed {host}:{path}" + (f"; stopped {', '.join(map(str, killed))}" if killed else ""))
        else:
            console.print(f"[yellow]left {host}:{path}[/]: {why}; {workdir} keeps its record for the next --clean")


def collect() -> dict[str, Any]:
    """What `perflab doctor` shows, as data (`--format json`): tools, allocators, machine, and
    `ok`, false when a required tool is missing."""
    tools = [_tool(t) for t in TOOLS]
    return {
        "ok": all(t["present"] or not t["required"] for t in tools),
        "tools": tools,
        "allocators": [_GLIBC, *(_allocator(name, a.package) for name, a in allocators.KNOWN.items())],
        "machine": _machine(),
    }


def _tool(tool: Tool) -> dict[str, Any]:
    path = which(tool.name)
    version = _version(path, tool.version_flag) if path and tool.version_flag else path
    get = None if path else tool.get or f"apt-get install {tool.package}"
    return {
        "name": tool.name,
        "present": path is not None,
        "required": tool.required,
        "path": path,
        "version": version,
        "purpose": tool.purpose,
        "package": tool.package,
        "get": get,
    }


_GLIBC = {"name": "glibc", "present": True, "library": None, "version": os.confstr("CS_GNU_LIBC_VERSION"), "get": None}


def _allocator(name: str, package: str) -> dict[str, Any]:
    try:
        path = allocators.resolve(name)
    except LookupError:
        return {"name": name, "present": False, "library": None, "version": None, "get": f"apt-get install {package}"}
    version = allocators.package_version(path) if path is not None else None
    return {"name": name, "present": True, "library": str(path), "version": version, "get": None}


def _machine() -> dict[str, Any]:
    shm = shutil.disk_usage(TMPFS) if os.path.isdir(TMPFS) else None
    try:
        with open("/proc/sys/kernel/perf_event_paranoid", encoding="ascii") as f:
            paranoid: str | None = f.read().strip()
    except OSError:
        paranoid = None
    stale = [found for base in looked_in() for found in stale_workdirs(base)]
    return {
        "tmpfs": TMPFS,
        "tmpfs_free_bytes": shm.free if shm else None,
        "cpus": len(os.sched_getaffinity(0)),
        "perf_event_paranoid": paranoid,
        "uid": os.geteuid(),
        "leftovers": {
            "workdirs": len(stale),
            "processes": sum(len(p) for _, p in stale),
            # runs that left something on remote hosts (hosts.json, docs/hosts.md): --clean connects to them
            "remote": sum(1 for path, _ in stale if (path / "hosts.json").exists()),
        },
    }


def render(console: Console, facts: dict[str, Any]) -> None:
    """Print the tables of `collect()`."""
    tools = Table(title="tools", title_justify="left")
    for col in ("tool", "status", "version / path", "purpose", "get it"):
        tools.add_column(col)
    for t in facts["tools"]:
        status = "[green]ok[/]" if t["present"] else ("[red]missing[/]" if t["required"] else "[yellow]missing[/]")
        tools.add_row(t["name"], status, t["version"] or "", t["purpose"], t["get"] or "")
    console.print(tools)
    allocs = Table(title="allocators (preload = ...)", title_justify="left")
    for col in ("name", "status", "library", "package", "get it"):
        allocs.add_column(col)
    for a in facts["allocators"]:
        status = "[green]ok[/]" if a["present"] else "[yellow]missing[/]"
        library = a["library"] or ("(built in)" if a["present"] else "")
        allocs.add_row(a["name"], status, library, a["version"] or ("?" if a["present"] else ""), a["get"] or "")
    console.print(allocs)
    console.print(_machine_table(facts["machine"]))
    if not facts["ok"]:
        console.print("[red]missing required tools[/]: run `make setup` (as root) to install them")


def _machine_table(m: dict[str, Any]) -> Table:
    machine = Table(title="machine", title_justify="left")
    machine.add_column("check")
    machine.add_column("value")
    free = m["tmpfs_free_bytes"]
    machine.add_row(f"tmpfs {m['tmpfs']}", f"{free / 2**30:.1f} GiB free" if free is not None else "[red]missing[/]")
    machine.add_row("CPUs available", str(m["cpus"]))
    machine.add_row("perf_event_paranoid", m["perf_event_paranoid"] or "unknown")
    machine.add_row("running as", "root" if m["uid"] == 0 else f"uid {m['uid']}")
    left = m["leftovers"]
    machine.add_row(
        "leftovers of killed runs",
        "none"
        if not left["workdirs"]
        else f"[yellow]{left['workdirs']} work dir(s), {left['processes']} live process(es)"
        + (f", {left['remote']} with remote hosts" if left.get("remote") else "")
        + "[/]: perflab doctor --clean removes them",
    )
    return machine
