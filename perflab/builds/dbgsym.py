"""A private root's debug symbols: its server package's -dbgsym, from the suite's debug archive.

Debian builds every binary package's debug symbols into PACKAGE-dbgsym, of the same version, in
the debug archive (deb.debian.org/debian-debug, suites SUITE-debug, component main): detached
debug files at usr/lib/debug/.build-id/XX/REST.debug, named by their binary's GNU build ID.
`add` reads that archive through a second private apt index (aptindex.py: CACHE/debroot/index/
sid-debug, verified against the same keyring) and moves the debug files into the root's own
usr/lib/debug, where perflab/debuginfo.py finds them for the build record's compiler_source, perf
and the stack sampler. It never fails: without the archive or the package it says why.

    found = add(root, "mysql-server-core", cache)
    found.files   # ("usr/lib/debug/.build-id/1f/8e...c4.debug", ...), relative to root.dir
    found.reason  # None, or why there are none: "sid-debug could not be read: apt-get update ..."

What was added is recorded beside the root (roots/KEY/debug.json, written last; each file is
moved in by a rename, so a half-added package leaves only whole debug files, and is added again):
    {"format": 1, "package": "mysql-server-core-dbgsym", "version": "9.7.4-2", "suite": "sid-debug",
     "mirror": "http://deb.debian.org/debian-debug", "files": [...], "created": ..., "setup_s": 4.1}
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from perflab.errors import PerflabError
from perflab.builds.aptindex import ARCH, DEBUG, Package, download_alone, known, locked, mirror, say, suite_index
from perflab.builds.debroot import Root
from perflab.places.proc import call, clean_env
from perflab.units import utc_now

FORMAT = 1  # debug.json's "format"
MANIFEST = "debug.json"
DEBUG_DIR = Path("usr/lib/debug")


@dataclass(frozen=True)
class DebugSymbols:
    package: str  # "mysql-server-core-dbgsym=9.7.4-2"
    suite: str  # "sid-debug"
    files: tuple[str, ...] = ()  # the debug files added, relative to the root
    reason: str | None = None  # why there are none


def dbgsym_of(package: str) -> str:
    """Debian's name of a binary package's debug symbols: "mysql-server-core" -> "mysql-server-core-dbgsym"."""
    return package.partition("=")[0] + "-dbgsym"


def add(root: Root, package: str, cache: Path) -> DebugSymbols:
    """`package`'s -dbgsym (the version in the root) in the root: from its record when added
    before, else from the suite's debug archive. Never raises: a DebugSymbols with a reason."""
    started = time.monotonic()
    name, suite = dbgsym_of(package), root.suite + DEBUG
    version = root.packages.get(package.partition("=")[0])
    wanted = f"{name}={version}"
    if version is None:
        return DebugSymbols(wanted, suite, reason=f"the root holds no {package.partition('=')[0]}")
    found = recorded(root, name, version)
    if found is not None:
        return found
    try:
        index = suite_index(suite, cache)
        with locked(index):
            found = recorded(root, name, version)  # another perflab's, meanwhile
            if found is not None:
                return found
            have = known(index, [name]).get(name, [])
            if version not in have:
                has = f"; it has {', '.join(have)}" if have else ""
                return DebugSymbols(wanted, suite, reason=f"{suite} has no {wanted}{has}")
            say(f"{suite}: {wanted} into the root {root.key}")
            deb = download_alone(index, Package(name, version, ARCH))
            files = unpack(deb, root)
            _write(root, {"package": name, "version": version, "suite": suite, "files": files}, started)
            deb.unlink(missing_ok=True)
    except PerflabError as exc:
        return DebugSymbols(
            wanted, suite, reason=f"{suite} could not be read ({mirror(suite)}): {apt_words(exc.message)}"
        )
    return DebugSymbols(wanted, suite, tuple(files))


def apt_words(message: str) -> str:
    """The line of apt's that says what failed ("Failed to fetch URL  400  Bad Request"), else the first."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()] or ["no message"]
    said = [line for line in lines if "Failed to fetch" in line] or [line for line in lines if line.startswith("E: ")]
    return (said or lines)[0].removeprefix("E: ").removeprefix("W: ")


def unpack(deb: Path, root: Root) -> list[str]:
    """The debug files of `deb` moved into the root's usr/lib/debug, one rename each (unpacked
    beside the root first): their paths relative to the root."""
    aside = root.dir.parent / ".debug.partial"
    shutil.rmtree(aside, ignore_errors=True)
    aside.mkdir()
    try:
        call(["dpkg-deb", "-x", str(deb), str(aside)], what=f"dpkg-deb -x {deb.name}", env=clean_env(), timeout=1800)
        moved = []
        for directory, _, names in os.walk(aside / DEBUG_DIR):
            for file in sorted(names):
                path = Path(directory) / file
                if path.is_symlink() or not path.is_file():
                    continue
                relative = path.relative_to(aside)
                (root.dir / relative).parent.mkdir(parents=True, exist_ok=True)
                os.chmod(path, 0o644)
                path.replace(root.dir / relative)
                moved.append(str(relative))
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    return sorted(moved)


def recorded(root: Root, name: str, version: str) -> DebugSymbols | None:
    """What debug.json says was added of `name`=`version`, if its files are all still there."""
    try:
        data = json.loads((root.dir.parent / MANIFEST).read_text(encoding="utf-8"))
        if data["format"] != FORMAT or (data["package"], data["version"]) != (name, version):
            return None
        files = tuple(data["files"])
        suite = data["suite"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not all((root.dir / f).is_file() for f in files):
        return None
    return DebugSymbols(f"{name}={version}", suite, files)


def _write(root: Root, data: dict, started: float) -> None:
    record = {"format": FORMAT, **data, "mirror": mirror(data["suite"]), "created": utc_now()}
    record["setup_s"] = round(time.monotonic() - started, 1)
    tmp = root.dir.parent / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(root.dir.parent / MANIFEST)
