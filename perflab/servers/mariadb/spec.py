"""What a MariaDB (or MySQL) experiment file may hold, checked once the file is valid
(spec/servers.py asks the kind, after the workload: sysbench or go-tpc, run/workloads/),
[builds] of its own kind (no PostgreSQL install tree, no autoconf configure options).
"""

from __future__ import annotations

from pathlib import Path

from perflab.errors import Problem
from perflab.spec.builds import BuildSpec, server_binary
from perflab.spec.schema import ExperimentFile


def file_problems(spec: ExperimentFile) -> list[Problem]:
    """The workload's own refusals (pgbench, pgbench's scale) come first: run/workloads/."""
    return build_problems(spec.builds)


def build_problems(builds: dict[str, BuildSpec]) -> list[Problem]:
    """A build of PostgreSQL's kind (an install tree with bin/postgres, configure options)."""
    problems: list[Problem] = []
    for name, spec in builds.items():
        key = f"builds.{name}"
        binary = server_binary(Path(spec.basedir)) if spec.basedir else None
        if binary is not None and binary.name == "postgres":
            problems.append(
                Problem(
                    f"{key}.basedir",
                    "a MariaDB install tree (mariadbd or mysqld)",
                    str(binary),
                    'a PostgreSQL tree needs server = "postgresql"',
                )
            )
        if spec.configure:
            problems.append(
                Problem(
                    f"{key}.configure",
                    "cmake = { ... } on MariaDB",
                    "configure = [...]",
                    "configure is PostgreSQL's (autoconf); MariaDB's options go in cmake",
                )
            )
    return problems
