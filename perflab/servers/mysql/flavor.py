"""MySQL's and Percona Server's option file (servers/mysql_flavor.py's Flavor), from their
`--version` line (`Build.server`):
    "8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)"                 -> mysql 8.0.36
    "8.0.36-28 for Linux on x86_64 (Percona Server (GPL), Release 28, ...)"     -> percona 8.0.36

What differs from MariaDB's (MySQL 8.0 reference manual, checked for each):
- the option file's group: [mysqld] (MariaDB's is [mariadbd]);
- the redo log: MariaDB's `innodb_log_file_size` is the whole redo log (one file since 10.5);
  MySQL 8.0.30+ sizes it with `innodb_redo_log_capacity` (innodb_log_file_size is deprecated
  and ignored there), older MySQL with innodb_log_file_size x innodb_log_files_in_group (2);
- `mysqlx=0`: MySQL 8.0+ loads the X Plugin, which would listen on a second port (33060);
- `secure-file-priv`: a MySQL built with a DEB or RPM layout defaults it to /var/lib/mysql-files
  and exits at start-up when that directory does not exist; perflab gives it the run's own;
- `basedir`: MySQL finds its share/ (error messages) and lib/plugin/ from it.
The rest of perflab's defaults (skip-log-bin, performance_schema, max_connections,
max_prepared_stmt_count, skip-name-resolve) mean the same in both; MySQL 8.0 logs binary logs
by default, so skip-log-bin matters more there. A server option MySQL does not know is left as
written: the server refuses it at start-up with its own message.

    MySQLFlavor("mysql", (8, 0, 36)).translate({"innodb_log_file_size": "256M"})
        -> {"innodb_redo_log_capacity": "256M"}
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab.servers.mysql_flavor import Flavor, version_tuple
from perflab.units import parse_size

if TYPE_CHECKING:
    from perflab.builds import Build

REDO_CAPACITY_SINCE = (8, 0, 30)  # innodb_redo_log_capacity replaces innodb_log_file_size
MYSQLX_SINCE = (8, 0, 0)  # the X Plugin is built in and on by default
INITIALIZE_SINCE = (5, 7, 6)  # mysqld --initialize-insecure (mysql_install_db before)
MYSQL_LOG_FILES = 2  # innodb_log_files_in_group's default before 8.0.30


@dataclass(frozen=True)
class MySQLFlavor(Flavor):
    group = "mysqld"  # INNODB_METRICS: STATUS = 'enabled' (the base's)

    def translate(self, options: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        names = {_norm(k) for k in options}
        for name, value in options.items():
            if _norm(name) != "innodb_log_file_size":
                out[name] = value
            elif self.version >= REDO_CAPACITY_SINCE:
                if "innodb_redo_log_capacity" not in names:  # an explicit capacity wins
                    out["innodb_redo_log_capacity"] = value
            else:  # the same total redo log, in MySQL's two files
                out[name] = parse_size(value) // MYSQL_LOG_FILES
        return out

    def private(self, there: str, build: Build | None) -> dict[str, Any]:
        fixed = super().private(there, build)  # secure-file-priv
        if build is not None:
            fixed["basedir"] = basedir_of(build)
        if self.version >= MYSQLX_SINCE:
            fixed["mysqlx"] = 0
        return fixed


def basedir_of(build: Build) -> Path:
    """The install tree around the binary: BASE/bin/mysqld, BASE/sbin/mysqld, BASE/sql/mysqld."""
    if build.recipe and build.recipe.get("basedir"):
        return Path(build.recipe["basedir"])
    return build.binary.parent.parent


def _norm(name: str) -> str:
    return name.replace("-", "_").lower()


FLAVORS = ("mysql", "percona")  # what a binary of this kind is (Build.server): the kind's `flavors`


def dialect(build: Build) -> MySQLFlavor:
    """The Flavor of a MySQL or Percona Server binary."""
    return MySQLFlavor(build.server, version_tuple(build.version))
