"""What `design = "interleaved"` runs with, checked once the file is valid (run/interleave.py);
and, when the file does not say, which design a run gets and why (`choose`).

An interleaved round starts the servers of one thread count together and lets their clients take
turns; throughput is counted over each client's running seconds, by the server's own statement
counters (MariaDB) or by the client (PostgreSQL: sysbench's wrapper, workloads/turn_counts.py;
pgbench's per-transaction log, workloads/turn_log.py). So: sysbench or pgbench (go-tpc's transactions
are not counted per turn yet: Workload.interleaved_refusal), no
pinning (each server would need a CPU of its own), no wall-clock stacks ([observe] pmp: a
server whose client is stopped would show its idle threads) nor the host-speed canary
(interleaving takes the host's speed out by design). On-CPU profiles and allocation counts
([observe] perf, alloc) are per seat: only the running seat works (observers/seats.py).

    problems = design_problems(spec)   # [] or Problems with key paths and fixes
    design, reason = choose(spec)      # ("interleaved", "...") for a file without `design`

Without `design` a run is interleaved wherever that design measures what the file asks: it
calls small effects in far fewer rounds (docs/methodology.md). Otherwise it is sequential,
and the reason is one line, recorded in the results' meta (`design_reason`).
"""

from __future__ import annotations

import dataclasses

from perflab import servers
from perflab.errors import Problem
from perflab import workloads
from perflab.spec.hosts import client_hosts, host_axis
from perflab.spec.matrix import Experiment
from perflab.spec.schema import ExperimentFile
from perflab.workloads.rate import rates

_HINT = 'remove it, or use design = "sequential"'
# why an open loop cannot take turns: a stopped client's arrivals would pile up and come at once
_OPEN_LOOP = "a client stopped between its turns would queue the arrivals of its pause and send them at once"


def design_problems(spec: ExperimentFile) -> list[Problem]:
    e = spec.experiment
    if e.design != "interleaved":
        return []
    problems = []
    kind = servers.kind(e.server)
    if kind.interleaved_refusal:
        problems.append(
            Problem(
                "experiment.design",
                f'design = "interleaved" on a server it runs (not {kind.title})',
                "interleaved",
                f'use design = "sequential" on {kind.title}',
            )
        )
    if workloads.of(spec).interleaved_refusal:
        problems.append(
            Problem(
                "workload.tool",
                'tool = "sysbench" or "pgbench" with design = "interleaved"',
                spec.workload.tool,
                f"{_HINT}: the turns are counted by sysbench's wrapper or pgbench's log, "
                f"not by {spec.workload.tool} yet",
            )
        )
    if e.pin:
        problems.append(
            Problem(
                "experiment.pin",
                'pin = false with design = "interleaved"',
                "true",
                "every server and client of a round shares the CPUs; remove pin",
            )
        )
    if spec.observe.pmp is not None:
        expected = 'no [observe] pmp with design = "interleaved"'
        hint = f"{_HINT}: wall-clock stacks of a server whose client is stopped show its idle threads"
        problems.append(Problem("observe.pmp", expected, "pmp", hint))
    if e.drop_caches:
        problems.append(
            Problem(
                "experiment.drop_caches",
                'drop_caches = false with design = "interleaved"',
                "true",
                f"{_HINT}: the page cache is dropped before each cell, one at a time",
            )
        )
    if spec.observe.io:
        hint = f"{_HINT}: the servers of a round share one disk, whose reads and writes are not per server"
        problems.append(Problem("observe.io", 'no [observe] io with design = "interleaved"', "true", hint))
    if rates(spec):
        hint = f"{_HINT}: {_OPEN_LOOP}"
        problems.append(Problem("workload.rate", 'no rate with design = "interleaved"', "rate", hint))
    if spec.observe.host_speed:
        hint = "remove it: interleaved turns put the host's speed on every variant alike"
        problems.append(Problem("observe.host_speed", 'no host-speed canary with design = "interleaved"', "true", hint))
    return problems


def choose(spec: ExperimentFile) -> tuple[ExperimentFile, str]:
    """`spec` with its design decided, and why in one line: the file's own design when it
    names one; else interleaved unless something in the file needs the sequential design."""
    e = spec.experiment
    if e.design is not None:
        return spec, f'design = "{e.design}" in the file'
    why = sequential_reason(spec)
    design = "sequential" if why else "interleaved"
    section = e.model_copy(update={"design": design})
    if why is None:
        why = "interleaved: the file measures nothing that needs one server at a time (the default)"
    return spec.model_copy(update={"experiment": section}), why


def sequential_reason(spec: ExperimentFile) -> str | None:
    """Why a file without `design` runs sequentially (None: it can run interleaved)."""
    e = spec.experiment
    cells_per_group = 1
    for labels in spec.variants.values():
        cells_per_group *= len(labels)
    if cells_per_group < 2:
        return "sequential: one variant, nothing to take turns with"
    refusal = servers.kind(e.server).interleaved_refusal
    if refusal:
        return f"sequential: {refusal}"
    clients = client_hosts(spec)
    if clients:
        host = f"the client runs on host {clients[0]}"
        return f'sequential: {host} (the default with hosts; design = "interleaved" takes turns there)'
    if e.server_host is not None:
        host = f"the server runs on host {e.server_host}"
        return f'sequential: {host} (the default with hosts; design = "interleaved" takes turns there)'
    axis = host_axis(spec)
    if axis is not None:
        return f"sequential: the host axis {axis} runs servers on other machines (no turn shares their speed)"
    workload_refusal = workloads.of(spec).interleaved_refusal
    if workload_refusal:
        return f"sequential: {workload_refusal}"
    if rates(spec):
        return f"sequential: a fixed rate ([workload] rate): {_OPEN_LOOP}"
    if e.pin:
        return "sequential: pin = true gives the server a CPU of its own; interleaved servers share them"
    if spec.observe.pmp is not None:
        return "sequential: [observe] pmp (wall-clock stacks) follows one server through its whole wall-clock window"
    if e.drop_caches:
        return "sequential: drop_caches = true drops the page cache before each cell, one at a time"
    if spec.observe.io:
        why = "sequential: [observe] io counts the disk's reads and writes, which a round's servers would share"
        # on by default on a disk (ExperimentFile.with_io_default): say how to interleave anyway
        return why + ('; io = false or design = "interleaved" to interleave' if e.on_disk else "")
    if spec.observe.host_speed:
        return "sequential: [observe] host_speed = true asks for the canary, which the sequential design needs"
    return None


def with_design(exp: Experiment, design: str, reason: str) -> Experiment:
    """`exp` with another design and the reason for it (preflight's fallback, a resumed run's
    stored design)."""
    section = exp.file.experiment.model_copy(update={"design": design})
    return dataclasses.replace(exp, file=exp.file.model_copy(update={"experiment": section}), design_reason=reason)
