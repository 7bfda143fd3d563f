"""The remote hosts of an experiment, checked before anything starts (perflab/preflight.py): each
host named is reachable over SSH with a known host key, and has the tools it will run, or exit 3
names the host and the package to install there (docs/hosts.md).

    problems = host_problems(exp.file, {"sysbench": "sysbench"})   # [] or Problems for EnvironmentProblem
"""

from __future__ import annotations

from typing import Any

from perflab.errors import HostKeyError, HostUnreachableError, Problem
from perflab.hosts.target import parse_target
from perflab.hosts.transport import Connection

_HAS = 'command -v "$0" || test -x "$0"'


def host_problems(spec: Any, packages: dict[str, str]) -> list[Problem]:
    """Problems of the client host (`packages`: the tools it runs -> their Debian packages)."""
    name = spec.experiment.client_host
    if name is None:
        return []
    target = parse_target(spec.hosts[name].ssh)
    try:
        link = Connection.open(name, target)
    except (HostUnreachableError, HostKeyError) as exc:
        return [Problem(f"hosts.{name}", "a host reachable over SSH, its key in known_hosts", exc.message, exc.hint)]
    try:
        return [
            Problem(
                f"hosts.{name}",
                f"{tool} installed on host {name}",
                "not installed",
                f"install it there: apt-get install {package} (on {target})",
            )
            for tool, package in packages.items()
            if link.run(["sh", "-c", _HAS, tool]).status != 0
        ]
    finally:
        link.close()
