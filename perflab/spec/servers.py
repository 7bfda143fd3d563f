"""What the server and the workload tool allow together, checked once the file is valid: the
workload first (workloads/: its dataset keys, the servers it can drive), then each kind
(perflab/servers/postgresql/spec.py, mysql_protocol.py). PostgreSQL: pgbench, go-tpc or sysbench's
read-only and OLTP write tests, [builds] of PostgreSQL only, perf and pmp on the server's process
tree; MariaDB and MySQL: sysbench or go-tpc, no PostgreSQL builds; MySQL: a build in every variant.

    problems = server_problems(spec)   # [] or Problems with key paths and fixes
"""

from __future__ import annotations

from perflab import servers
from perflab.errors import Problem
from perflab import workloads
from perflab.spec.schema import ExperimentFile


def server_problems(spec: ExperimentFile) -> list[Problem]:
    from perflab.workloads import rate

    kind, wl = servers.kind(spec.experiment.server), workloads.of(spec)
    return wl.file_problems(spec, kind) + rate.problems(spec, wl.rate_refusal) + kind.file_problems(spec)
