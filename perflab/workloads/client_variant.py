"""The workload client's variant: its preload, environment and client library, and the proof
from /proc/PID/maps that sysbench runs with them.

Debian's sysbench links libmariadb.so.3 (`ldd /usr/bin/sysbench`). `client_library` is
loaded under that soname: a directory of the cell holds a link `libmariadb.so.3` to the
chosen file and goes first in LD_LIBRARY_PATH, so ld.so loads it instead of the system's,
once (an LD_PRELOAD would put it in front but could leave the system's copy loaded beside it).
A library sysbench cannot load (another ABI, missing symbols) is found before the matrix
starts: `sysbench --version` with LD_BIND_NOW=1 resolves every symbol at start-up.

Output: the `client` fields of a cell row, e.g. {"preload": "jemalloc", "preload_library":
"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "preload_version": "libjemalloc2 5.3.0-1",
"library_mapped": "/usr/lib/x86_64-linux-gnu/libmariadb.so.3", "library_version":
"libmariadb3 1:10.11.19-0+deb12u1", "env": {}}.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perflab import allocators
from perflab.errors import AllocatorNotMappedError, WorkloadError
from perflab.places.proc import clean_env
from perflab.spec.matrix import Cell

SONAME = "libmariadb.so.3"  # what Debian's sysbench links (DT_NEEDED)
CLIENT_LIBRARIES = ("libmariadb.so", "libmysqlclient.so", "libperconaserverclient.so")  # by file name
EXEC_DEADLINE_S = 10.0


def environment(cell: Cell, rundir: Path) -> dict[str, str]:
    """sysbench's environment for `cell`: perflab's (clean), the variant's client_env, its
    preload and its library directory."""
    extra = dict(cell.client_env)
    preload = allocators.resolve(cell.client_preload) if cell.client_preload else None
    if preload is not None:
        extra["LD_PRELOAD"] = _plain_path(preload, rundir / "client-preload.so")
    if cell.client_library:
        extra["LD_LIBRARY_PATH"] = str(library_dir(Path(cell.client_library), rundir / "client-lib"))
    return clean_env(extra)


def _plain_path(path: Path, link: Path) -> str:
    """ld.so splits LD_PRELOAD at spaces and colons: such a path goes through a link."""
    if not any(c in str(path) for c in " :\t"):
        return str(path)
    link.unlink(missing_ok=True)
    link.symlink_to(path)
    return str(link)


def library_dir(library: Path, directory: Path) -> Path:
    """A directory holding `library` under the soname sysbench asks for."""
    directory.mkdir(parents=True, exist_ok=True)
    link = directory / SONAME
    link.unlink(missing_ok=True)
    link.symlink_to(os.path.realpath(library))
    return directory


def load_problem(library: Path) -> str | None:
    """None if sysbench starts with `library` as its client library; else what ld.so said."""
    with tempfile.TemporaryDirectory(prefix="perflab-client-lib-") as tmp:
        link = library_dir(library, Path(tmp)) / SONAME
        env = clean_env({"LD_LIBRARY_PATH": tmp, "LD_BIND_NOW": "1"})
        try:
            done = subprocess.run(
                ["sysbench", "--version"], check=False, env=env, capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
    if done.returncode == 0:
        return None
    said = " ".join((done.stderr or done.stdout).strip().splitlines()[-2:])[:300] or f"exit {done.returncode}"
    return said.replace(str(link), str(library))


def configured(cell: Cell) -> dict[str, Any]:
    """The `client` fields as its variant asked (a row's, before anything is proven mapped)."""
    return {"preload": cell.client_preload, "env": cell.client_env, "library": cell.client_library}


def loaded(pid: int, cell: Cell, output: Path, attach: Callable[[int], None], workload: Any) -> dict[str, Any]:
    """The client's `client` fields, once ld.so has mapped its libraries (sysbench's libmariadb,
    a client variant's preload); `attach(pid)` (the client's profilers) runs after that. A
    workload that links no client library (go-tpc: a static Go binary) is attached at once."""
    if not workload.links_client_library:
        attach(pid)
        return configured(cell)
    wait_loaded(pid, cell, output)
    attach(pid)
    return prove(pid, cell)


def wait_loaded(
    pid: int, cell: Cell, output: Path, name: str = "sysbench", deadline_s: float = EXEC_DEADLINE_S
) -> None:
    """Wait until `pid` runs `name` with its libraries loaded: the client starts under setpriv
    (and taskset), which exec it, and ld.so maps the preloads, then the client library, after
    the exec. A client that ends first (its script failed in init) fails with its `output`'s tail."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")) == name and _client_libraries(pid, cell)[1]:
                return
        except OSError:
            said = (
                output.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-10:]
                if output.is_file()
                else []
            )
            raise WorkloadError(
                "\n".join([f"{name} (pid {pid}) ended before it could be checked:", *said]), f"full output: {output}"
            ) from None
        time.sleep(0.01)
    raise WorkloadError(f"pid {pid} did not load {name}'s client library within {deadline_s:.0f}s", f"see {output}")


def _client_libraries(pid: int, cell: Cell) -> tuple[set[str], list[str]]:
    """(the real path of every file mapped into `pid`, the client libraries among them)."""
    mapped = {os.path.realpath(p) for p in allocators.mapped_libraries(pid)}
    return mapped, client_libraries(mapped, os.path.realpath(cell.client_library) if cell.client_library else None)


def prove(pid: int, cell: Cell) -> dict[str, Any]:
    """The `client` fields of a cell row from sysbench's maps; AllocatorNotMappedError if its
    preload or library is not the one the variant asked for."""
    mapped, found = _client_libraries(pid, cell)
    preload = allocators.resolve(cell.client_preload) if cell.client_preload else None
    return proven(
        cell,
        mapped,
        found,
        os.path.realpath(preload) if preload is not None else None,
        os.path.realpath(cell.client_library) if cell.client_library else None,
        f"sysbench (pid {pid})",
    )


def proven(
    cell: Cell, mapped: set[str], found: list[str], preload: str | None, library: str | None, who: str
) -> dict[str, Any]:
    """The `client` fields from the real paths mapped into the client (`found`: its client libraries)
    where it runs, against the real paths its variant asked for there (`preload`, `library`: None for
    none); AllocatorNotMappedError when they differ. `who`: the client, as the error names it."""
    out: dict[str, Any] = configured(cell)
    if preload is not None:
        if preload not in mapped:
            raise AllocatorNotMappedError(
                f"client_preload {preload} is not mapped into {who}", "the library failed to load"
            )
        out["preload_library"] = preload
        out["preload_version"] = None  # versions(), after the window
    mine = found[0] if found else None
    if library and (mine is None or mine != library or len(found) > 1):
        raise AllocatorNotMappedError(
            f"client_library {cell.client_library} is not what {who} runs: mapped {found or 'none'}",
            f"sysbench links {SONAME}; perflab loads the library under that name through LD_LIBRARY_PATH",
        )
    out["library_mapped"] = mine
    out["library_version"] = None  # versions(), after the window
    return out


def client_libraries(mapped: set[str], library: str | None) -> list[str]:
    """The client libraries among real mapped paths: the variant's (`library`), or by file name."""
    return sorted(p for p in mapped if p == library or os.path.basename(p).startswith(CLIENT_LIBRARIES))


def versions(fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` (prove()'s) with the Debian package versions of the client's preload and library.
    Asked after the window, not while the client runs: each `dpkg-query -S` reads the whole
    package database, which took seconds on a busy machine (make test's five workers) and, inside
    a 1 s warm-up, let perflab begin its window after the client had ended."""
    if fields.get("preload_library"):
        fields["preload_version"] = allocators.package_version(fields["preload_library"])
    if fields.get("library_mapped"):
        fields["library_version"] = allocators.package_version(fields["library_mapped"])
    return fields
