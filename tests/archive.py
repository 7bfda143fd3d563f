"""The versions the Debian archives serve now, for tests that run their packages: a test that
hard-codes one breaks when the archive moves on (sid's MySQL 9.7 to 9.8, a bookworm point
release), so it reads them where perflab does.

- sid: perflab's own private index (builds/debroot.versions: apt-cache madison in
  CACHE/debroot/index/sid, updated at most once a day), the one a `[builds] suite = "sid"` reads;
- bookworm: the system's apt (`apt-cache madison`), whose bookworm and bookworm-security
  lines say what `package = "NAME=VERSION"` (or `source = "debian=VERSION"`) gets and what the
  installed server is.

    sid_version("mysql-server-core")          -> "9.7.4-2"
    upstream("1:11.8.3-1")                      -> "11.8.3";  major_minor("11.8.3") -> "11.8"
    bookworm_version("mariadb-server-core")   -> "1:10.11.18-0+deb12u1" (bookworm itself, not -security)
"""

from __future__ import annotations

import functools
import re
import subprocess

from perflab.cache import cache_root


@functools.cache
def sid_version(package: str) -> str:
    """The newest version of binary package `package` in sid, as a `[builds] suite = "sid"` gets it."""
    from perflab.builds import debroot

    found = debroot.versions(package, "sid", cache_root())
    assert found, f"sid has no {package}"
    return found[0]


@functools.cache
def bookworm_version(package: str, pocket: str = "bookworm", kind: str = "Packages") -> str:
    """The version of `package` the system's apt sources serve from `pocket` ("bookworm", or
    "bookworm-security": where Debian 12's installed servers come from); `kind` "Sources": of the
    source package `package`."""
    madison = subprocess.run(["apt-cache", "madison", package], check=True, capture_output=True, text=True).stdout
    for line in madison.splitlines():  # " mariadb | 1:10.11.18-0+deb12u1 | http://... bookworm/main Sources"
        name, version, where = (part.strip() for part in line.split("|"))
        if name == package and f" {pocket}/" in f" {where}" and where.endswith(f" {kind}"):
            return version
    raise AssertionError(f"apt serves no {package} ({kind}) from {pocket}:\n{madison}")


def upstream(version: str) -> str:
    """A Debian version's upstream part: no epoch, no Debian revision, no repack suffix
    ("1:10.11.18-0+deb12u1" -> "10.11.18", "1:11.8.9+ds-4" -> "11.8.9")."""
    return re.split(r"[+~]", version.split(":", 1)[-1].rsplit("-", 1)[0])[0]


def major_minor(version: str) -> str:
    return ".".join(upstream(version).split(".")[:2])


@functools.cache
def installed_version(package: str) -> str:
    """The installed version of `package` (dpkg's status): "1:10.11.19-0+deb12u1"."""
    return subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", package], check=True, capture_output=True, text=True
    ).stdout.strip()


@functools.cache
def other_version(package: str) -> str:
    """The newest version of `package` the system's apt serves that is not the installed one (Debian
    12's MariaDB: bookworm's beside the installed bookworm-security one), for a build of another
    version of the installed server."""
    madison = subprocess.run(["apt-cache", "madison", package], check=True, capture_output=True, text=True).stdout
    mine = installed_version(package)
    for line in madison.splitlines():  # newest first
        name, version, where = (part.strip() for part in line.split("|"))
        if name == package and where.endswith(" Packages") and version != mine:
            return version
    raise AssertionError(f"apt serves no {package} but the installed {mine}:\n{madison}")


def mariadb_says(version: str) -> str:
    """What Debian's mariadbd of package version `version` calls itself: "1:10.11.18-0+deb12u1" ->
    "10.11.18-MariaDB-0+deb12u1"."""
    return f"{upstream(version)}-MariaDB-{version.rsplit('-', 1)[1]}"
