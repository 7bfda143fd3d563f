"""Process-per-connection accounting: a PostgreSQL server is a postmaster and its backends.

CPU, page faults and context switches of the server over a window are those of every process
of the tree: the live ones (postmaster, auxiliary processes, client backends: each its own
/proc/PID/stat and status) plus those that exited, which the postmaster reaped and the kernel
added to its cumulative children's counters (/proc/PID/stat cutime, cstime, cminflt, cmajflt).
So a backend alive at both ends counts its difference, one that exited in the window counts
its final use less what it had at the start, one born and gone inside counts all of it.
Context switches of exited processes are not counted: the kernel keeps no children's sum of
them (pgbench's connections live as long as the run, so a cell's backends are all live).

Memory: PSS summed over the tree (smaps_rollup). RSS would count shared_buffers once per
backend; PSS divides each shared page among the processes that map it, so the sum is the
memory the server really holds. The per-second series (`rss_samples`) keeps RSS summed over
the tree, as before; `pss_end_bytes` is the last PSS sum taken while the workload still ran.

The tree's counters and memory: run/proctree.py. Here: the check that every backend has the
variant's allocator and environment.

    verify_backends(postmaster_pid, "jemalloc", Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"))
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab import allocators
from perflab.errors import AllocatorNotMappedError
from perflab.places.proctree import tree

if TYPE_CHECKING:
    from perflab.servers.postgresql.server import PostgreSQL


def verify_backends(pid: int, name: str | None, library: Path | str | None, env: dict[str, str] | None = None) -> int:
    """How many processes of the server besides the postmaster (backends, auxiliary processes)
    map the variant's allocator and have its environment; AllocatorNotMappedError naming the
    first that does not (for glibc: that maps another allocator).

    The environment is read where the kernel still shows it: PostgreSQL's ps_status.c moves
    `environ` to the heap and writes a child's process title over the old argv and environment
    area, so /proc/PID/environ of a backend or auxiliary process reads as NUL bytes. Such a
    process has the environment it was forked with, the postmaster's (which never sets a
    title): the postmaster's is checked, and a child's only where it still shows one."""
    _check_environ(pid, _environ(pid), env)
    count = 0
    for member in tree(pid)[1:]:
        try:
            mapped = allocators.mapped_libraries(member)
            environ = _environ(member)
        except (FileNotFoundError, ProcessLookupError):
            continue
        if environ:  # empty: overwritten by the process title, inherited from the postmaster
            _check_environ(member, environ, env)
        if not mapped:  # exited between the listing and the read
            continue
        if library is not None and not allocators.is_mapped(library, mapped):
            raise AllocatorNotMappedError(
                f"{library} ({name}) is not mapped into backend {member} ({_cmdline(member)})",
                "the preload and environment must reach every backend: is the library readable by the server's user?",
            )
        foreign = allocators.foreign_allocators(mapped) if library is None else []
        if foreign:
            raise AllocatorNotMappedError(f"glibc malloc requested but backend {member} maps {', '.join(foreign)}")
        count += 1
    return count


def _check_environ(pid: int, environ: dict[str, str], env: dict[str, str] | None) -> None:
    missing = sorted(k for k, v in (env or {}).items() if environ.get(k) != v)
    if missing:
        raise AllocatorNotMappedError(
            f"server process {pid} ({_cmdline(pid)}) lacks the variant's environment: {', '.join(missing)}",
            "the environment must reach every backend",
        )


def _environ(pid: int) -> dict[str, str]:
    data = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in data.decode(errors="replace").split("\0") if "=" in item)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "gone"


BACKENDS_DEADLINE_S = 10.0  # for the clients' connections, when the window starts at once


def verified(server: PostgreSQL, cell: Any, child: Any, database: str) -> int:
    """The allocator check of every backend, once the clients have connected: a backend on the
    client's `database` for each of its connections (its title names the database). Counted by
    title, not as the children beyond those before the client started: that count took in a
    process about to exit (perflab's own connection's backend, on a busy machine), so the wait
    for one more child ran to its deadline, and the check ran after the clients had gone. Met on
    two looks 50 ms apart: pgbench's first connection (it reads the scale) is on the database too,
    and goes before its clients connect."""
    deadline, met = time.monotonic() + BACKENDS_DEADLINE_S, 0
    while time.monotonic() < deadline and child.poll() is None:
        met = met + 1 if server.client_backends(database) >= cell.threads else 0
        if met == 2:
            break
        time.sleep(0.05)
    return verify_backends(server.pid, cell.preload, server.preload, cell.env)
