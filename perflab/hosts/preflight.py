"""The remote hosts of an experiment, checked before anything starts (perflab/preflight.py): each
host named is reachable over SSH with a known host key, and has the tools it will run, or exit 3
names the host and the package to install there (docs/hosts.md).

    problems = host_problems(exp.file, {"sysbench": "sysbench"})   # [] or Problems for EnvironmentProblem
"""

from __future__ import annotations

from collections.abc import Set

from perflab import allocators
from perflab.errors import HostKeyError, HostUnreachableError, Problem
from perflab.hosts.target import install_hint, parse_target
from perflab.hosts.transport import Connection
from perflab.run import storage
from perflab.spec.hosts import client_hosts, preloads_by_host, server_hosts
from perflab.spec.schema import ExperimentFile

# $0: a tool, "$@": directories off the PATH where it may be (postgresql-15's bin); else on the ssh
# user's PATH (root's has /usr/sbin: mariadbd)
_HAS = 'for d in "$@"; do [ -x "$d/$0" ] && exit 0; done; command -v "$0" || test -x "$0"'


def host_problems(
    spec: ExperimentFile, packages: dict[str, str], server_packages: dict[str, str] | None = None, dirs: tuple[str, ...] = ()
) -> list[Problem]:
    """Problems of the client host and the server host (`packages`, `server_packages`: the tools each
    runs -> their Debian packages; `dirs`: where the server's may be, off the PATH)."""
    wanted: dict[str, dict[str, str]] = {}
    for name in client_hosts(spec):  # [experiment] client_host, a host axis's
        wanted[name] = {**packages, **client_observer_packages(spec)}
    for name in server_hosts(spec):  # [experiment] server_host, a host axis's
        wanted[name] = {**wanted.get(name, {}), **(server_packages or {}), **observer_packages(spec)}
    preloads = preloads_by_host(spec)
    clients = {p for ls in spec.variants.values() for v in ls.values() if (p := v.client_preload) not in (None, "glibc")}
    for name in client_hosts(spec):  # a client variant's allocator is the client host's (the product of the axes)
        preloads[name] = preloads.get(name, set()) | clients
    return [
        p for name, tools in wanted.items() for p in _problems_of(spec, name, tools, dirs, preloads.get(name, set()))
    ]


def observer_packages(spec: ExperimentFile) -> dict[str, str]:
    """The tools the server host's observers run there -> their Debian packages."""
    observe = spec.observe
    syscalls = observe.alloc is not None and observe.alloc.syscalls  # [observe] alloc's syscalls: perf there
    syscalls = syscalls or bool(observe.io)  # [observe] io: the server's fsyncs, by perf there
    return {
        **({"perf": "linux-perf"} if observe.perf is not None or syscalls else {}),
        **({"eu-stack": "elfutils"} if observe.pmp is not None else {}),
    }


def client_observer_packages(spec: ExperimentFile) -> dict[str, str]:
    """The tools the client host's profilers run there (targets naming "client") -> their Debian packages."""
    observe = spec.observe
    return {
        **({"perf": "linux-perf"} if observe.perf is not None and "client" in observe.perf.targets else {}),
        **({"eu-stack": "elfutils"} if observe.pmp is not None and "client" in observe.pmp.targets else {}),
    }


def _problems_of(
    spec: ExperimentFile,
    name: str,
    packages: dict[str, str],
    dirs: tuple[str, ...] = (),
    preloads: Set[str] = frozenset(),
) -> list[Problem]:
    """The tools and the known allocators (`preloads`: the cells' there) host `name` lacks."""
    target = parse_target(spec.hosts[name].ssh)
    try:
        link = Connection.open(name, target)
    except (HostUnreachableError, HostKeyError) as exc:
        return [Problem(f"hosts.{name}", "a host reachable over SSH, its key in known_hosts", exc.message, exc.hint)]
    try:
        problems = [
            Problem(
                f"hosts.{name}",
                f"{tool} installed on host {name}",
                "not installed",
                install_hint(package, target),
            )
            for tool, package in packages.items()
            if link.run(["sh", "-c", _HAS, tool, *dirs]).status != 0
        ]
        if name in server_hosts(spec):  # [experiment] storage and drop_caches apply there
            problems += storage.host_problems(link, name, spec.experiment.storage, spec.experiment.drop_caches)
        for preload in sorted(p for p in preloads if p in allocators.KNOWN):  # a path is copied there
            if link.run(["sh", "-c", allocators.FIND_ON_HOST, *allocators.candidates(preload)]).status != 0:
                package = allocators.KNOWN[preload].package
                problems.append(
                    Problem(
                        f"hosts.{name}",
                        f"{preload} installed on host {name} (a variant preloads it there)",
                        "not installed",
                        f"install it there: apt-get install {package} (on {target})",
                    )
                )
        return problems
    finally:
        link.close()
