"""What the server and the workload tool allow together, checked once the file is valid: each
kind says (perflab/servers/<kind>/spec.py). PostgreSQL: pgbench or sysbench's read-only tests,
[builds] of PostgreSQL only, perf and pmp on the server's process tree; MariaDB: sysbench only.

    problems = server_problems(spec)   # [] or Problems with key paths and fixes
"""

from __future__ import annotations

from perflab import servers
from perflab.errors import Problem
from perflab.spec.schema import ExperimentFile


def server_problems(spec: ExperimentFile) -> list[Problem]:
    return servers.kind(spec.experiment.server).file_problems(spec)
