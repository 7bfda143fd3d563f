"""Another version of a Debian package, unpacked into the cache, never installed.

`apt-get download NAME=VERSION` fetches the .deb (from any configured suite: bookworm beside
bookworm-security), `dpkg-deb -x` unpacks it under packages/NAME_VERSION/root. The server
binary and its error messages and charsets are used from there; its shared libraries are the
system's (a point release of one Debian suite links against the same ones).

    build = unpack("old", "mariadb-server-core=1:10.11.18-0+deb12u1", cache)
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from perflab import debuginfo, elf
from perflab.errors import PerflabError
from perflab.builds import Build, BuildError, dbgsym, debroot, describe, read_manifest, write_manifest
from perflab.places.proc import call, clean_env
from perflab.spec.builds import server_binary

SHARE_DIRS = ("usr/share/mysql", "usr/share/mariadb")


def directory(cache: Path, package: str) -> Path:
    name, version = package.split("=", 1)
    return cache / "packages" / re.sub(r"[^A-Za-z0-9.+~-]", "_", f"{name}_{version}")


def cached(name: str, package: str, cache: Path) -> Build | None:
    build = read_manifest(directory(cache, package))
    return None if build is None else build.named(name)


def unpack(name: str, package: str, cache: Path) -> Build:
    """The package's server, unpacked once per version into the cache."""
    found = cached(name, package, cache)
    if found is not None:
        return found
    started = time.monotonic()
    home = directory(cache, package)
    shutil.rmtree(home, ignore_errors=True)
    downloads, root, logs = home / "download", home / "root", home / "logs"
    for path in (downloads, root, logs):
        path.mkdir(parents=True, exist_ok=True)
    log = logs / "download.txt"
    try:  # apt-get download writes into the working directory
        out = call(
            ["apt-get", "download", package], what="apt-get download", env=clean_env(), timeout=1800, cwd=downloads
        )
        log.write_text(out, encoding="utf-8")
    except PerflabError as exc:  # apt's own message: no such version, no network
        log.write_text(str(exc), encoding="utf-8")
        raise BuildError(
            name,
            "download",
            log,
            f"{_tail(str(exc))}\nversions known to apt: apt-cache madison {package.split('=')[0]}",
        ) from None
    debs = sorted(downloads.glob("*.deb"))
    if not debs:
        raise BuildError(name, "download", log, "apt-get download wrote no .deb")
    for deb in debs:
        call(["dpkg-deb", "-x", str(deb), str(root)], what="dpkg-deb -x", env=clean_env(), timeout=600)
    binary = server_binary(root)
    if binary is None:
        raise BuildError(
            name, "unpack", log, f"{package} holds no mariadbd or mysqld (is it the server's core package?)"
        )
    share = next((root / d for d in SHARE_DIRS if (root / d / "english" / "errmsg.sys").is_file()), None)
    build = describe(
        binary,
        name=name,
        kind="package",
        share=share,
        recipe={"package": package},
        build_s=round(time.monotonic() - started, 1),
    )
    shutil.rmtree(downloads, ignore_errors=True)
    write_manifest(home, build)
    return build


def from_root(name: str, package: str, suite: str, cache: Path, debug_symbols: bool = False) -> Build:
    """The server of `package` from `suite` in a private root (debroot.py: the package and its
    whole dependency closure, libc included), run through the root's loader (Build.launcher).
    `debug_symbols`: its -dbgsym from the suite's debug archive too (dbgsym.py), when it can be had."""
    started = time.monotonic()
    try:
        root = debroot.make_root(package, suite, cache)
    except PerflabError as exc:
        raise BuildError(
            name, "private root", None, exc.message + (f"\nhint: {exc.hint}" if exc.hint else "")
        ) from None
    binary = server_binary(root.dir)
    if binary is None:
        raise BuildError(name, "private root", None, f"{package} from {suite} holds no mariadbd, mysqld or postgres")
    added = dbgsym.add(root, package, cache) if debug_symbols else None
    share = next((root.dir / d for d in SHARE_DIRS if (root.dir / d / "english" / "errmsg.sys").is_file()), None)
    return describe(
        binary,
        name=name,
        kind="package",
        share=share,
        recipe={"package": package, "suite": suite, **({"debug_symbols": True} if debug_symbols else {})},
        root=root.record(),
        package_version=root.packages.get(package.split("=", 1)[0]),
        debug_symbols=debug_symbols_of(binary, added),
        setup_s=round(time.monotonic() - started, 1),
    )


def debug_symbols_of(binary: Path, added: dbgsym.DebugSymbols | None) -> str:
    """The build record's `debug_symbols`: "dbgsym: PATH" (the binary's debug file, by its build ID:
    the root's, or the system's), else "none: " and why."""
    found = debuginfo.debug_file(binary)
    if found is not None:
        return f"dbgsym: {found}"
    if added is None:
        return "none: not asked for (debug_symbols = true on the build fetches its -dbgsym)"
    if added.reason is not None:
        return f"none: {added.reason}"
    return f"none: {added.package} holds no debug file of {binary.name}'s build ID {elf.build_id(binary)}"


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
