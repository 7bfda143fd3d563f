"""What `[hosts]`, `server_host` and `client_host` allow (docs/hosts.md), checked once the file is
valid: every host named is a `[hosts.NAME]` table (exit 2 otherwise), and a client on another host
comes with what it supports so far: sysbench, the sequential design, no client variants and no
observers beyond the server's resources.

    problems = host_problems(spec)   # [] or Problems with key paths and fixes
"""

from __future__ import annotations

from perflab import servers
from perflab.errors import Problem
from perflab.run import workloads
from perflab.spec.schema import ExperimentFile

_NOT_YET = 'not with client_host yet (docs/hosts.md, "What a remote client supports")'


def host_problems(spec: ExperimentFile) -> list[Problem]:
    e = spec.experiment
    problems = [_unknown(f"experiment.{key}", name, spec) for key, name in
                (("server_host", e.server_host), ("client_host", e.client_host))
                if name is not None and name not in spec.hosts]  # fmt: skip
    problems = [p for p in problems if p is not None]
    if e.server_host is not None:
        problems.append(
            Problem(
                "experiment.server_host",
                "the server on this machine (no server_host)",
                e.server_host,
                "a server on another host is not built yet; client_host runs the client there",
            )
        )
    if e.client_host is not None:
        problems += _client_problems(spec)
    return problems


def _unknown(path: str, name: str, spec: ExperimentFile) -> Problem:
    known = ", ".join(spec.hosts) or 'none: add a [hosts.NAME] table with ssh = "user@address"'
    return Problem(path, "the name of a [hosts.NAME] table", repr(name), f"defined hosts: {known}")


def _client_problems(spec: ExperimentFile) -> list[Problem]:
    e, problems = spec.experiment, []
    refusal = servers.kind(e.server).remote_client_refusal
    if refusal:
        problems.append(Problem("experiment.client_host", "a server that takes remote clients", e.server, refusal))
    if not workloads.of(spec).remote_client:
        problems.append(Problem("workload.tool", 'tool = "sysbench" with client_host', spec.workload.tool, _NOT_YET))
    if e.design == "interleaved":
        problems.append(
            Problem(
                "experiment.design",
                'design = "sequential" with client_host',
                "interleaved",
                "interleaved turns are taken by local clients only; remove design",
            )
        )
    for name in ("perf", "pmp", "alloc"):
        if getattr(spec.observe, name) is not None:
            problems.append(Problem(f"observe.{name}", f"no [observe] {name} with client_host", name, _NOT_YET))
    for key in ("status", "host_speed"):
        if getattr(spec.observe, key):
            problems.append(Problem(f"observe.{key}", f"no [observe] {key} with client_host", "true", _NOT_YET))
    for axis, labels in spec.variants.items():
        for label, v in labels.items():
            if v.client_preload or v.client_env or v.client_library:
                problems.append(Problem(f"variants.{axis}.{label}", "no client_preload, client_env or client_library "
                                        "with client_host", "a client variant", _NOT_YET))  # fmt: skip
    return problems
