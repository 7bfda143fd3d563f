"""What `[hosts]`, `server_host` and `client_host` allow (docs/hosts.md), checked once the file is
valid: every host named (also by a host axis: variants that set server_host) is a `[hosts.NAME]`
table (exit 2 otherwise), and a client or a server on
another host comes with what it supports so far: sysbench or pgbench, the sequential design, no client
variants; a server there runs the host's installed server, on its tmpfs, with no preload, build or
glibc variant. [observe] io and host_speed run where the server runs, whichever client (run/observers/
remote_io.py), and alloc of a server here with its client on a host.

    problems = host_problems(spec)   # [] or Problems with key paths and fixes
"""

from __future__ import annotations

from perflab import servers
from perflab.errors import Problem
from perflab.run import workloads
from perflab.spec.schema import ExperimentFile

_NOT_YET = 'not with client_host yet (docs/hosts.md, "What a remote client supports")'
_NOT_YET_SERVER = 'not with server_host yet (docs/hosts.md, "What a remote server supports")'


def server_hosts(spec: ExperimentFile) -> list[str]:
    """Every host a server of the experiment runs on: [experiment] server_host, then a host axis's
    (variants that set server_host), in the file's order."""
    named = [spec.experiment.server_host] + [v.server_host for ls in spec.variants.values() for v in ls.values()]
    return [n for n in dict.fromkeys(named) if n is not None]


def host_axis(spec: ExperimentFile) -> str | None:
    """The axis whose variants set server_host (docs/hosts.md, "A host axis"), if any."""
    return next((axis for axis, ls in spec.variants.items() if any(v.server_host for v in ls.values())), None)


def host_problems(spec: ExperimentFile) -> list[Problem]:
    e = spec.experiment
    named = [("experiment.server_host", e.server_host), ("experiment.client_host", e.client_host)]
    named += [
        (f"variants.{axis}.{label}.server_host", v.server_host)
        for axis, ls in spec.variants.items()
        for label, v in ls.items()
    ]
    problems = [_unknown(path, name, spec) for path, name in named if name is not None and name not in spec.hosts]
    axis = host_axis(spec)
    if axis is not None and e.client_host is not None:
        problems.append(
            Problem(
                "experiment.client_host",
                f"no client_host with a host axis ({axis})",
                e.client_host,
                "the client runs on this machine against each host's server; remove client_host",
            )
        )
    if server_hosts(spec):
        problems += _server_problems(spec)
    elif "prepare_on" in e.model_fields_set:
        problems.append(
            Problem("experiment.prepare_on", "prepare_on with server_host only", e.prepare_on, "remove prepare_on")
        )
    if e.client_host is not None:
        problems += _client_problems(spec, e.server_host is None)
    return problems


def _unknown(path: str, name: str, spec: ExperimentFile) -> Problem:
    known = ", ".join(spec.hosts) or 'none: add a [hosts.NAME] table with ssh = "user@address"'
    return Problem(path, "the name of a [hosts.NAME] table", repr(name), f"defined hosts: {known}")


def _client_problems(spec: ExperimentFile, observers: bool = True) -> list[Problem]:
    """`observers` False: server_host's checks already name the observers (one problem per key)."""
    e, problems = spec.experiment, []
    refusal = servers.kind(e.server).remote_client_refusal
    if refusal:
        problems.append(Problem("experiment.client_host", "a server that takes remote clients", e.server, refusal))
    if not workloads.of(spec).remote_client:
        problems.append(
            Problem("workload.tool", 'tool = "sysbench" or "pgbench" with client_host', spec.workload.tool, _NOT_YET)
        )
    if e.design == "interleaved" and e.server_host is None:
        problems.append(
            Problem(
                "experiment.design",
                'design = "sequential" with client_host',
                "interleaved",
                "interleaved turns are taken by local clients only; remove design",
            )
        )
    if observers:  # the server here: its perf, pmp (of the server) and status run here with sysbench;
        # its alloc, io and canary here with either client (alloc: MariaDB's; PostgreSQL refuses it anywhere)
        here = ("perf", "pmp", "status") if workloads.of(spec).remote_client_observers else ()
        names = tuple(n for n in ("perf", "pmp", "status") if n not in here)
        problems += _observer_problems(spec, names, "client_host", _NOT_YET)
        problems += _client_target_problems(spec)
    for axis, labels in spec.variants.items():
        for label, v in labels.items():
            if v.client_preload or v.client_env or v.client_library:
                problems.append(
                    Problem(
                        f"variants.{axis}.{label}",
                        "no client_preload, client_env or client_library with client_host",
                        "a client variant",
                        _NOT_YET,
                    )
                )
    return problems


def _client_target_problems(spec: ExperimentFile) -> list[Problem]:
    """perf and pmp with client_host profile the server only: the client's stacks would be its host's."""
    return [
        Problem(
            f"observe.{name}.targets",
            'targets = ["server"] with client_host',
            repr(entry.targets).replace("'", '"'),
            "the client runs on another host, where its stacks are not sampled yet: " + _NOT_YET,
        )
        for name in ("perf", "pmp")
        if (entry := getattr(spec.observe, name)) is not None and "client" in entry.targets
    ]


def _observer_problems(spec: ExperimentFile, names: tuple[str, ...], key: str, why: str) -> list[Problem]:
    """The [observe] entries of `names` that are set, refused with `key` (client_host, server_host)."""
    return [
        Problem(f"observe.{name}", f"no [observe] {name} with {key}", "true", why)
        for name in names
        if getattr(spec.observe, name) not in (None, False)
    ]


# the server on another host runs the host's installed server on its run directory (tmpfs), with
# what the variants give it through its option file and environment only
_SERVER_VARIANT_KEYS = ("build", "preload", "glibc", "client_preload", "client_library")


def _profiler_problems(spec: ExperimentFile) -> list[Problem]:
    """perf and pmp run on the server's host, of the server only (one process); pmp there is eu-stack."""
    problems = []
    refusal = servers.kind(spec.experiment.server).remote_profile_refusal
    for name in ("perf", "pmp"):
        entry = getattr(spec.observe, name)
        if entry is not None and refusal:
            problems.append(Problem(f"observe.{name}", f"no [observe] {name} with server_host", "true", refusal))
        elif entry is not None and "client" in entry.targets:
            problems.append(
                Problem(
                    f"observe.{name}.targets",
                    'targets = ["server"] with server_host',
                    repr(entry.targets).replace("'", '"'),
                    "profiles of a server on another host are of the server only: " + _NOT_YET_SERVER,
                )
            )
    pmp = spec.observe.pmp
    if pmp is not None and "tool" in pmp.model_fields_set and pmp.tool != "eu-stack":
        problems.append(
            Problem(
                "observe.pmp.tool",
                'tool = "eu-stack" (or no tool) with server_host',
                repr(pmp.tool).replace("'", '"'),
                "on a server host the stacks are sampled by eu-stack there (docs/hosts.md)",
            )
        )
    return problems


def _server_problems(spec: ExperimentFile) -> list[Problem]:
    e, problems = spec.experiment, []
    refusal = servers.kind(e.server).remote_server_refusal
    if refusal:
        problems.append(Problem("experiment.server_host", "a server that runs on another host", e.server, refusal))
    if not workloads.of(spec).remote_server:  # sysbench, pgbench: a login over TCP, its password in a file
        problems.append(
            Problem(
                "workload.tool", 'tool = "sysbench" or "pgbench" with server_host', spec.workload.tool, _NOT_YET_SERVER
            )
        )
    if e.design == "interleaved":
        problems.append(
            Problem(
                "experiment.design",
                'design = "sequential" with server_host',
                "interleaved",
                "interleaved turns are taken by servers on this machine only; remove design",
            )
        )
    for key, value, default in (
        ("storage", e.storage, "tmpfs"),
        ("drop_caches", e.drop_caches, False),
        ("pin", e.pin, False),
    ):
        if value != default:
            problems.append(
                Problem(
                    f"experiment.{key}",
                    f"{key} = {default!r} with server_host".replace("'", '"'),
                    repr(value),
                    _NOT_YET_SERVER,
                )
            )
    refusal = servers.kind(e.server).remote_alloc_refusal  # alloc runs where the server runs: MariaDB's
    if spec.observe.alloc is not None and refusal:
        problems.append(Problem("observe.alloc", "no [observe] alloc with server_host", "true", refusal))
    problems += _profiler_problems(spec)
    if spec.builds:
        problems.append(
            Problem(
                "builds",
                "no [builds] with server_host (the host's installed server runs)",
                ", ".join(spec.builds),
                _NOT_YET_SERVER,
            )
        )
    for axis, labels in spec.variants.items():
        for label, v in labels.items():
            used = [k for k in _SERVER_VARIANT_KEYS if getattr(v, k)] + (["client_env"] if v.client_env else [])
            if used:
                problems.append(
                    Problem(
                        f"variants.{axis}.{label}",
                        f"no {', '.join(_SERVER_VARIANT_KEYS)} or client_env with server_host",
                        ", ".join(used),
                        _NOT_YET_SERVER,
                    )
                )
    return problems
