"""A MySQL (or Percona Server) datadir, initialised by mysqld itself (docs/builds.md, "Datasets"):

    mysqld --no-defaults --initialize-insecure --basedir=BASE --datadir=D
           --secure-file-priv=<scratch> [--user=root] [--lc-messages-dir=<share>]

behind a private root's loader when the build has one. root@localhost has no password: sysbench
and perflab's client connect as root over the server's socket.

    init = plan(datadir, build)    # -> Init(argv, env, method); mysqld_dataset.initialise runs it
"""

from __future__ import annotations

import os
from pathlib import Path

from perflab.errors import PerflabError
from perflab.builds import Build
from perflab.servers.mysql.flavor import INITIALIZE_SINCE, basedir_of
from perflab.servers.mysql_flavor import Init, scratch, version_tuple


def plan(datadir: Path, build: Build) -> Init:
    if version_tuple(build.version) < INITIALIZE_SINCE:
        raise PerflabError(
            f"{build.binary}: {build.version} has no --initialize-insecure (MySQL 5.7.6 and later have it)",
            "perflab initialises MySQL datadirs with mysqld itself; use MySQL 5.7.6 or later",
        )
    argv = [
        *build.launcher,  # a private root's loader
        str(build.binary),
        "--no-defaults",  # must come first: mysqld reads no option file at all
        "--initialize-insecure",  # root@localhost without a password: sysbench connects by socket
        f"--basedir={basedir_of(build)}",
        f"--datadir={datadir}",
        f"--secure-file-priv={scratch(datadir)}",
    ]
    if os.geteuid() == 0:
        argv.append("--user=root")
    if build.share is not None:
        argv.append(f"--lc-messages-dir={build.share}")
    return Init(argv, f"{build.binary.name} --initialize-insecure")
