"""MariaDB: what is MariaDB's own (its version line, datadir format, installed binary, datadir
initialisation (datadir.py), option file (flavor.py)); the
rest it shares with MySQL through servers/mysql_protocol.py, its server process (servers/mysqld.py)
included.

    from perflab.servers import kind
    kind("mariadb").installed_binary()   -> /usr/sbin/mariadbd
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from perflab.servers.mariadb.flavor import FLAVORS
from perflab.servers.mysql_protocol import MySQLProtocolKind

if TYPE_CHECKING:
    from perflab.servers.home import ServerHostPlace


class MariaDBKind(MySQLProtocolKind):
    name = "mariadb"
    title = "MariaDB"
    host_field = "mariadbd"
    dbgsym: ClassVar[dict[str, str]] = {"mariadbd": "mariadb-server-core-dbgsym"}
    build_estimate_s = 40 * 60.0  # mariadbd from Debian's source (docs/builds.md)
    debian_source = "mariadb"
    debian_binary = "mariadb-server-core"

    flavors = FLAVORS

    def datadir_format(self, datadir: Path) -> str | None:
        """MariaDB always has Aria's control file (MySQL has no Aria)."""
        return "mariadb" if (datadir / "aria_log_control").is_file() else None

    def installed_binary(self) -> Path:
        from perflab.servers.mysqld import binary

        return Path(binary("mariadbd"))

    server_packages: ClassVar[dict[str, str]] = {
        "mariadbd": "mariadb-server",
        "mariadb": "mariadb-client",
        "mariadb-install-db": "mariadb-server",  # a dataset prepared on the host (hosts/dataset.py)
    }

    def remote_init(self, place: ServerHostPlace, datadir: str) -> str:
        from perflab.servers.mariadb.datadir import init_on_host

        return init_on_host(place, datadir)

    def host_versions(self) -> dict[str, list[str]]:
        import os

        found = shutil.which("mariadbd") or ("/usr/sbin/mariadbd" if os.path.exists("/usr/sbin/mariadbd") else None)
        return {"mariadbd": [found, "--version"]} if found else {}

    def short_version(self, host: dict[str, Any]) -> str:
        """'/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for ...' -> 'mariadbd 10.11.19-MariaDB-0+deb12u1'."""
        text = str(host.get("mariadbd") or "mariadbd")
        words = text.split()
        return f"mariadbd {words[words.index('Ver') + 1]}" if "Ver" in words[:-1] else text


KIND = MariaDBKind()
