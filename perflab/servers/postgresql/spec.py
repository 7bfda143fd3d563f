"""What a PostgreSQL experiment file may hold, checked once the file is valid (spec/servers.py
asks the kind):

    tool = "pgbench" (dataset.scale), "go-tpc" (workload.warehouses: workloads/tpcc.py) or
    sysbench's read-only tests over its pgsql driver (dataset.tables/table_size); [builds] of PostgreSQL only (a source tree with configure,
    Debian's postgresql-15 source, an install tree with bin/postgres); [observe] perf and pmp
    follow the postmaster and every backend (one profile of the whole tree; the server target
    only); [observe] alloc counts in the postmaster and every backend it forks (a slot each, summed:
    here and on a server host: observers/alloc/tracer.py); no status yet.
sysbench's write tests (SYSBENCH_WRITES) run too: at PostgreSQL's default isolation (read committed)
Debian's sysbench 1.0.20 rolls back a transaction that meets a deadlock or a duplicate key and
counts it as an ignored error (`errors_per_s`; 42 in 8 s of oltp_read_write at 4 threads on one
1,000-row table, 2026-11-27); a serialization failure ("could not serialize access", repeatable
read and above) still aborts it, so other tests stay refused.
"""

from __future__ import annotations

import re
from pathlib import Path

from perflab.errors import Problem
from perflab.spec.builds import BuildSpec
from perflab.spec.schema import ExperimentFile

PG_VERSION_RE = re.compile(r"^[0-9]+\.[0-9]+(-\S*)?\Z")  # postgresql-15's: 15.18-0+deb12u1 (no epoch)


def file_problems(spec: ExperimentFile) -> list[Problem]:
    problems: list[Problem] = []  # which sysbench tests run here: workloads/sysbench.py
    problems += build_problems(spec.builds)  # source = "debian" is postgresql-15's, basedir bin/postgres
    for name in ("perf", "pmp"):  # the server's process tree only: pgbench is not followed
        observer = getattr(spec.observe, name)
        if observer is not None and "client" in observer.targets:
            hint = 'remove "client": on PostgreSQL the profiles follow the server\'s process tree only'
            problems.append(Problem(f"observe.{name}.targets", 'targets = ["server"] on PostgreSQL', "client", hint))
    for axis, labels in spec.variants.items():  # the client side is sysbench's with MariaDB's library
        for label, variant in labels.items():
            for key in ("client_preload", "client_env", "client_library"):
                if getattr(variant, key):
                    problems.append(Problem(f"variants.{axis}.{label}.{key}", f"no {key} on PostgreSQL yet",
                                            key, "remove it: client variants apply to MariaDB's sysbench"))  # fmt: skip
    if spec.observe.status:
        problems.append(Problem("observe.status", "no [observe] status on PostgreSQL (MariaDB's SHOW GLOBAL STATUS)",
                                "true", "remove it: PostgreSQL's pg_stat views are not sampled yet"))  # fmt: skip
    return problems


def build_problems(builds: dict[str, BuildSpec]) -> list[Problem]:
    """A build of MariaDB's kind (a cmake tree, a package, a mariadb version) on PostgreSQL."""
    return [problem for name, spec in builds.items() for problem in _build(f"builds.{name}", spec)]


def _build(key: str, spec: BuildSpec) -> list[Problem]:
    found: list[Problem] = []
    if spec.package and spec.suite is None:
        found.append(Problem(f"{key}.package", "a package with its suite on PostgreSQL", spec.package,
                             'add suite = "sid" (or bookworm, trixie): it runs from a private root'))  # fmt: skip
    elif spec.package and not spec.package.startswith("postgresql-"):
        found.append(Problem(f"{key}.package", "a postgresql-N package on PostgreSQL", spec.package,
                             'e.g. package = "postgresql-18", suite = "sid"'))  # fmt: skip
    if spec.basedir and not all((Path(spec.basedir) / "bin" / t).is_file() for t in ("postgres", "initdb")):
        found.append(Problem(f"{key}.basedir", "an install tree with bin/postgres and bin/initdb", spec.basedir,
                             "point basedir at a PostgreSQL install (e.g. a copy of /usr/lib/postgresql/15)"))  # fmt: skip
    source = spec.source or ""
    if source.startswith("/") and not (Path(source) / "configure").is_file():
        found.append(Problem(f"{key}.source", "a PostgreSQL source tree (with a configure script)", source,
                             "a CMakeLists.txt tree is MariaDB's; point source at PostgreSQL's top directory"))  # fmt: skip
    if source.startswith("debian=") and not PG_VERSION_RE.match(source.split("=", 1)[1]):
        found.append(Problem(f"{key}.source", "a version of Debian's postgresql-15 source", source,
                             'versions: apt-cache showsrc postgresql-15 | grep ^Version (or source = "debian")'))  # fmt: skip
    if spec.cmake:
        found.append(Problem(f"{key}.cmake", "configure = [...] on PostgreSQL", "cmake = { ... }",
                             'PostgreSQL builds with autoconf: e.g. configure = ["--with-lz4"]'))  # fmt: skip
    if spec.pgo and not spec.compiler.startswith("gcc"):
        found.append(
            Problem(f"{key}.compiler", "gcc with pgo = true", spec.compiler, "PGO with clang is not built yet")
        )
    return found
