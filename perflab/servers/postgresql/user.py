"""The account postgres runs as, and what it may reach: its own module, below server.py and
rooted.py, which both ask it (tests/unit/test_layers.py: no import cycle)."""

from __future__ import annotations

import pwd
from pathlib import Path

from perflab.servers.managed import account, as_account
from perflab.servers.managed import give as managed_give

RUN_USER = "postgres"  # Debian's package creates it; used only when perflab runs as root


def run_user() -> pwd.struct_passwd | None:
    """The account the server runs as: RUN_USER when perflab is root, else perflab's own (None)."""
    return account(RUN_USER, "apt-get install postgresql-15 creates it (or `adduser --system postgres`)")


def as_server_user(argv: list[str]) -> list[str]:
    """argv run as the server's user (unchanged when perflab is not root): servers/managed.as_account."""
    return as_account(argv, run_user())


def give(path: Path) -> None:
    """`path` (a tree perflab made) the server's user's (servers/managed.give)."""
    managed_give(path, run_user(), "postgres")


def reachable(path: Path) -> bool:
    """Whether the server's user can reach `path` (always, when perflab is not root)."""
    return run_user() is None or all(p.stat().st_mode & 0o001 for p in path.parents if p != Path("/"))
