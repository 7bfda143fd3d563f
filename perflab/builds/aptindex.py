"""A Debian suite's private apt index: apt-get update, look-ups, resolution and downloads that
never touch the system's apt state (the private roots of debroot.py are made from it).

apt runs with a configuration file of its own (APT_CONFIG, which apt reads before /etc/apt; it
points Dir::Etc::Parts and Dir::Etc::Main away from /etc/apt, so no system hook, pin or source
applies): a sources list of one suite, signed-by Debian 12's archive keyring (it verifies sid,
trixie, bookworm and bookworm-backports: their Release files carry the bookworm and trixie
archive keys' signatures), private state, cache and log directories, and an empty status file,
so nothing counts as installed and a closure includes libc6. Of the system's apt settings it
keeps only INHERITED: the proxy, and whether a Release file past its Valid-Until is refused.

    index = suite_index("sid", cache)        # CACHE/debroot/index/sid; apt-get update at most once a day
    known(index, ["mysql-server-core"])      # {"mysql-server-core": ["9.7.4-2"]}
    resolve(index, ["mysql-server-core"], "sid")   # [Package("gcc-16-base", "16.2.0-4", "amd64"), ...]

An index holds apt.conf, etc/sources.list, the empty `status`, state/lists, cache/ (pkgcache,
archives) and `updated` (when the last apt-get update succeeded: its age decides the next one).
A suite's debug archive (SUITE-debug: its -dbgsym packages, dbgsym.py) has an index of its own.
The mirrors are MIRROR and DEBUG_MIRROR, or $PERFLAB_DEBIAN_MIRROR and $PERFLAB_DEBIAN_DEBUG_MIRROR.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from perflab.errors import EXIT_ENVIRONMENT, PerflabError, ToolMissingError, UsageError
from perflab.places.proc import call, clean_env, guarded
from perflab.units import utc_now

MIRROR = "http://deb.debian.org/debian"
DEBUG_MIRROR = "http://deb.debian.org/debian-debug"  # the -dbgsym packages, suites SUITE-debug
# the mirrors, overridden (a near mirror, a local archive: file:///srv/debian) by these variables
MIRROR_ENV, DEBUG_MIRROR_ENV = "PERFLAB_DEBIAN_MIRROR", "PERFLAB_DEBIAN_DEBUG_MIRROR"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")  # Debian 12's debian-archive-keyring
SUITES = ("bookworm", "bookworm-backports", "trixie", "sid")
DEBUG = "-debug"  # a suite's debug archive: sid -> sid-debug (its -dbgsym packages)
FRESH_S = 24 * 3600  # an index is updated when its last good update is older than this
ARCH = "amd64"
# the system's apt settings an index keeps: how this machine reaches the mirror, and whether it
# refuses a Release file past its Valid-Until (a machine that reads a frozen mirror turns that off)
INHERITED = ("Acquire::http::Proxy", "Acquire::https::Proxy", "Acquire::Check-Valid-Until", "Acquire::Check-Date")
NETWORK_HINT = f"private roots need {MIRROR}: run it again when the mirror answers"
# `apt-get --simulate`: "Inst libc6 (2.43-7 Debian:unstable [amd64]) []"
INST_RE = re.compile(r"^Inst (\S+) (?:\[[^\]]*\] )?\((\S+) .*\[([a-z0-9]+)\]\)", re.MULTILINE)
SETTING_RE = re.compile(r'^(\S+) "(.*)";$', re.MULTILINE)


class RootError(PerflabError):
    """A private root cannot be made on this machine: the suite's index cannot be fetched or
    verified, apt cannot resolve or download the packages, or the root lacks a loader."""

    exit_code = EXIT_ENVIRONMENT


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    arch: str

    @property
    def deb(self) -> str:
        """The file name apt downloads it to (an epoch's colon is written %3a)."""
        return f"{self.name}_{self.version.replace(':', '%3a')}_{self.arch}.deb"


def check_suite(suite: str) -> None:
    if suite.removesuffix(DEBUG) not in SUITES:
        raise UsageError(f"suite {suite!r} is not one perflab knows", f"use one of: {', '.join(SUITES)}")


def mirror(suite: str) -> str:
    """The mirror of `suite` (a SUITE-debug suite: the debug archive's), from its variable if set.
    A file: URL is read as copy: (apt then copies the .deb into the index's cache, as it downloads)."""
    debug = suite.endswith(DEBUG)
    url = os.environ.get(DEBUG_MIRROR_ENV if debug else MIRROR_ENV) or (DEBUG_MIRROR if debug else MIRROR)
    return "copy:" + url.removeprefix("file:") if url.startswith("file:") else url


def suite_index(suite: str, cache: Path, max_age: float = FRESH_S) -> Path:
    """The suite's private index, updated when its last good update is older than `max_age`
    seconds. A failed update keeps an older index (with a warning); without one it is exit 3."""
    check_suite(suite)
    index = _layout(suite, cache)
    with locked(index):
        if age(index) > max_age:
            _update(index, suite)
    return index


@contextlib.contextmanager
def locked(index: Path) -> Iterator[None]:
    """One perflab at a time in an index (a second apt would refuse, not wait). Not reentrant."""
    fd = os.open(index / "perflab.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def age(index: Path) -> float:
    """Seconds since the index's last good apt-get update (inf: never)."""
    try:
        return time.time() - (index / "updated").stat().st_mtime
    except FileNotFoundError:
        return math.inf


def updated(index: Path) -> str | None:
    """When the index's last good apt-get update finished (UTC, ISO 8601)."""
    try:
        return (index / "updated").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None


def known(index: Path, names: Sequence[str]) -> dict[str, list[str]]:
    """name -> the versions of that binary package the suite has, newest first (apt-cache madison)."""
    return parse_madison(apt(index, ["apt-cache", "madison", *names], "apt-cache madison").stdout)


def parse_madison(output: str) -> dict[str, list[str]]:
    """ " mysql-server-core |    9.7.4-2 | http://deb.debian.org/debian sid/main amd64 Packages" lines."""
    found: dict[str, list[str]] = {}
    for line in output.splitlines():
        parts = [part.strip() for part in line.split("|")]
        if len(parts) == 3 and parts[2].endswith(" Packages"):
            found.setdefault(parts[0], []).append(parts[1])
    return found


def resolve(index: Path, specs: Sequence[str], suite: str) -> list[Package]:
    """The closure apt would install on an empty system: every dependency, libc6 included."""
    done = apt(index, ["apt-get", "install", "--simulate", "-q", *specs], "apt-get install --simulate")
    packages = parse_simulation(done.stdout)
    if done.returncode != 0 or not packages:
        raise unresolvable(specs, suite, done.stdout + done.stderr)
    return packages


def parse_simulation(output: str) -> list[Package]:
    return [Package(*match) for match in INST_RE.findall(output)]


def unresolvable(specs: Sequence[str], suite: str, output: str) -> RootError:
    """Exit 3 naming what apt could not resolve, in apt's own words."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if "unmet dependencies" in line), len(lines))
    unmet = [line for line in lines[start + 1 :] if line.startswith(" ")]
    errors = [line for line in lines if line.startswith("E: ")]
    names = list(dict.fromkeys(line.split(" : ")[0].strip() for line in unmet if " : " in line))
    what = f": unmet dependencies of {', '.join(names)}" if names else ""
    return RootError(
        f"apt cannot resolve {' '.join(specs)} in {suite}{what}\n" + "\n".join(unmet + errors or lines[-5:]),
        "the suite may be mid-transition (sid often is): another version or another suite may resolve",
    )


def download(index: Path, packages: Sequence[Package]) -> list[Path]:
    """The .deb of every resolved package, each pinned to its resolved version."""
    argv = ["apt-get", "install", "--download-only", "--yes", "-q", *(f"{p.name}={p.version}" for p in packages)]
    done = apt(index, argv, "apt-get install --download-only")
    debs = [index / "cache" / "archives" / p.deb for p in packages]
    missing = [deb.name for deb in debs if not deb.is_file()]
    if done.returncode != 0 or missing:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-10:])
        raise RootError(f"apt-get could not download {', '.join(missing) or 'the packages'}:\n{tail}", NETWORK_HINT)
    return debs


def download_alone(index: Path, package: Package) -> Path:
    """The .deb of one package, without its dependencies (a -dbgsym depends on its package, which
    the debug archive does not hold): `apt-get download` into the index's archives."""
    into = index / "cache" / "archives"
    done = apt(index, ["apt-get", "download", "-q", f"{package.name}={package.version}"], "apt-get download", cwd=into)
    if done.returncode != 0 or not (into / package.deb).is_file():
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-10:])
        raise RootError(f"apt-get could not download {package.deb}:\n{tail}", NETWORK_HINT)
    return into / package.deb


def apt(
    index: Path, argv: list[str], what: str, timeout: float = 1800, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """apt with the index's own configuration; its output whatever its exit code."""
    env = clean_env({"APT_CONFIG": str(index / "apt.conf"), "LC_ALL": "C.UTF-8"})
    try:
        return subprocess.run(
            guarded(argv),
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
            check=False,
            cwd=cwd,
        )
    except FileNotFoundError:
        raise ToolMissingError(f"{what}: {argv[0]} not found", "private roots need apt") from None
    except subprocess.TimeoutExpired:
        raise RootError(f"{what}: no result after {timeout:.0f}s", NETWORK_HINT) from None


def apt_conf(index: Path, inherited: dict[str, str]) -> str:
    """The index's apt.conf: every directory apt reads or writes is the index's own."""
    etc = index / "etc"
    settings = {
        "Dir::Etc::Main": "/dev/null",  # not /etc/apt/apt.conf
        "Dir::Etc::Parts": etc / "apt.conf.d",  # not /etc/apt/apt.conf.d and its hooks
        "Dir::Etc::SourceList": etc / "sources.list",
        "Dir::Etc::SourceParts": etc / "sources.list.d",
        "Dir::Etc::Preferences": etc / "preferences",
        "Dir::Etc::PreferencesParts": etc / "preferences.d",
        "Dir::Etc::Trusted": etc / "trusted.gpg",
        "Dir::Etc::TrustedParts": etc / "trusted.gpg.d",
        "Dir::Etc::netrc": etc / "auth.conf",
        "Dir::Etc::netrcparts": etc / "auth.conf.d",
        "Dir::State": index / "state",
        "Dir::State::status": index / "status",
        "Dir::Cache": index / "cache",
        "Dir::Log": index / "log",
        "APT::Architecture": ARCH,
        "APT::Install-Recommends": "false",
        "APT::Install-Suggests": "false",
        "Acquire::Languages": "none",
        **inherited,
    }
    lines = [f'{key} "{value}";' for key, value in settings.items()]
    return "\n".join([*lines, f'APT::Architectures {{ "{ARCH}"; }};']) + "\n"


def settings(index: Path) -> dict[str, str]:
    """The index's apt.conf as key -> value."""
    return dict(SETTING_RE.findall((index / "apt.conf").read_text(encoding="utf-8")))


def system_settings() -> dict[str, str]:
    """This machine's INHERITED apt settings (read with apt-config; nothing is written)."""
    env = {k: v for k, v in clean_env({"LC_ALL": "C.UTF-8"}).items() if k != "APT_CONFIG"}
    out = call(["apt-config", "dump", *INHERITED], what="apt-config dump", env=env, timeout=60)
    return {key: value for key, value in SETTING_RE.findall(out) if key in INHERITED}


def _layout(suite: str, cache: Path) -> Path:
    """The suite's index directories and configuration, (re)written where they differ."""
    index = cache / "debroot" / "index" / suite
    if any(c in str(index) for c in '"\n;{}'):
        raise UsageError(f"{index}: apt cannot be configured with this path", "set PERFLAB_CACHE to a plain path")
    for sub in ("apt.conf.d", "sources.list.d", "preferences.d", "trusted.gpg.d", "auth.conf.d"):
        (index / "etc" / sub).mkdir(parents=True, exist_ok=True)
    for sub in ("state/lists/partial", "cache/archives/partial", "log"):
        (index / sub).mkdir(parents=True, exist_ok=True)
    (index / "status").touch()  # empty: nothing is installed
    if _write_if_changed(index / "etc" / "sources.list", f"deb [signed-by={KEYRING}] {mirror(suite)} {suite} main\n"):
        (index / "updated").unlink(missing_ok=True)  # another mirror or keyring: its lists are not this one's
    _write_if_changed(index / "apt.conf", apt_conf(index, system_settings()))
    return index


def _update(index: Path, suite: str) -> None:
    say(f"{suite}: apt-get update into {index}")
    if settings(index).get("Acquire::Check-Valid-Until") == "false":
        say(
            "note: this machine's apt does not refuse expired Release files (Acquire::Check-Valid-Until false);"
            " their signatures are verified all the same"
        )
    done = apt(index, ["apt-get", "update", "-q"], "apt-get update")
    if done.returncode == 0 and any((index / "state" / "lists").glob("*_Packages*")):
        (index / "updated").write_text(utc_now() + "\n", encoding="utf-8")
        return
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
    if updated(index) is not None:
        say(f"warning: apt-get update of {suite} failed; the index of {updated(index)} is used:\n{tail}")
        return
    raise RootError(f"apt-get update of {suite} failed (exit {done.returncode}):\n{tail}", update_hint(tail))


def update_hint(output: str) -> str:
    """What to do about a failed apt-get update, from apt's words."""
    if any(word in output for word in ("NO_PUBKEY", "is not signed", "BADSIG", "EXPKEYSIG")):
        return (
            f"the suite's Release file does not verify against {KEYRING}: a newer debian-archive-keyring has"
            " the suite's keys (perflab never skips the check)"
        )
    if "is expired" in output:
        return (
            "the mirror's Release file is past its Valid-Until (a frozen mirror?): this machine's apt refuses it"
            " (Acquire::Check-Valid-Until), and private roots follow that setting"
        )
    return NETWORK_HINT


def _write_if_changed(path: Path, text: str) -> bool:
    """Whether `path` was (re)written: it did not hold `text`."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return True


def say(text: str) -> None:
    """Progress on stderr."""
    print(f"perflab: debroot {text}", file=sys.stderr, flush=True)
