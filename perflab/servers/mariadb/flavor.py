"""What differs between MariaDB, MySQL and Percona Server, as far as perflab starts them.

The kind and version come from the binary's `--version` line (`Build.server`):
    "10.11.18-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)"   -> mariadb 10.11.18
    "8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)"                 -> mysql 8.0.36
    "8.0.36-28 for Linux on x86_64 (Percona Server (GPL), Release 28, ...)"     -> percona 8.0.36

What changes with the kind (MySQL 8.0 reference manual, checked for each):
- the option file's group: [mariadbd] for MariaDB; [mysqld] for MySQL and Percona Server;
- the redo log: MariaDB's `innodb_log_file_size` is the whole redo log (one file since 10.5);
  MySQL 8.0.30+ sizes it with `innodb_redo_log_capacity` (innodb_log_file_size is deprecated
  and ignored there), older MySQL with innodb_log_file_size x innodb_log_files_in_group (2);
- `mysqlx=0`: MySQL 8.0+ loads the X Plugin, which would listen on a second port (33060);
- `secure-file-priv`: a MySQL built with a DEB or RPM layout defaults it to /var/lib/mysql-files
  and exits at start-up when that directory does not exist; perflab gives it the run's own;
- `basedir`: MySQL finds its share/ (error messages) and lib/plugin/ from it.
The rest of perflab's defaults (skip-log-bin, performance_schema, max_connections,
max_prepared_stmt_count, skip-name-resolve) mean the same in both; MySQL 8.0 logs binary logs
by default, so skip-log-bin matters more there. A server option a kind does not know is left
as written: the server refuses it at start-up with its own message.

    flavor = Flavor.of(build)
    flavor.translate({"innodb_log_file_size": "256M"})   -> {"innodb_redo_log_capacity": "256M"}
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perflab.run.builds import Build
from perflab.units import parse_size

REDO_CAPACITY_SINCE = (8, 0, 30)  # innodb_redo_log_capacity replaces innodb_log_file_size
MYSQLX_SINCE = (8, 0, 0)  # the X Plugin is built in and on by default
INITIALIZE_SINCE = (5, 7, 6)  # mysqld --initialize-insecure (mysql_install_db before)
MYSQL_LOG_FILES = 2  # innodb_log_files_in_group's default before 8.0.30


@dataclass(frozen=True)
class Flavor:
    kind: str  # mariadb | mysql | percona
    version: tuple[int, int, int]

    @classmethod
    def of(cls, build: Build | None) -> Flavor:
        """The installed server (build None) is MariaDB."""
        if build is None:
            return MARIADB
        return cls(build.server, version_tuple(build.version))

    @property
    def mysql(self) -> bool:
        """MySQL or Percona Server: initialised by mysqld itself, options of MySQL's names."""
        return self.kind in ("mysql", "percona")

    @property
    def metrics_enabled(self) -> str:
        """information_schema.INNODB_METRICS' filter for the metrics being counted: MariaDB 10.5
        and later name the column ENABLED, MySQL (and MariaDB before) STATUS = 'enabled'. The installed
        MariaDB (MARIADB, version unknown: 0.0.0) is Debian 12's 10.11: ENABLED."""
        old_mariadb = (0, 0, 0) < self.version < (10, 5)
        return "STATUS = 'enabled'" if self.mysql or old_mariadb else "ENABLED"

    @property
    def group(self) -> str:
        return "mysqld" if self.mysql else "mariadbd"

    def translate(self, options: dict[str, Any]) -> dict[str, Any]:
        """`options` with MariaDB's names and meanings turned into this server's."""
        if not self.mysql:
            return dict(options)
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

    def private(self, rundir: Path, build: Build | None) -> dict[str, Any]:
        """Options that keep a MySQL server to its run directory (none needed for MariaDB)."""
        if not self.mysql:
            return {}
        fixed: dict[str, Any] = {"secure-file-priv": files_dir(rundir)}
        if build is not None:
            fixed["basedir"] = basedir_of(build)
        if self.version >= MYSQLX_SINCE:
            fixed["mysqlx"] = 0
        return fixed


MARIADB = Flavor("mariadb", (0, 0, 0))


def version_tuple(version: str) -> tuple[int, int, int]:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else (0, 0, 0)


def basedir_of(build: Build) -> Path:
    """The install tree around the binary: BASE/bin/mysqld, BASE/sbin/mysqld, BASE/sql/mysqld."""
    if build.recipe and build.recipe.get("basedir"):
        return Path(build.recipe["basedir"])
    return build.binary.parent.parent


def files_dir(rundir: Path) -> Path:
    """secure-file-priv: a directory of the run's own, which must exist."""
    path = rundir / "files"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _norm(name: str) -> str:
    return name.replace("-", "_").lower()
