"""What the MySQL-protocol servers' dialects are made of, below everything that dispatches on them:
the `Flavor` base each kind's flavor.py builds on (its option file), `Init` (how a datadir is
initialised: each kind's datadir.py plans one), and the helpers both use. It imports nothing of
servers/, so the kinds' leaf modules, the server process (mysqld.py: `dialect`) and the dataset
(mysqld_dataset.py: `initialise`) stand on it without a cycle (tests/unit/test_layers.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perflab.builds import Build

RUN_USER = "mysql"  # Debian's mariadb-server (and mysql-server) create it; used only when perflab is root
SHARES = ("share/mysql", "share/mariadb", "share", "sql/share", "usr/share/mysql")  # errmsg.sys's language dirs


@dataclass(frozen=True)
class Flavor:
    """What a server binary's kind and version change in its option file (subclasses: each
    kind's flavor.py). The base writes options as given and adds none."""

    kind: str  # Build.server: mariadb | mysql | percona
    version: tuple[int, int, int]
    group = ""  # the option file's group, [mariadbd] or [mysqld] (a class attribute)

    @property
    def metrics_enabled(self) -> str:
        """information_schema.INNODB_METRICS' filter for the metrics being counted."""
        return "STATUS = 'enabled'"

    def translate(self, options: dict[str, Any]) -> dict[str, Any]:
        """`options` with MariaDB's names and meanings turned into this server's."""
        return dict(options)

    def private(self, there: str, build: Build | None) -> dict[str, Any]:
        """Options that keep the server to its cell's directory `there`, beyond perflab's fixed ones:
        `secure-file-priv`, so that LOAD_FILE, LOAD DATA and SELECT INTO OUTFILE reach only a
        directory of the cell's own, `files` (made at its start: MySQL exits when it is missing; issue 48)."""
        return {"secure-file-priv": f"{there}/files"}


@dataclass(frozen=True)
class Init:
    argv: list[str]
    method: str  # what initialised it, for the results' meta: "mysqld --initialize-insecure"
    env: dict[str, str] = field(default_factory=dict)  # added to perflab's clean environment


def version_tuple(version: str) -> tuple[int, int, int]:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else (0, 0, 0)


def scratch(datadir: Path) -> Path:
    """A directory beside the datadir while initialising it (secure-file-priv, a loader's wrapper)."""
    path = datadir.with_name(datadir.name + "-files")
    path.mkdir(parents=True, exist_ok=True)
    return path
