"""MySQL, and Percona Server (a flavor of it: the same datadirs, options and initialisation): its
version line, datadir format, datadir initialisation (datadir.py) and option file (flavor.py);
the rest it shares with MariaDB through servers/mysql_protocol.py, its server process included.

Debian 12 has no MySQL server: MySQL runs from a build ([builds] package = "mysql-server-core",
suite = "sid"; a basedir; a source tree). So `[experiment] server = "mysql"` needs a build in
every variant, and an experiment of server = "mariadb" runs a MySQL build through this kind all
the same (the kind comes from the binary: Build.server).

    kind("mysql").datadir_format(Path("/tmp/data"))   -> "mysql" (its mysql.ibd; a flavor: servers/identity.py)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from perflab.servers.mysql.flavor import FLAVORS
from perflab.servers.mysql_protocol import MySQLProtocolKind

if TYPE_CHECKING:
    from perflab.spec.schema import ExperimentFile
    from perflab.spec.problems import Problem

HINT = (
    'name a MySQL build in every variant, e.g. [builds.mysql97] package = "mysql-server-core", suite = "sid" '
    'and [variants.server] mysql = { build = "mysql97" }; or server = "mariadb", whose installed server runs '
    "the variants without a build beside MySQL's (`perflab docs builds`)"
)
MARIADB_TOOLS = ("(tool) mariadbd", "(tool) mariadb-install-db")  # the installed MariaDB's, not needed here


class MySQLKind(MySQLProtocolKind):
    name = "mysql"
    title = "MySQL"
    host_field = "mysqld"
    dbgsym: ClassVar[dict[str, str]] = {"mysqld": "mysql-server-core-dbgsym"}
    build_estimate_s = 90 * 60.0  # mysqld from a source tree on 2 cores (about twice MariaDB's)
    debian_source = "mysql-8.0"  # not in Debian 12: source = "debian" is refused (build_problems)
    debian_binary = "mysql-server-core-8.0"
    installed_refusal = f"Debian 12 has no MySQL server: {HINT}"
    # on a server host: its build copied there (hosts/trees.py), its dataset prepared here by the build;
    # clients log in over TCP as a caching_sha2_password user (libmariadb3 completes it without TLS)
    server_packages: ClassVar[dict[str, str]] = {"mariadb": "mariadb-client"}  # perflab's SQL there

    flavors = FLAVORS

    def datadir_format(self, datadir: Path) -> str | None:
        """MySQL 8.0 and later keep the data dictionary in mysql.ibd, MySQL 5.x its grant tables
        as mysql/user.frm; neither with Aria's control file (MariaDB's)."""
        if (datadir / "aria_log_control").is_file():
            return None
        return "mysql" if (datadir / "mysql.ibd").is_file() or (datadir / "mysql" / "user.frm").is_file() else None

    def opens(self, fmt: str, found: str) -> bool:
        """Percona Server opens MySQL's datadirs."""
        return super().opens(fmt.replace("percona", "mysql", 1), found)

    def installed_binary(self) -> Path:
        from perflab.errors import UsageError

        raise UsageError("Debian 12 has no MySQL server", HINT)

    def host_versions(self) -> dict[str, list[str]]:
        return {}  # none installed (Debian 12's /usr/sbin/mysqld is MariaDB's)

    def short_version(self, host: dict[str, Any]) -> str:
        return "MySQL builds"

    def file_problems(self, spec: ExperimentFile) -> list[Problem]:
        return [*super().file_problems(spec), *unbuilt(spec)]

    def build_problems(self, builds: dict[str, Any]) -> list[Problem]:
        from perflab.spec.problems import Problem

        problems = super().build_problems(builds)
        for name, spec in builds.items():
            if spec.source is not None and spec.source.startswith("debian"):
                problems.append(
                    Problem(
                        f"builds.{name}.source", "a MySQL source tree", spec.source, "Debian 12 has no MySQL source"
                    )
                )
        return problems

    def tool_problems(self) -> list[Problem]:
        return [p for p in super().tool_problems() if p.path not in MARIADB_TOOLS]


def unbuilt(spec: ExperimentFile) -> list[Problem]:
    """The cells that would run the installed server (none here): unless one axis names a build
    in each of its labels, the first label without one."""
    from perflab.spec.problems import Problem

    axes = spec.variants
    if any(labels and all(v.build is not None for v in labels.values()) for labels in axes.values()):
        return []
    bare = [f"variants.{a}.{label}.build" for a, labels in axes.items() for label, v in labels.items() if not v.build]
    return [Problem(bare[0] if bare else "variants", "a MySQL build", "none: the installed server", HINT)]


KIND = MySQLKind()
