"""What `[hosts]`, `server_host` and `client_host` allow (docs/hosts.md), checked once the file is
valid: every host named (also by a host axis: variants that set server_host) is a `[hosts.NAME]`
table (exit 2 otherwise), and a client or a server on
another host comes with what it supports so far: a tool that keeps its login's password off command
lines there (Workload.host_refusal: go-tpc with PostgreSQL only), the interleaved design on one
placement (sysbench's seats on a client host); a client there takes its variants as here; a server
there runs the host's installed server (a variant's preload is the host's
allocator; [experiment] storage a directory there), or a build or glibc variant's copy there
(hosts/trees.py). [observe] io and host_speed
run where the server runs, whichever client (observers/beside.py), and alloc of a server here
with its client on a host.

    problems = host_problems(spec)   # [] or Problems with key paths and fixes
"""

from __future__ import annotations

import itertools
from typing import Any

from perflab import servers
from perflab.errors import Problem
from perflab import workloads
from perflab.spec.schema import ExperimentFile

_PIN_REASON = (
    "pin splits one machine's CPUs between the server and its client; with server_host they run on different "
    "machines (`perflab docs hosts#what-stays-refused-and-why`)"
)


def server_hosts(spec: ExperimentFile) -> list[str]:
    """Every host a server of the experiment runs on: [experiment] server_host, then a host axis's
    (variants that set server_host), in the file's order."""
    named = [spec.experiment.server_host] + [v.server_host for ls in spec.variants.values() for v in ls.values()]
    return [n for n in dict.fromkeys(named) if n is not None]


def client_hosts(spec: ExperimentFile) -> list[str]:
    """Every host a client of the experiment runs on: [experiment] client_host, then the variants'
    (a host axis's client host per variant), in the file's order."""
    named = [spec.experiment.client_host] + [v.client_host for ls in spec.variants.values() for v in ls.values()]
    return [n for n in dict.fromkeys(named) if n is not None]


def host_axis(spec: ExperimentFile) -> str | None:
    """The axis whose variants set server_host (docs/hosts.md, "A host axis"), if any."""
    return next((axis for axis, ls in spec.variants.items() if any(v.server_host for v in ls.values())), None)


def host_problems(spec: ExperimentFile) -> list[Problem]:
    e = spec.experiment
    named = [("experiment.server_host", e.server_host), ("experiment.client_host", e.client_host)]
    named += [
        (f"variants.{axis}.{label}.{key}", getattr(v, key))
        for axis, ls in spec.variants.items()
        for label, v in ls.items()
        for key in ("server_host", "client_host")
    ]
    problems = [_unknown(path, name, spec) for path, name in named if name is not None and name not in spec.hosts]
    problems += _client_axis_problems(spec)
    if server_hosts(spec):
        problems += _server_problems(spec)
    elif "prepare_on" in e.model_fields_set:
        problems.append(
            Problem("experiment.prepare_on", "prepare_on with server_host only", e.prepare_on, "remove prepare_on")
        )
    if client_hosts(spec):
        problems += _client_problems(spec, _server_here_with_client_host(spec))
    if e.design == "interleaved" and (server_hosts(spec) or client_hosts(spec)):
        problems += _interleaved_problems(spec)
    if "concurrent_hosts" in e.model_fields_set and host_axis(spec) is None:
        problems.append(
            Problem(
                "experiment.concurrent_hosts",
                "concurrent_hosts with a host axis only",
                repr(e.concurrent_hosts).lower(),
                'remove it: only the hosts of a host axis run at once (`perflab docs hosts#a-host-axis-variantshost`)',
            )
        )
    return problems


def _client_axis_problems(spec: ExperimentFile) -> list[Problem]:
    """A variant's client_host belongs to the host axis (a client host per server host): on another
    axis it would make the client's host a variable of every comparison."""
    axis = host_axis(spec)
    return [
        Problem(
            f"variants.{name}.{label}.client_host",
            "client_host in the variants of a host axis (beside their server_host)",
            repr(v.client_host),
            "set client_host under [experiment] for every cell, or give the host axis's labels a server_host "
            '(`perflab docs hosts#a-host-axis-variantshost`)',
        )
        for name, ls in spec.variants.items()
        for label, v in ls.items()
        if v.client_host is not None and name != axis
    ]


def _placements(spec: ExperimentFile) -> set[tuple[str | None, str | None, str | None]]:
    """(server host, client host, preload) of every cell ([experiment]'s hosts where no variant sets
    one): the product of the axes that set one of them only, the others changing none of them (a
    matrix of many axes is not walked cell by cell)."""
    keys = ("server_host", "client_host", "preload")
    axes = [ls for ls in spec.variants.values() if any(getattr(v, k) for v in ls.values() for k in keys)]
    e, found = spec.experiment, set()
    for combo in itertools.product(*(ls.values() for ls in axes)):
        server = next((v.server_host for v in combo if v.server_host), e.server_host)
        client = next((v.client_host for v in combo if v.client_host), e.client_host)
        found.add((server, client, next((v.preload for v in combo if v.preload), None)))
    return found


def server_here(spec: ExperimentFile) -> bool:
    """Some cell's server runs on this machine (else every one on a server host: its storage is there)."""
    return any(server is None for server, _, _ in _placements(spec))


def preloads_by_host(spec: ExperimentFile) -> dict[str | None, set[str]]:
    """The server preloads (allocators, libraries) of the cells on each server host (None: this machine),
    for the preflight there: a host axis's preload variants may run here and on its hosts."""
    found: dict[str | None, set[str]] = {}
    for server, _, preload in _placements(spec):
        if preload is not None and preload != "glibc":
            found.setdefault(server, set()).add(preload)
    return found


def _server_here_with_client_host(spec: ExperimentFile) -> bool:
    """Some cell's server runs on this machine with its client on a host."""
    return any(server is None and client is not None for server, client, _ in _placements(spec))


def host_lanes(spec: ExperimentFile) -> dict[str, Any]:
    """How the hosts of a host axis run (meta `host_schedule`, docs/hosts.md): `concurrent` when every
    server host's cells have client hosts of their own and no two server hosts share a machine (by
    name, or by address), so their rounds are independent; else one host at a time, and `why`."""
    axis = host_axis(spec)
    lanes: dict[str, set[str]] = {}  # a server host ("here": this machine) -> the hosts its cells use
    for server, client, _ in sorted(_placements(spec), key=lambda p: _order(spec, p[0])):
        lanes.setdefault(server or HERE, {server or HERE}).add(client or HERE)
    record: dict[str, Any] = {"lanes": {host: sorted(used) for host, used in lanes.items()}}
    if axis is None or len(lanes) < 2:
        return {"concurrent": False, "why": "one server host", **record}
    if not spec.experiment.concurrent_hosts:
        return {"concurrent": False, "why": "concurrent_hosts = false", **record}
    for host, used in lanes.items():
        if HERE in used:
            what = "its server" if host == HERE else "its client"
            return {
                "concurrent": False,
                "why": f"host {host}: {what} runs on this machine, beside the others",
                **record,
            }
    machines: dict[str, str] = {}  # a machine (its ssh address) -> the server host whose cells use it
    for host, used in lanes.items():
        for name in used:
            where = _machine(spec, name)
            if machines.setdefault(where, host) != host:
                other = machines[where]
                return {
                    "concurrent": False,
                    "why": f"hosts {other} and {host} both use {name} ({where}): their windows would share it",
                    **record,
                }
    return {"concurrent": True, "why": "every server host has client hosts of its own", **record}


HERE = "(this machine)"


def _order(spec: ExperimentFile, server: str | None) -> int:
    """A server host's place in the file (server_hosts' order; this machine last)."""
    named = server_hosts(spec)
    return named.index(server) if server in named else len(named)


def longest_lane(spec: ExperimentFile) -> float:
    """The share of a round's cells that run one after another: the busiest server host's, when a host
    axis's hosts run at once (host_lanes); else 1 (every cell in turn). For the run's time estimates."""
    axis = host_axis(spec)
    if axis is None or not host_lanes(spec)["concurrent"]:
        return 1.0
    labels = spec.variants[axis]
    per_host: dict[str, int] = {}
    for v in labels.values():
        host = v.server_host or spec.experiment.server_host or HERE
        per_host[host] = per_host.get(host, 0) + 1
    return max(per_host.values()) / len(labels)


def _machine(spec: ExperimentFile, name: str) -> str:
    """A [hosts.NAME]'s machine, as its ssh target names it (two names for one address are one machine)."""
    from perflab.hosts.target import parse_target

    return parse_target(spec.hosts[name].ssh).address


def _unknown(path: str, name: str, spec: ExperimentFile) -> Problem:
    known = ", ".join(spec.hosts) or 'none: add a [hosts.NAME] table with ssh = "user@address"'
    return Problem(path, "the name of a [hosts.NAME] table", repr(name), f"defined hosts: {known}")


def _client_problems(spec: ExperimentFile, observers: bool = True) -> list[Problem]:
    """`observers` False: server_host's checks already name the observers (one problem per key)."""
    problems = _tool_problems(spec, "client_host")  # every server kind takes a client on a host
    if observers:  # the server here: its observers run here, as beside a local client (run/ends.ServerHere)
        problems += _client_target_problems(spec)
    return problems  # client variants run there as here (hosts/client.ClientOnHost.variant_env)


def _tool_problems(spec: ExperimentFile, key: str) -> list[Problem]:
    """The workload tool, when it cannot keep its login's password off a host's command lines."""
    refusal = workloads.of(spec).host_refusal(servers.kind(spec.experiment.server))
    if refusal is None:
        return []
    return [Problem("workload.tool", f"a tool that takes its password from a file with {key}", spec.workload.tool, refusal)]


def _client_target_problems(spec: ExperimentFile) -> list[Problem]:
    """perf and pmp of the client run on its host (observers/paired.on_host), where
    its stacks are sampled by eu-stack: another pmp tool is refused."""
    pmp = spec.observe.pmp
    if pmp is None or "client" not in pmp.targets or "tool" not in pmp.model_fields_set or pmp.tool == "eu-stack":
        return []
    return [
        Problem(
            "observe.pmp.tool",
            'tool = "eu-stack" (or no tool) with targets naming "client" and client_host',
            repr(pmp.tool).replace("'", '"'),
            "the client's stacks on its host are sampled by eu-stack there (`perflab docs hosts`)",
        )
    ]


def _profiler_problems(spec: ExperimentFile) -> list[Problem]:
    """perf and pmp run on the server's host, of the server (its process, or PostgreSQL's tree); of a
    client where it runs (here, or on client_host there); pmp on a server host is eu-stack."""
    problems = []
    pmp = spec.observe.pmp
    if pmp is not None and "tool" in pmp.model_fields_set and pmp.tool != "eu-stack":
        problems.append(
            Problem(
                "observe.pmp.tool",
                'tool = "eu-stack" (or no tool) with server_host',
                repr(pmp.tool).replace("'", '"'),
                "on a server host the stacks are sampled by eu-stack there (`perflab docs hosts`)",
            )
        )
    return problems


def _interleaved_problems(spec: ExperimentFile) -> list[Problem]:
    """The interleaved design with hosts: its seats' servers here or on the server host, their clients
    here or on the client host (run/seat.py: a host's clients stopped and resumed by its turn agent,
    hosts/turns.py), all of a group on one placement."""
    found = []
    if host_axis(spec) is not None:  # its variants on other machines: no turn shares their host speed
        why = "a host axis's variants run on different machines, so turns cannot share their speed; remove design"
        found.append(Problem("experiment.design", 'design = "sequential" with a host axis', "interleaved", why))
    # sysbench's seats count their own turns (turns.lua), pgbench's from its log (fetched from a client
    # host, its stamps put on this machine's clock): anywhere
    return found


def _server_problems(spec: ExperimentFile) -> list[Problem]:
    e = spec.experiment  # every server kind runs on a host, alloc and the profilers with it
    problems = _tool_problems(spec, "server_host")
    for key, value, default in (("pin", e.pin, False),):  # storage and drop_caches apply on the host
        if value != default:
            problems.append(
                Problem(
                    f"experiment.{key}",
                    f"{key} = {default!r} with server_host".replace("'", '"'),
                    repr(value),
                    _PIN_REASON,
                )
            )
    problems += _profiler_problems(spec)
    return problems  # builds and glibc variants run there from their copies (hosts/trees.py)
