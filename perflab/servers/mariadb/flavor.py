"""MariaDB's Flavor (servers/mysql_flavor.py): its option file's group, [mariadbd], its options
written as given (perflab's defaults are MariaDB's names), and its INNODB_METRICS column.

    "10.11.18-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)"   -> mariadb 10.11.18

MySQL and Percona Server have their own (servers/mysql/flavor.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from perflab.servers.mysql_flavor import Flavor, version_tuple

if TYPE_CHECKING:
    from perflab.builds import Build

METRICS_COLUMN_SINCE = (10, 5, 0)  # INNODB_METRICS' ENABLED column (STATUS = 'enabled' before)


@dataclass(frozen=True)
class MariaDBFlavor(Flavor):
    group = "mariadbd"

    @property
    def metrics_enabled(self) -> str:
        """MariaDB 10.5 and later name the column ENABLED; the installed server (version 0) is 10.11."""
        return "STATUS = 'enabled'" if (0, 0, 0) < self.version < METRICS_COLUMN_SINCE else "ENABLED"


INSTALLED = MariaDBFlavor("mariadb", (0, 0, 0))  # Debian 12's own mariadbd
FLAVORS = ("mariadb",)  # what a binary of this kind is (Build.server): the kind's `flavors`


def dialect(build: Build | None) -> MariaDBFlavor:
    """The Flavor of a MariaDB binary (`build` None: the installed server)."""
    return INSTALLED if build is None else MariaDBFlavor(build.server, version_tuple(build.version))
