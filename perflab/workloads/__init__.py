"""One interface per workload tool (`Workload`), as perflab/servers/ has one per server kind.

Everything that differs between sysbench, pgbench and go-tpc lives in its module here: what the
[workload] table may hold, the tool's own checks against this machine, the database its dataset
lives in and the command that fills it, the command of a cell's run, how its output becomes the
per-second series and the window's summary, what the analysis's throughput figure means, and
which designs can run it. The rest of perflab asks the experiment's workload, never compares
the tool's name:

    wl = workloads.get(spec.workload.tool)          # workloads.get("go-tpc").database -> "tpcc"
    argv = wl.prepare_argv(spec, server)            # a MariaDB-protocol server (socket, port)
    summary, intervals = wl.read_output(out, code, warmup)

tests/unit/test_workload_seam.py holds the rule: outside this package, no comparison with a
tool's name (its ALLOWED list names the branches still to move, and may only shrink). Adding a
workload is adding a module here, its class on `Workload` (base.py), and its entry in `get`.

Each second of a series is a dict in sysbench's shape, whatever the tool:
    {"t": 12, "tps": 612.0, "qps": 32430.0, "reads": None, "writes": None, "other": None,
     "p95_ms": 4.2, "errors_per_s": 0.0, "reconnects_per_s": 0.0, "warmup": 0}
`qps` is the analysis's throughput (`throughput` says what it counts for the tool).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perflab.workloads.base import Workload

if TYPE_CHECKING:
    from perflab.spec.schema import ExperimentFile

NAMES = ("sysbench", "pgbench", "go-tpc")  # [workload] tool's values (spec/schema.py)


def get(name: str) -> Workload:
    """The workload named by [workload] tool (or a results file's meta)."""
    from perflab.workloads.pgbench import PGBENCH
    from perflab.workloads.sysbench import SYSBENCH
    from perflab.workloads.tpcc import GO_TPC

    found = {w.name: w for w in (SYSBENCH, PGBENCH, GO_TPC)}
    if name not in found:
        raise KeyError(f"unknown workload tool {name!r}; known: {', '.join(sorted(found))}")
    return found[name]


def of(spec: ExperimentFile) -> Workload:
    """The workload of an experiment file (an ExperimentFile)."""
    return get(spec.workload.tool)
