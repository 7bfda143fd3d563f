"""A new datadir, initialised by the server that will open it (docs/builds.md, "Datasets").

    the installed MariaDB   mariadb-install-db --no-defaults --datadir=D
                            --auth-root-authentication-method=normal --skip-test-db --force [--user=root]
    a MariaDB build         the same options, run by the build's own mariadb-install-db when its
                            tree has one (BASE/bin/ or BASE/scripts/; with --basedir=BASE when
                            BASE/bin/my_print_defaults is there too), else by the installed
                            script; either way with MYSQLD_BOOTSTRAP=<the build's mariadbd>
                            and --lc-messages-dir=<its share/>
    MySQL, Percona Server   mysqld --no-defaults --initialize-insecure --basedir=BASE --datadir=D
                            --secure-file-priv=<scratch> [--user=root] [--lc-messages-dir=<share>]

What was measured on the unpacked 10.11.18 package (BASE = root/usr, which has
bin/mariadb-install-db, sbin/mariadbd and share/mysql/*.sql but no my_print_defaults):
`--basedir=BASE` fails ("FATAL ERROR: Could not find my_print_defaults"); the script without
--basedir finds its own tree (relocatable: sbin/mariadbd and share/mysql beside its bin/) and
bootstraps with 10.11.18 and its own SQL scripts; MYSQLD_BOOTSTRAP makes any script run the
given binary (the installed 10.11.19 script with it bootstraps 10.11.18 with 10.11.19's SQL).

    init = initialise(datadir, build, log)    # -> Init(argv, env, method); its output in `log`
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from perflab.errors import PerflabError
from perflab.run.builds import Build, write_wrapper
from perflab.run.proc import call, clean_env
from perflab.servers.mariadb.flavor import INITIALIZE_SINCE, Flavor, basedir_of
from perflab.servers.mariadb.server import binary

INSTALL_SCRIPTS = (
    "bin/mariadb-install-db",
    "scripts/mariadb-install-db",
    "bin/mysql_install_db",
    "scripts/mysql_install_db",
)
PRINT_DEFAULTS = ("bin/my_print_defaults", "extra/my_print_defaults")  # what the script's --basedir needs
ROOT_OPTIONS_SINCE = (10, 4, 0)  # --auth-root-authentication-method, --skip-test-db


@dataclass(frozen=True)
class Init:
    argv: list[str]
    method: str  # what initialised it, for the results' meta: "mysqld --initialize-insecure"
    env: dict[str, str] = field(default_factory=dict)  # added to perflab's clean environment


def plan(datadir: Path, build: Build | None) -> Init:
    """How `datadir` (which must not exist yet) is initialised for `build` (None: installed)."""
    flavor = Flavor.of(build)
    if build is not None and flavor.mysql:
        return _mysql(datadir, build)
    return _mariadb(datadir, build, flavor)


def initialise(datadir: Path, build: Build | None, log: Path) -> Init:
    """Initialise `datadir`; the tool's output goes to `log`; PerflabError with its tail on failure."""
    init = plan(datadir, build)
    datadir.parent.mkdir(parents=True, exist_ok=True)
    try:
        out = call(init.argv, what=init.method, env=clean_env(init.env), timeout=600)
    except PerflabError as exc:
        log.write_text(f"$ {' '.join(init.argv)}\n{exc}\n", encoding="utf-8")
        raise
    log.write_text(f"$ {' '.join(init.argv)}\n{out}", encoding="utf-8")
    return init


def install_datadir(datadir: Path) -> None:
    """An empty MariaDB datadir (system tables only) from the installed mariadb-install-db.
    --force: in mariadb-install-db it only skips the check that the hostname resolves (grants then
    name 127.0.0.1, not the host; perflab connects by socket and the server runs with
    skip-name-resolve), which fails on a machine whose hostname does not resolve (a container,
    a chroot without /etc/hosts)."""
    init = plan(datadir, None)
    datadir.parent.mkdir(parents=True, exist_ok=True)
    call(init.argv, what=init.method, env=clean_env(init.env))


def own_install_script(build: Build) -> tuple[Path, Path] | None:
    """(script, BASE) of a MariaDB build whose tree has its own mariadb-install-db."""
    base = build.binary.parent.parent
    for relative in INSTALL_SCRIPTS:
        if (base / relative).is_file():
            return base / relative, base
    return None


def _mariadb(datadir: Path, build: Build | None, flavor: Flavor) -> Init:
    options = [f"--datadir={datadir}"]
    if build is None or flavor.version >= ROOT_OPTIONS_SINCE:
        options += ["--auth-root-authentication-method=normal", "--skip-test-db"]
    options += ["--force"] + (["--user=root"] if os.geteuid() == 0 else [])
    if build is None:
        return Init([binary("mariadb-install-db"), "--no-defaults", *options], "mariadb-install-db")
    if build.share is not None:
        options.append(f"--lc-messages-dir={build.share}")
    # the script runs this binary, whatever its layout (through a private root's loader: a wrapper)
    env = {"MYSQLD_BOOTSTRAP": str(_bootstrap(datadir, build))}
    own = own_install_script(build)
    if own is None:
        script = binary("mariadb-install-db")
        return Init([script, "--no-defaults", *options], f"{script} (installed) bootstrapping {build.binary}", env)
    script, base = own
    if any((base / p).is_file() for p in PRINT_DEFAULTS):
        options.append(f"--basedir={base}")
    return Init([str(script), "--no-defaults", *options], f"{script} (the build's own)", env)


def _mysql(datadir: Path, build: Build) -> Init:
    if Flavor.of(build).version < INITIALIZE_SINCE:
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
        f"--secure-file-priv={_scratch(datadir)}",
    ]
    if os.geteuid() == 0:
        argv.append("--user=root")
    if build.share is not None:
        argv.append(f"--lc-messages-dir={build.share}")
    return Init(argv, f"{build.binary.name} --initialize-insecure")


def _bootstrap(datadir: Path, build: Build) -> Path:
    """What the install script runs as mariadbd: the build's binary, or, when a private root's
    loader must run it (the script runs one path, "$mysqld_bootstrap" ARGS), an executable
    beside the datadir that execs the loader with the binary. Its paths are perflab's own cache
    paths, each quoted for sh."""
    if not build.launcher:
        return build.binary
    return write_wrapper(_scratch(datadir) / "mariadbd-bootstrap", [*build.launcher, str(build.binary)])


def _scratch(datadir: Path) -> Path:
    """secure-file-priv while initialising: a directory that exists, beside the datadir."""
    path = datadir.with_name(datadir.name + "-files")
    path.mkdir(parents=True, exist_ok=True)
    return path
