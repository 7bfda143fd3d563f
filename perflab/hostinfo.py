"""Host metadata stored once per run: what a result is only comparable with.

Output: {"kernel": "6.1.0-...", "cpu_model": "...", "cores": 2, "glibc": "2.36", ...}
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from typing import Any, Protocol

from perflab import __version__, servers
from perflab.places.proc import per_binary


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _version_of(argv: list[str]) -> str | None:
    found = shutil.which(argv[0])
    if not found:
        return None

    def ask() -> str | None:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr) else None

    return per_binary([found], ("first line of", *argv), ask)


def _go_tpc() -> str | None:
    """go-tpc's version, from the build information in its binary (its own `version` says "dev")."""
    from perflab.workloads import gotpc

    return gotpc.version()


def collect() -> dict[str, Any]:
    """The machine, and the installed servers' and tools' versions (each kind's fields)."""
    versions = {field: argv for kind in servers.every() for field, argv in kind.host_versions().items()}
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "glibc": os.confstr("CS_GNU_LIBC_VERSION"),
        "mariadbd": None,
        "sysbench": _version_of(["sysbench", "--version"]),
        "postgres": None,
        "pgbench": None,
        "go-tpc": _go_tpc(),
        **{field: _version_of(argv) for field, argv in versions.items()},
        "python": platform.python_version(),
        "perflab": __version__,
    }


class Probe(Protocol):
    """How the fingerprint reads a machine: this one (LocalProbe) or a remote host (hosts/session.py)."""

    def read(self, path: str) -> str | None: ...  # a file's text, None when unreadable

    def run(self, argv: list[str]) -> str | None: ...  # stdout of argv, None when it failed or is missing


class LocalProbe:
    def read(self, path: str) -> str | None:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return None

    def run(self, argv: list[str]) -> str | None:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None


# what a result depends on beyond the kernel and the CPU (dpkg-query names; absent ones are left out):
# the servers' packages and the workloads' clients' (sysbench; pgbench: postgresql-client-15, which a
# client host may have without the server), so a client host's client version is in its fingerprint
FINGERPRINT_PACKAGES = [
    "libc6",
    "sysbench",
    "mariadb-server",
    "mariadb-client",
    "postgresql-15",
    "postgresql-client-15",
    "linux-perf",
]
_VULNERABILITIES = "/sys/devices/system/cpu/vulnerabilities"


def _cpuinfo_field(cpuinfo: str | None, name: str) -> str | None:
    for line in (cpuinfo or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None


def _first_line(text: str | None) -> str | None:
    lines = (text or "").strip().splitlines()
    return lines[0].strip() if lines else None


def _thp(text: str | None) -> str | None:
    """ "always [madvise] never" -> "madvise"."""
    chosen = [word.strip("[]") for word in (text or "").split() if word.startswith("[")]
    return chosen[0] if chosen else None


def _mitigations(grep: str | None) -> dict[str, str]:
    """`grep -r . vulnerabilities/` lines "PATH/spectre_v2:Mitigation: ..." -> {"spectre_v2": "Mitigation: ..."}."""
    out = {}
    for line in (grep or "").splitlines():
        path, _, status = line.partition(":")
        out[path.rsplit("/", 1)[-1]] = status.strip()
    return dict(sorted(out.items()))


def _packages(listing: str | None) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in (listing or "").splitlines() if "=" in line)
    return {name: version for name, version in pairs if version}


def fingerprint(probe: Probe) -> dict[str, Any]:
    """What a result on a machine depends on (issue 36): CPU model, microcode, kernel, governor, SMT,
    THP, mitigations, glibc and package versions; the same fields for this machine and a remote host."""
    cpuinfo = probe.read("/proc/cpuinfo")
    # dpkg-query exits 1 when some package is not installed, and still lists the others
    listing = probe.run(
        ["sh", "-c", 'dpkg-query -W -f "$0" "$@" 2>/dev/null; true', "${Package}=${Version}\\n", *FINGERPRINT_PACKAGES]
    )
    return {
        "hostname": _first_line(probe.read("/proc/sys/kernel/hostname")),
        "kernel": _first_line(probe.read("/proc/sys/kernel/osrelease")),
        "machine": _first_line(probe.run(["uname", "-m"])),
        "cpu_model": _cpuinfo_field(cpuinfo, "model name"),
        "microcode": _cpuinfo_field(cpuinfo, "microcode"),
        "cores": sum(1 for line in (cpuinfo or "").splitlines() if line.startswith("processor")) or None,
        "governor": _first_line(probe.read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")),
        "smt": _first_line(probe.read("/sys/devices/system/cpu/smt/control")),
        "thp": _thp(probe.read("/sys/kernel/mm/transparent_hugepage/enabled")),
        "mitigations": _mitigations(probe.run(["grep", "-r", ".", _VULNERABILITIES])),
        "glibc": _first_line(probe.run(["getconf", "GNU_LIBC_VERSION"])),
        "packages": _packages(listing),
    }


def differences(prints: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The fingerprint fields whose values differ between hosts: {field: {host: value}} (what a report shows)."""
    fields = sorted({f for p in prints.values() for f in p} - {"hostname"})
    return {
        f: {host: p.get(f) for host, p in prints.items()}
        for f in fields
        if len({repr(p.get(f)) for p in prints.values()}) > 1
    }
