"""The programs perflab runs on this machine, and the packages that bring them: what `perflab
doctor` lists and a MariaDB experiment's preflight requires (servers' `Kind.tool_problems`).

    missing = tool_problems()   # [Problem("(tool) sysbench", "installed", "missing", "apt-get install sysbench ...")]
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from perflab.errors import Problem, ToolMissingError
from perflab.places.proc import which


@dataclass(frozen=True)
class Tool:
    name: str
    package: str
    purpose: str
    required: bool = True
    version_flag: str | None = "--version"  # None: never run it just to ask (mariadb-install-db would act)
    get: str | None = None  # how to install it, when not `apt-get install <package>`


TOOLS = (
    Tool("mariadbd", "mariadb-server", "the server under test"),
    Tool("mariadb-install-db", "mariadb-server", "creates each datadir", version_flag=None),
    Tool("mariadb", "mariadb-client", "runs setup SQL"),
    Tool("sysbench", "sysbench", "the workload"),
    Tool("setpriv", "util-linux", "kills children if perflab dies", version_flag=None),
    Tool("postgres", "postgresql-15", 'server = "postgresql" (`perflab docs experiment`)', required=False),
    Tool("pgbench", "postgresql-15", 'tool = "pgbench"', required=False),
    Tool(
        "go-tpc",
        "go-tpc",
        'tool = "go-tpc" (TPC-C, `perflab docs workloads`)',
        required=False,
        version_flag=None,
        get="make go-tpc (go install, pinned v1.0.12)",
    ),
    Tool("taskset", "util-linux", "CPU pinning (pin = true)", version_flag=None),
    Tool("dpkg-query", "dpkg", "allocator package versions", version_flag=None),
    Tool("perf", "linux-perf", "on-CPU profiles (observe.perf)", required=False),
    Tool("eu-stack", "elfutils", "wall-clock stacks (observe.pmp, tool eu-stack)", required=False),
    Tool("c++filt", "binutils", "C++ names in pmp stacks", required=False),
    Tool(
        "inferno-flamegraph",
        "inferno",
        "flame graph SVGs (perflab flame, reports)",
        required=False,
        version_flag=None,
        get="make setup (builds it with cargo; see `perflab docs profiles`)",
    ),
)


def tool_problems() -> list[Problem]:
    """The tools a MariaDB experiment needs that this machine lacks (servers/mariadb)."""
    return [
        Problem(f"(tool) {t.name}", "installed", "missing", f"apt-get install {t.package} (or `make setup`)")
        for t in TOOLS
        if t.required and which(t.name) is None
    ]


def binary(name: str) -> str:
    """A MariaDB program's path (mariadbd, mariadb-install-db, the `mariadb` client), on the PATH or in
    /usr/sbin, /usr/bin; ToolMissingError naming the package."""
    for candidate in (name, f"/usr/sbin/{name}", f"/usr/bin/{name}"):
        found = shutil.which(candidate)
        if found:
            return found
    raise ToolMissingError(f"{name} not found", "apt-get install mariadb-server (or `make setup`)")
