"""Where a named host is: the `ssh = "user@address[:port]"` of a `[hosts.NAME]` table, and the ssh
config that supplies everything else (identity, known_hosts, options).

    parse_target("root@db1:2222")  # SshTarget(user="root", address="db1", port=2222)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the user's ssh config unless PERFLAB_SSH_CONFIG names another (the tests point it at their own)
CONFIG_ENV = "PERFLAB_SSH_CONFIG"

_TARGET = re.compile(
    r"^(?P<user>[A-Za-z_][A-Za-z0-9_.-]{0,31})@(?P<address>[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?$"
)
TARGET_FORM = 'user@address[:port], e.g. "root@db1" or "root@10.0.0.5:2222"'


@dataclass(frozen=True)
class SshTarget:
    user: str
    address: str
    port: int | None  # None: the ssh config's Port, else 22

    def __str__(self) -> str:
        return f"{self.user}@{self.address}" + (f":{self.port}" if self.port else "")


def parse_target(text: str) -> SshTarget:
    """An SshTarget, or ValueError saying what form is expected."""
    found = _TARGET.match(text)
    port = int(found["port"]) if found and found["port"] else None
    if not found or (port is not None and not 1 <= port <= 65535):
        raise ValueError(TARGET_FORM)
    return SshTarget(found["user"], found["address"].strip("[]"), port)


def ssh_config() -> list[Path] | None:
    """The ssh config files asyncssh reads: PERFLAB_SSH_CONFIG's, or None for its default (~/.ssh/config)."""
    given = os.environ.get(CONFIG_ENV)
    return [Path(given)] if given else None


# $0: a program; "$@": directories to look in first: its path on the host (else $PATH's), or nothing
WHICH = 'for d in "$@"; do [ -x "$d/$0" ] && { echo "$d/$0"; exit 0; }; done; command -v "$0"'


def install_hint(package: str, target: Any) -> str:
    """How to get a tool onto a host: its Debian package, or the instruction itself (go-tpc's)."""
    return f"install it there: {package if ' ' in package else 'apt-get install ' + package} (on {target})"
