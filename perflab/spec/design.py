"""What `design = "interleaved"` runs with, checked once the file is valid (run/interleave.py).

An interleaved round starts the servers of one thread count together and lets their clients take
turns; throughput is the server's own statement counter over each client's running seconds. So:
MariaDB only (PostgreSQL has no `Questions`; its pg_stat counters are not read per turn yet), no
pinning (each server would need a CPU of its own), and no observer that follows one process
through the whole window ([observe] perf, pmp, alloc: they would profile the other servers' turns
too) nor the host-speed canary (interleaving takes the host's speed out by design).

    problems = design_problems(spec)   # [] or Problems with key paths and fixes
"""

from __future__ import annotations

from perflab.errors import Problem
from perflab.spec.schema import ExperimentFile

_HINT = 'remove it, or use design = "sequential"'


def design_problems(spec: ExperimentFile) -> list[Problem]:
    e = spec.experiment
    if not e.interleaved:
        return []
    problems = []
    if e.server != "mariadb":
        problems.append(Problem("experiment.design", 'design = "interleaved" on MariaDB (not PostgreSQL yet)',
                                "interleaved", 'use design = "sequential" on PostgreSQL'))  # fmt: skip
    if e.pin:
        problems.append(Problem("experiment.pin", 'pin = false with design = "interleaved"', "true",
                                "every server and client of a round shares the CPUs; remove pin"))  # fmt: skip
    for name in ("perf", "pmp", "alloc"):
        if getattr(spec.observe, name) is not None:
            expected = f'no [observe] {name} with design = "interleaved" (not yet)'
            hint = f"{_HINT}: a profile of one server would cover the others' turns"
            problems.append(Problem(f"observe.{name}", expected, name, hint))
    if spec.observe.host_speed:
        hint = "remove it: interleaved turns put the host's speed on every variant alike"
        problems.append(Problem("observe.host_speed", 'no host-speed canary with design = "interleaved"', "true", hint))
    return problems
