"""The source of a build: Debian's source package (fetched and unpacked once per version) or a
local tree (used where it is, fingerprinted by its git state or its files).

    src = fetch("debian", cache, log)         # the installed server's version if apt has its
                                              # source, else the newest one it has
    src = fetch("debian=1:10.11.18-0+deb12u1", cache, log)
    src = fetch("/home/me/mariadb-server", cache, log)
    src = fetch("debian", cache, log, server="postgresql")   # Debian's postgresql-15 source

Debian's source needs a deb-src entry: `make setup` adds
/etc/apt/sources.list.d/perflab-deb-src.sources.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from perflab import servers
from perflab.errors import PerflabError
from perflab.builds import BuildError, sha256
from perflab.builds.source import DEBIAN_SOURCE, Source
from perflab.places.proc import call, clean_env
from perflab.redact import redact_argv

GIT_HINT = "the source tree's git state fingerprints its build: repair the repository (`git status` there)"
DEB_SRC_HINT = "run `make setup` (it adds the deb-src entry perflab needs), then apt-get update"


def fetch(source: str, cache: Path, name: str, server: str = "mariadb") -> Source:
    if source.startswith("/"):
        return local(Path(source), cache, server)
    wanted = source.split("=", 1)[1] if "=" in source else None
    return debian(wanted, cache, name, server)


def versions(package: str = DEBIAN_SOURCE, installed_from: str = "mariadb-server-core") -> list[str]:
    """Source versions apt knows, the installed server's first, then newest first."""
    try:
        out = call(["apt-cache", "showsrc", package], what="apt-cache showsrc", env=clean_env(), timeout=120)
    except PerflabError:
        return []
    found = list(dict.fromkeys(re.findall(r"^Version: (\S+)", out, re.MULTILINE)))
    found.sort(key=_version_key, reverse=True)
    installed = _installed_version(installed_from)
    return sorted(found, key=lambda v: v != installed)


def debian(wanted: str | None, cache: Path, name: str, server: str = "mariadb") -> Source:
    package, installed_from = servers.kind(server).debian_source, servers.kind(server).debian_binary
    candidates = [wanted] if wanted else versions(package, installed_from)
    if not candidates:
        raise BuildError(name, "fetch", None, f"apt knows no source of {package}; {DEB_SRC_HINT}")
    errors = []
    for version in candidates:
        home = cache / "src" / f"{package}_{version.replace(':', '_')}"
        tree = home / "tree"
        if (home / "unpacked").is_file():
            return _debian_source(home, tree, version, package, server)
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        try:  # apt-get source writes into the working directory
            call(
                ["apt-get", "source", "--download-only", f"{package}={version}"],
                what="apt-get source",
                env=clean_env(),
                timeout=3600,
                cwd=home,
            )
            dsc = next(home.glob("*.dsc"))
            call(
                ["dpkg-source", "-x", dsc.name, "tree"], what="dpkg-source -x", env=clean_env(), timeout=1800, cwd=home
            )
        except (PerflabError, StopIteration) as exc:
            errors.append(f"{version}: {str(exc).strip().splitlines()[-1] if str(exc) else 'no .dsc'}")
            shutil.rmtree(home, ignore_errors=True)
            continue
        (home / "unpacked").write_text(version + "\n", encoding="utf-8")
        return _debian_source(home, tree, version, package, server)
    raise BuildError(
        name, "fetch", None, "no source version could be fetched:\n" + "\n".join(errors) + f"\n{DEB_SRC_HINT}"
    )


def _debian_source(home: Path, tree: Path, version: str, package: str, server: str) -> Source:
    dsc = next(home.glob("*.dsc"))
    return Source(tree, f"debian:{version}:{sha256(dsc)}", f"debian {package} {version}", server)


def local(tree: Path, cache: Path, server: str = "mariadb") -> Source:
    """A tree of the user's: fingerprinted by git (commit, the diff to it and every untracked
    file's contents) when it is a repository, else by every file's path, size and modification
    time. Its builds happen in the cache (out of tree), never inside it."""
    digest = hashlib.sha256()
    head = _git(tree, "rev-parse", "HEAD")
    if head is not None:
        digest.update(head)
        # --binary: a changed binary file's contents; no external diff or textconv from the user's
        # config, whose output may not show what changed
        digest.update(_git_or_fail(tree, "diff", "--binary", "--no-ext-diff", "--no-textconv", "HEAD"))
        for name in _git_or_fail(tree, "ls-files", "-z", "--others", "--exclude-standard").split(b"\0"):
            if name:  # an untracked file is part of the build when CMake globs it: its contents count
                digest.update(name + b"\0" + _contents(tree / os.fsdecode(name)) + b"\n")
    else:
        for root, dirs, files in os.walk(tree):
            dirs.sort()
            for file in sorted(files):
                path = Path(root) / file
                stat = path.lstat()
                digest.update(f"{path.relative_to(tree)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    home = cache / "src" / f"tree-{hashlib.sha256(str(tree.resolve()).encode()).hexdigest()[:12]}"
    home.mkdir(parents=True, exist_ok=True)
    link = home / "tree"
    if not link.is_symlink() or link.resolve() != tree.resolve():
        link.unlink(missing_ok=True)
        link.symlink_to(tree.resolve())
    return Source(link, f"tree:{digest.hexdigest()}", str(tree), server)


def _contents(path: Path) -> bytes:
    """A file's sha256 (a symlink's target name): what an untracked file adds to the fingerprint."""
    if path.is_symlink():
        return b"link:" + os.fsencode(os.readlink(path))
    return sha256(path).encode() if path.is_file() else b"?"


def _git(tree: Path, *args: str) -> bytes | None:
    """git's output, or None when it fails (for `rev-parse HEAD`: not a repository)."""
    try:
        done = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _git_or_fail(tree: Path, *args: str) -> bytes:
    """git's output; a git that fails in a repository is an error, never a clean tree: the key
    would then name a build of other sources (a stale cached build measured as the new one)."""
    argv = ["git", "-C", str(tree), *args]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PerflabError(f"{shlex.join(redact_argv(argv))} failed: {exc}", GIT_HINT) from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        shown = shlex.join(redact_argv(argv))
        raise PerflabError(f"{shown} exited {done.returncode}: {' '.join(tail) or 'no message'}", GIT_HINT)
    return done.stdout


def _installed_version(package: str = "mariadb-server-core") -> str | None:
    try:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def _version_key(version: str) -> list[tuple[int, object]]:
    """Debian versions compared well enough to put the newest first (epoch, numbers, text)."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[.:+~-]", version)]
