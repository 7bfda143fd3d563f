"""Which dialect (`Flavor`: its option file) and which datadir initialisation a MySQL-protocol binary
gets, by the flavor its version line names (Build.server: servers/identity.py), from its kind's own
modules: mariadb/flavor.py and datadir.py, mysql/flavor.py and datadir.py. The installed server
(`build` None) is Debian 12's MariaDB. Asked by the server process (mysqld.py), the dataset
(mysqld_dataset.py: `initialise`) and the option names' check (mysqld_options.py); the kinds' own
packages import it not, so none of them is in an import cycle (tests/unit/test_layers.py).

    dialect(build).group            -> "mariadbd" | "mysqld"
    plan(datadir, build).method     -> "mariadb-install-db" | "mysqld --initialize-insecure"
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.errors import UsageError
from perflab.servers.mariadb import datadir as mariadb_datadir
from perflab.servers.mariadb import flavor as mariadb_flavor
from perflab.servers.mysql import datadir as mysql_datadir
from perflab.servers.mysql import flavor as mysql_flavor
from perflab.servers.mysql_flavor import Flavor, Init, version_tuple

if TYPE_CHECKING:
    from perflab.builds import Build


def _mariadb(build: Build | None) -> bool:
    """MariaDB's modules (the installed server's too), or MySQL's; UsageError for a binary of
    neither (a PostgreSQL build in a MariaDB experiment)."""
    if build is None or build.server in mariadb_flavor.FLAVORS:
        return True
    if build.server in mysql_flavor.FLAVORS:
        return False
    raise UsageError(
        f"{build.binary} ({build.version}) does not speak MySQL's protocol",
        f'its build needs server = "{build.server}"',
    )


def dialect(build: Build | None) -> Flavor:
    """The option file's dialect of `build`'s binary, as its kind says."""
    return mariadb_flavor.dialect(build) if _mariadb(build) else mysql_flavor.dialect(build)  # type: ignore[arg-type]


def installed_dialect(version_line: str) -> Flavor:
    """The dialect of a host's own installed server (Debian's MariaDB) by its `--version` line."""
    found = re.search(r"\d+\.\d+\.\d+", version_line)  # "mariadbd  Ver 10.11.19-MariaDB-..."
    return mariadb_flavor.MariaDBFlavor("mariadb", version_tuple(found.group(0) if found else ""))


def plan(datadir: Path, build: Build | None) -> Init:
    """How `datadir` (which must not exist yet) is initialised for `build`, as its kind does."""
    if _mariadb(build):
        return mariadb_datadir.plan(datadir, build)
    return mysql_datadir.plan(datadir, build)  # type: ignore[arg-type]
