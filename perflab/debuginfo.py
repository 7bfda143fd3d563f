"""Where a binary's detached debug file is: found by its GNU build ID, as Debian's -dbgsym
packages install them (usr/lib/debug/.build-id/XX/REST.debug), in the tree the binary was
unpacked in (a private root: ROOT/usr/sbin/mysqld -> ROOT/usr/lib/debug) or the system's.

    debug_file(Path("/cache/debroot/roots/KEY/root/usr/sbin/mysqld"))
        -> Path(".../root/usr/lib/debug/.build-id/8d/0e80...af.debug") or None
    tree_debug_dir(Path("/usr/sbin/mariadbd")) -> None   # the system's own: /usr/lib/debug
    root_debug_files(pid)  -> {build ID: debug file} of the private roots `pid` maps files from

The build record's compiler_source (builds), perf's build-ID directory (observers/perf.py)
and the stack sampler's libdw (observers/pmp_sampler.py) all look here.
"""

from __future__ import annotations

from pathlib import Path

from perflab import elf

SYSTEM = Path("/usr/lib/debug")


def tree_debug_dir(binary: Path) -> Path | None:
    """The usr/lib/debug of the tree `binary` is in, below its last `usr` (None: the system's)."""
    parts = Path(binary).parts
    if "usr" not in parts:
        return None
    top = Path(*parts[: len(parts) - 1 - parts[::-1].index("usr")])
    return None if top == Path("/") or not top.parts else top / "usr" / "lib" / "debug"


def at(base: Path, ident: str) -> Path:
    """Where the debug file of build ID `ident` is under a debug directory."""
    return base / ".build-id" / ident[:2] / f"{ident[2:]}.debug"


def debug_file(binary: Path, system: Path = SYSTEM) -> Path | None:
    """`binary`'s debug file by its build ID: its own tree's first, then `system`'s; None if neither has it."""
    ident = elf.build_id(binary)
    if ident is None or len(ident) < 4:
        return None
    for base in (tree_debug_dir(binary), system):
        if base is not None and at(base, ident).is_file():
            return at(base, ident)
    return None


def mapped_files(pid: int) -> list[str]:
    """The files `pid` maps (its binary and libraries), from /proc/PID/maps; [] once it is gone."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return []
    paths = (line.split(None, 5)[5] for line in lines if len(line.split(None, 5)) == 6)
    return list(dict.fromkeys(p for p in paths if p.startswith("/") and not p.endswith(" (deleted)")))


def root_debug_dirs(pid: int) -> list[Path]:
    """The usr/lib/debug directories (with a .build-id) of the private roots `pid` maps files from."""
    found = (tree_debug_dir(Path(p)) for p in mapped_files(pid))
    return list(dict.fromkeys(d for d in found if d is not None and (d / ".build-id").is_dir()))


def root_debug_files(pid: int) -> dict[str, Path]:
    """build ID -> debug file, for every file `pid` maps from a private root that has one."""
    out: dict[str, Path] = {}
    for path in mapped_files(pid):
        base = tree_debug_dir(Path(path))
        if base is None or not (base / ".build-id").is_dir():
            continue
        ident = elf.build_id(Path(path))
        if ident and len(ident) >= 4 and at(base, ident).is_file():
            out[ident] = at(base, ident)
    return out


def remedy(binary: Path, package: str) -> str:
    """How a stripped binary's static functions get their names in a profile."""
    if tree_debug_dir(binary) is not None:  # a private root's: its build can fetch its -dbgsym
        how = "debug_symbols = true on its [builds] entry (its -dbgsym from the suite's debug archive, into its root)"
    else:
        how = (
            f"install {binary.name}'s debug symbols under /usr/lib/debug/.build-id (Debian: the -dbgsym package of"
            f" the debian-debug archive, e.g. {package}; or DEBUGINFOD_URLS=https://debuginfod.debian.net, which"
            " perf and libdw query) or use a build with -g"
        )
    return how + "; perflab then shows their names"
