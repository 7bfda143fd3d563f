"""A private root: a package of a newer Debian suite with its whole dependency closure, unpacked
(dpkg-deb -x, never installed), whose binaries run through the root's own dynamic loader.

sid's servers need a newer C library than Debian 12's (mysql-server-core 9.7: libc6 >= 2.38), so
libc6 comes from the suite too and a binary runs as

    ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --inhibit-cache \\
        --library-path ROOT/usr/lib/x86_64-linux-gnu ROOT/usr/sbin/mysqld --version

The packages are resolved and downloaded with the suite's private apt index (aptindex.py: the
system's apt state is never touched).

    root = make_root("mysql-server-core", "sid", cache)    # or "mysql-server-core=9.7.4-2"
    subprocess.run(root.argv("usr/sbin/mysqld", ["--version"]))
    versions("mysql-server-core", "sid", cache)            # ["9.7.4-2"]

A root is cached under CACHE/debroot/roots/KEY/ (root/: the unpacked packages; manifest.json,
written last: a directory without it is not a root), KEY the hash of what went into it: the
manifest's format, the suite and the resolved NAME=VERSION:ARCH list. The index remembers which
key a request resolved to until its next apt-get update, so asking again costs no resolution.

manifest.json, format 1 (2026-11-27, the first):
    {"format": 1, "key": "45e7ef4ccc023492", "suite": "sid", "mirror": ..., "keyring": ...,
     "release_expiry_checked": false, "index_updated": "2026-11-27T15:25:01+00:00",
     "request": ["mysql-server-core"], "packages": [{"name": "libc6", "version": "2.43-7"}, ...],
     "loader": "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
     "library_path": ["usr/lib/x86_64-linux-gnu"], "glibc_version": "2.43",
     "created": "2026-11-27T15:25:09+00:00", "setup_s": 8.0}
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perflab.errors import UsageError
from perflab.builds import launcher
from perflab.builds.aptindex import (
    KEYRING,
    SUITES,
    Package,
    RootError,
    check_suite,
    download,
    known,
    locked,
    mirror,
    resolve,
    say,
    settings,
    suite_index,
    updated,
)
from perflab.places.proc import call, clean_env
from perflab.units import utc_now

__all__ = ["SUITES", "Root", "RootError", "make_root", "suite_index", "versions"]

FORMAT = 1  # manifest.json's "format" (history above)
MANIFEST = "manifest.json"
DEFAULT_SUITE = "bookworm"
LOADER = "ld-linux-x86-64.so.2"
# where libc6 puts its loader as a real file (sid, trixie: /usr; bookworm: /lib); /usr/lib64 and
# /lib64 hold a symlink to it (bookworm's is absolute: it would name the system's loader)
LOADER_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu", "usr/lib64", "lib64")
LIBRARY_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
NAME_RE = re.compile(r"[a-z0-9][a-z0-9+.-]+")
VERSION_RE = re.compile(r"[A-Za-z0-9.+~:-]+")
RESOLVED = "resolved.json"  # in an index: request -> key, valid while its `updated` is unchanged


@dataclass(frozen=True)
class Root:
    dir: Path
    loader: Path
    library_path: tuple[Path, ...]
    glibc_version: str
    packages: dict[str, str]  # name -> version
    suite: str
    key: str

    def argv(self, binary: str | Path, args: Sequence[str] = ()) -> list[str]:
        """argv that runs `binary` (absolute, or relative to the root) through the root's loader
        with the root's libraries: --inhibit-cache keeps the system's ld.so.cache out."""
        path = Path(binary)
        path = path if path.is_absolute() else self.dir / path
        return [*launcher(self.record()), str(path), *args]

    def record(self) -> dict[str, Any]:
        """What a cell records of the root, and what Build.launcher reads (paths relative to dir)."""
        return {
            "dir": str(self.dir),
            "loader": str(self.loader.relative_to(self.dir)),
            "library_path": [str(p.relative_to(self.dir)) for p in self.library_path],
            "suite": self.suite,
            "key": self.key,
            "glibc_version": self.glibc_version,
        }

    def foreign_libraries(self, binary: str | Path) -> list[str]:
        """The libraries the loader would map for `binary` from outside the root ([] when the
        closure is complete): after the root's, it still searches its built-in /lib and /usr/lib,
        so a library the root lacked would be the system's, silently."""
        argv = self.argv(binary)
        out = call([argv[0], "--list", *argv[1:]], what=f"{LOADER} --list", env=clean_env(), timeout=60)
        return [path for path in re.findall(r"=> (/\S+)", out) if not Path(path).is_relative_to(self.dir)]


def parse_spec(spec: str) -> tuple[str, str | None]:
    """ "NAME" (the suite's newest) or "NAME=VERSION" -> (name, version or None)."""
    name, equals, version = spec.partition("=")
    if not NAME_RE.fullmatch(name) or (equals and not VERSION_RE.fullmatch(version)):
        raise UsageError(
            f"package {spec!r} is not NAME or NAME=VERSION",
            'e.g. package = "mysql-server-core" (the suite\'s newest) or "mysql-server-core=9.7.4-2"',
        )
    return name, version if equals else None


def check_versions(wanted: Sequence[tuple[str, str | None]], have: dict[str, list[str]], suite: str) -> None:
    """Every wanted package is in the suite, in the version asked for; else exit 2 with what it has."""
    for name, version in wanted:
        if not have.get(name):
            raise UsageError(f"{suite} has no package {name!r}", f"binary packages of {suite}'s main component only")
        if version is not None and version not in have[name]:
            raise UsageError(
                f"{suite} has no {name}={version}; it has {', '.join(have[name])}",
                f'use "{name}={have[name][0]}", or "{name}" for the newest',
            )


def versions(package: str, suite: str, cache: Path) -> list[str]:
    """The versions of binary package `package` in `suite`, newest first."""
    name, _ = parse_spec(package)
    index = suite_index(suite, cache)
    with locked(index):
        return known(index, [name]).get(name, [])


def make_root(package_spec: str, suite: str, cache: Path, extra: Sequence[str] = ()) -> Root:
    """The private root of `package_spec` and the `extra` packages from `suite`: made once per
    resolved package list, then taken from the cache."""
    started = time.monotonic()
    check_suite(suite)
    specs = [package_spec, *extra]
    wanted = [parse_spec(spec) for spec in specs]
    index = suite_index(suite, cache)
    with locked(index):
        remembered = _resolved(index).get(" ".join(specs))
        found = read_root(cache / "debroot" / "roots" / remembered) if remembered else None
        if found is not None:
            return found
        check_versions(wanted, known(index, [name for name, _ in wanted]), suite)
        packages = resolve(index, specs, suite)
        key = root_key(suite, packages)
        _remember(index, " ".join(specs), key)
        home = cache / "debroot" / "roots" / key
        found = read_root(home)
        if found is not None:
            return found
        say(f"{suite}: a private root of {len(packages)} packages for {' '.join(specs)} ({key})")
        debs = download(index, packages)
        root = assemble(home, debs, packages, suite, key)
        data = manifest(root, specs, time.monotonic() - started)
        _write_manifest(home, {**data, **_provenance(index)})
        for deb in debs:  # the root holds them now
            deb.unlink(missing_ok=True)
    return root


def root_key(suite: str, packages: Sequence[Package]) -> str:
    """What went into a root: the manifest's format, the suite and every NAME=VERSION:ARCH."""
    lines = [f"perflab-debroot/{FORMAT}", suite, *sorted(f"{p.name}={p.version}:{p.arch}" for p in packages)]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def assemble(home: Path, debs: Sequence[Path], packages: Sequence[Package], suite: str, key: str) -> Root:
    """Every .deb unpacked into home/root (made aside and renamed: a half-made root is never found)."""
    shutil.rmtree(home, ignore_errors=True)
    partial = home.with_name(f".{home.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "root").mkdir(parents=True)
    for deb in debs:
        call(["dpkg-deb", "-x", str(deb), str(partial / "root")], what=f"dpkg-deb -x {deb.name}", env=clean_env())
    _drop_setid(partial / "root")
    partial.rename(home)
    tree = home / "root"
    loader = find_loader(tree)
    return Root(
        dir=tree,
        loader=loader,
        library_path=tuple(tree / d for d in LIBRARY_DIRS if (tree / d).is_dir() and not (tree / d).is_symlink()),
        glibc_version=glibc_version(loader),
        packages={p.name: p.version for p in packages},
        suite=suite,
        key=key,
    )


def find_loader(tree: Path) -> Path:
    for directory in LOADER_DIRS:
        path = tree / directory / LOADER
        if path.is_file() and not path.is_symlink():
            return path
    raise RootError(f"{tree} holds no {LOADER}", "the closure should hold libc6: does the suite have it for amd64?")


def glibc_version(loader: Path) -> str:
    """The loader's glibc: "ld.so (Debian GLIBC 2.43-7) stable release version 2.43." -> "2.43"."""
    out = call([str(loader), "--version"], what=f"{loader} --version", env=clean_env(), timeout=60)
    match = re.search(r"release version (\d+\.\d+)", out)
    if match is None:
        raise RootError(f"{loader} --version names no glibc version: {out.strip()[:200]}")
    return match.group(1)


def manifest(root: Root, request: Sequence[str], setup_s: float) -> dict:
    """manifest.json's account of the root (paths relative to root/)."""
    return {
        "format": FORMAT,
        "key": root.key,
        "suite": root.suite,
        "request": list(request),
        "packages": [{"name": name, "version": version} for name, version in sorted(root.packages.items())],
        "loader": str(root.loader.relative_to(root.dir)),
        "library_path": [str(d.relative_to(root.dir)) for d in root.library_path],
        "glibc_version": root.glibc_version,
        "created": utc_now(),
        "setup_s": round(setup_s, 1),
    }


def read_root(home: Path) -> Root | None:
    """The root cached in `home`, if complete, of this FORMAT, and its loader still there."""
    try:
        data = json.loads((home / MANIFEST).read_text(encoding="utf-8"))
        if data["format"] != FORMAT or data["key"] != home.name:
            return None
        tree = home / "root"
        root = Root(
            dir=tree,
            loader=tree / data["loader"],
            library_path=tuple(tree / d for d in data["library_path"]),
            glibc_version=data["glibc_version"],
            packages={p["name"]: p["version"] for p in data["packages"]},
            suite=data["suite"],
            key=data["key"],
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return root if root.loader.is_file() else None


def _provenance(index: Path) -> dict:
    """Where the packages came from and how they were checked."""
    return {
        "mirror": mirror(index.name),
        "keyring": str(KEYRING),
        "release_expiry_checked": settings(index).get("Acquire::Check-Valid-Until", "true") != "false",
        "index_updated": updated(index),
    }


def _resolved(index: Path) -> dict[str, str]:
    """request -> key, as resolved since the index's last update ({} after an update)."""
    try:
        data = json.loads((index / RESOLVED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data.get("keys", {}) if data.get("updated") == updated(index) else {}


def _remember(index: Path, request: str, key: str) -> None:
    data = {"updated": updated(index), "keys": {**_resolved(index), request: key}}
    tmp = index / (RESOLVED + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(index / RESOLVED)


def _write_manifest(home: Path, data: dict) -> None:
    tmp = home / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(home / MANIFEST)


def _drop_setid(tree: Path) -> None:
    """dpkg-deb -x as root keeps set-user-ID and set-group-ID bits: none belongs in a cache."""
    for directory, _, files in os.walk(tree):
        for name in files:
            path = os.path.join(directory, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode) and mode & (stat.S_ISUID | stat.S_ISGID):
                os.chmod(path, stat.S_IMODE(mode) & ~(stat.S_ISUID | stat.S_ISGID))
