"""Server binaries per variant: the installed package, another package version, a basedir, a build.

    build = installed()                                   # today's mariadbd, from $PATH
    build = resolve("old", spec.builds["old"], cache)     # unpacked or built into the cache
    Mysqld(..., binary=build.binary, share=build.share)
    row["build"] = build.record()                         # the cell's `build` (export format)

A Build knows what it is (`describe`: the binary's sha256, its `--version`, the compiler named
in its `.comment` section) and which datadirs it can open (`format`: server kind and
major.minor version; builds of one format share one dataset snapshot).

The cache (`cache_root()`): $PERFLAB_CACHE, else $XDG_CACHE_HOME/perflab, else
~/.cache/perflab. Layout: packages/NAME_VERSION/ (unpacked .deb), src/ (Debian source
packages), work/SOURCE/ (one build tree per source), builds/KEY/ (an installed build, its logs
and build.json, written last: a build without it is not a build); beside them perflab/cache.py's
other users: calibration/, server-options/, notices/, dpkg-owners.json.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from perflab import debuginfo, dpkg, elf
from perflab.errors import PerflabError
from perflab.places.proc import call, clean_env, per_binary
from perflab.servers import identity

MANIFEST = "build.json"


class BuildError(PerflabError):
    """A build failed: its step, the log, and the log's tail; only its variant's cells fail."""

    def __init__(self, name: str, step: str, log: Path | None, tail: str = "") -> None:
        where = f"; log: {log}" if log else ""
        super().__init__(f"build {name!r} failed at {step}{where}" + (f"\n{tail}" if tail else ""), None)
        self.step = step
        self.log = log


@dataclass(frozen=True)
class Build:
    name: str | None  # None: the installed package
    kind: str  # installed | package | basedir | source
    binary: Path
    version: str
    sha256: str
    compiler: str | None
    share: Path | None = None  # the error messages and charsets of this binary (lc-messages-dir)
    recipe: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # build time, cache key, profile hash, ...
    # where `compiler` was read (".comment", "dbgsym: PATH", "buildinfo: PATH") or why it is None
    # ("none: stripped"); None: a build described before perflab recorded it
    compiler_source: str | None = None

    @property
    def server(self) -> str:
        """mariadb, mysql, percona or postgresql, from the version string (servers/identity.py)."""
        return server_kind(self.version)

    @property
    def format(self) -> str:
        """Which datadirs it opens: builds of one format share a dataset snapshot (the server
        servers/identity.py: major.minor for MariaDB and MySQL, the major version for PostgreSQL)."""
        return identity.format_of(self.server, self.version, self.sha256)

    @property
    def launcher(self) -> list[str]:
        """What runs the binary: [] for the system's loader, or a private root's loader with its
        libraries (extra["root"], builds/debroot.py), to put before the binary's argv."""
        return launcher(self.extra.get("root"))

    def named(self, name: str | None) -> Build:
        """This build under another [builds] name: a cached build serves every entry that asks for it."""
        return replace(self, name=name)

    def record(self) -> dict[str, Any]:
        """The cell's `build` (Interface: name, binary, sha256, version, compiler), plus how it was made."""
        return {
            "name": self.name,
            "binary": str(self.binary),
            "sha256": self.sha256,
            "version": self.version,
            "compiler": self.compiler,
            "compiler_source": self.compiler_source,
            "kind": self.kind,
            "recipe": self.recipe,
            **self.extra,
        }

    def manifest(self) -> dict[str, Any]:
        return {**self.record(), "share": str(self.share) if self.share else None}

    @classmethod
    def from_manifest(cls, data: dict[str, Any]) -> Build:
        known = {"name", "kind", "binary", "version", "sha256", "compiler", "compiler_source", "recipe", "share"}
        return cls(
            name=data["name"],
            kind=data["kind"],
            binary=Path(data["binary"]),
            version=data["version"],
            sha256=data["sha256"],
            compiler=data["compiler"],
            compiler_source=data.get("compiler_source"),
            share=Path(data["share"]) if data.get("share") else None,
            recipe=data.get("recipe"),
            extra={k: v for k, v in data.items() if k not in known},
        )


def server_kind(version: str) -> str:
    return identity.flavor_of(version)


def sha256(path: Path) -> str:
    def digest() -> str:
        found = hashlib.sha256()
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                found.update(block)
        return found.hexdigest()

    return per_binary([path], ("sha256",), digest)


def compiler_of(binary: Path) -> tuple[str | None, str]:
    """(the compiler, where it was read): the binary's own .comment section (".comment": "GCC:
    (Debian 12.2.0-14) 12.2.0"); when stripped (Debian strips its packages), the .comment of its
    -dbgsym package's debug file, found by build ID ("dbgsym: PATH"), else the compiler its
    package's buildinfo lists ("buildinfo: PATH"); else None and why ("none: stripped")."""
    names = elf.comment(binary)
    if names is None:
        return None, "none: not a readable ELF file"
    if names:
        return _compiler_in(names), ".comment"
    debug = debug_file(binary)
    found = _compiler_in(elf.comment(debug) or []) if debug is not None else None
    if found:
        return found, f"dbgsym: {debug}"
    for info in buildinfo_files(binary):
        found = compiler_in_buildinfo(info)
        if found:
            return found, f"buildinfo: {info}"
    return None, "none: stripped"


def _compiler_in(names: list[str]) -> str | None:
    compilers = [n for n in names if n.startswith(("GCC:", "clang", "Debian clang", "Ubuntu clang"))]
    return compilers[0] if compilers else (names[0] if names else None)


DEBUG_ROOT = Path("/usr/lib/debug")  # where -dbgsym packages install: .build-id/XX/REST.debug


def debug_file(binary: Path, root: Path | None = None) -> Path | None:
    """The detached debug file of `binary` (its -dbgsym package's), by its GNU build ID: in the
    tree it was unpacked in (a private root's usr/lib/debug, debug_symbols = true), else under
    `root` (default: the system's /usr/lib/debug, where an installed -dbgsym puts it)."""
    return debuginfo.debug_file(binary, root or DEBUG_ROOT)


def buildinfo_files(binary: Path) -> list[Path]:
    """Buildinfo files of the package that holds `binary`: /usr/share/doc/PACKAGE/buildinfo_*.gz
    (dh-buildinfo) or *.buildinfo; for an unpacked package (the cache's packages/NAME/root), those
    in its own root. The installed package is asked of dpkg."""
    parts = binary.parts
    if "usr" not in parts:
        return []
    root = Path(*parts[: parts.index("usr")])
    if root == Path("/"):
        owners = dpkg.search(str(binary))[1]  # kept across runs
        packages = [line.split(":", 1)[0] for line in owners.splitlines() if ":" in line]
        docs = [root / "usr" / "share" / "doc" / p for p in packages]
    else:
        docs = sorted((root / "usr" / "share" / "doc").glob("*"))
    return [f for d in docs for pattern in ("buildinfo_*.gz", "*.buildinfo") for f in sorted(d.glob(pattern))]


# a .buildinfo's Installed-Build-Depends ("g++-12 (= 12.2.0-14),") or dh-buildinfo's dpkg -l lines
_BUILDINFO_COMPILER = re.compile(
    r"^\s*(?:ii\s+)?((?:g\+\+|gcc|clang)-\d+)(?::[a-z0-9]+)?\s*(?:\(=\s*([^)\s]+)\)|\s([^\s,]+))", re.MULTILINE
)


def compiler_in_buildinfo(path: Path) -> str | None:
    """The compiler a buildinfo file lists, "g++-12 12.2.0-14" (the C++ compiler first: the servers are C++)."""
    try:
        data = path.read_bytes()
        text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8", errors="replace")
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    found = {m.group(1): m.group(2) or m.group(3) for m in _BUILDINFO_COMPILER.finditer(text)}
    best = sorted(found, key=lambda name: (not name.startswith("g++"), not name.startswith("gcc"), name))
    return f"{best[0]} {found[best[0]]}" if best else None


def write_wrapper(path: Path, argv: list[str], argv0: bool = False) -> Path:
    """An executable at `path` that execs `argv` with its own arguments: for a tool that runs a
    program by one path (mariadb-install-db's mariadbd, initdb's postgres) when that program must
    run through a private root's loader. `argv0`: the program sees the wrapper's path as its
    argv[0] (the loader's --argv0), so it finds the wrappers beside it. Every word is quoted for sh
    (they are perflab's own paths)."""
    words = [shlex.quote(w) for w in argv[:-1]] + (['--argv0 "$0"'] if argv0 else []) + [shlex.quote(argv[-1])]
    header = "#!/bin/sh\n# written by perflab: a program through its private root's loader\n"
    path.write_text(f'{header}exec {" ".join(words)} "$@"\n', encoding="utf-8")
    path.chmod(0o755)
    return path


def launcher(root: dict[str, Any] | None) -> list[str]:
    """A private root's loader and library path (its record: dir, loader, library_path), or []."""
    if not root:
        return []
    base = Path(root["dir"])
    libraries = ":".join(str(base / p) for p in root["library_path"])
    return [str(base / root["loader"]), "--inhibit-cache", "--library-path", libraries]


def version_of(binary: Path, prefix: list[str] | None = None) -> str:
    """What `mariadbd --version` says after "Ver": "10.11.18-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)".
    `prefix`: the loader that runs it (a private root's)."""
    argv = [*(prefix or []), str(binary), "--version"]
    ask = functools.partial(call, argv, what=f"{binary} --version", env=clean_env(), timeout=60)
    out = per_binary([binary, *(prefix or [])[:1]], ("stdout of", *argv), ask).strip()
    match = re.search(r"\bVer\s+(.*)", out)
    return match.group(1).strip() if match else out


def describe(binary: Path, *, name: str | None, kind: str, share: Path | None = None, **extra: Any) -> Build:
    compiler, source = compiler_of(binary)
    return Build(
        name=name,
        kind=kind,
        binary=binary,
        version=version_of(binary, launcher(extra.get("root"))),
        sha256=sha256(binary),
        compiler=compiler,
        compiler_source=source,
        share=share,
        recipe=extra.pop("recipe", None),
        extra=extra,
    )


def read_manifest(directory: Path) -> Build | None:
    """The build stored in `directory`, if complete and its binary unchanged."""
    try:
        data = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
        build = Build.from_manifest(data)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not build.binary.is_file():
        return None
    return build


def write_manifest(directory: Path, build: Build) -> None:
    tmp = directory / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(build.manifest(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(directory / MANIFEST)
