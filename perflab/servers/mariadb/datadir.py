"""A new MariaDB datadir, initialised by the server that will open it (docs/builds.md,
"Datasets"); MySQL's is servers/mysql/datadir.py, and servers/mysqld_dataset.initialise runs either.

    the installed MariaDB   mariadb-install-db --no-defaults --datadir=D
                            --auth-root-authentication-method=normal --skip-test-db --force [--user=root]
    a MariaDB build         the same options, run by the build's own mariadb-install-db when its
                            tree has one (BASE/bin/ or BASE/scripts/; with --basedir=BASE when
                            BASE/bin/my_print_defaults is there too), else by the installed
                            script; either way with MYSQLD_BOOTSTRAP=<the build's mariadbd>
                            and --lc-messages-dir=<its share/>

What was measured on the unpacked 10.11.18 package (BASE = root/usr, which has
bin/mariadb-install-db, sbin/mariadbd and share/mysql/*.sql but no my_print_defaults):
`--basedir=BASE` fails ("FATAL ERROR: Could not find my_print_defaults"); the script without
--basedir finds its own tree (relocatable: sbin/mariadbd and share/mysql beside its bin/) and
bootstraps with 10.11.18 and its own SQL scripts; MYSQLD_BOOTSTRAP makes any script run the
given binary (the installed 10.11.19 script with it bootstraps 10.11.18 with 10.11.19's SQL).

    init = plan(datadir, build)    # -> Init(argv, env, method)
    init_on_host(server_host, "/dev/shm/perflab-host-x/snap")   # the same there, by the host's own script
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.builds import Build, write_wrapper
from perflab.errors import ServerStartError
from perflab.hosts.home import account
from perflab.places.proc import call, clean_env
from perflab.servers.mysql_flavor import RUN_USER, Init, scratch, version_tuple
from perflab.tools import binary

if TYPE_CHECKING:
    from perflab.servers.home import ServerHostPlace

INSTALL_SCRIPTS = (
    "bin/mariadb-install-db",
    "scripts/mariadb-install-db",
    "bin/mysql_install_db",
    "scripts/mysql_install_db",
)
PRINT_DEFAULTS = ("bin/my_print_defaults", "extra/my_print_defaults")  # what the script's --basedir needs
ROOT_OPTIONS_SINCE = (10, 4, 0)  # --auth-root-authentication-method, --skip-test-db


def plan(datadir: Path, build: Build | None) -> Init:
    """How `datadir` (which must not exist yet) is initialised for `build` (None: installed)."""
    options = [f"--datadir={datadir}"]
    if build is None or version_tuple(build.version) >= ROOT_OPTIONS_SINCE:
        options += ["--auth-root-authentication-method=normal", "--skip-test-db"]
    options += ["--force"] + (["--user=root"] if os.geteuid() == 0 else [])
    # the bootstrap's temporary tables in a directory of its own, not the shared /tmp: a mariadbd that
    # starts there removes every `#sql*` file it finds (mysql_rm_tmp_tables), another bootstrap's too
    # ("Error on delete of '/tmp/#sql-temptable-...MAD'", two datasets prepared at once)
    private = {"TMPDIR": str(scratch(datadir))}
    if build is None:
        return Init([binary("mariadb-install-db"), "--no-defaults", *options], "mariadb-install-db", private)
    if build.share is not None:
        options.append(f"--lc-messages-dir={build.share}")
    # the script runs this binary, whatever its layout (through a private root's loader: a wrapper)
    env = {"MYSQLD_BOOTSTRAP": str(_bootstrap(datadir, build)), **private}
    own = own_install_script(build)
    if own is None:
        script = binary("mariadb-install-db")
        return Init([script, "--no-defaults", *options], f"{script} (installed) bootstrapping {build.binary}", env)
    own_script, base = own
    if any((base / p).is_file() for p in PRINT_DEFAULTS):
        options.append(f"--basedir={base}")
    return Init([str(own_script), "--no-defaults", *options], f"{own_script} (the build's own)", env)


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


def _bootstrap(datadir: Path, build: Build) -> Path:
    """What the install script runs as mariadbd: the build's binary, or, when a private root's
    loader must run it (the script runs one path, "$mysqld_bootstrap" ARGS), an executable
    beside the datadir that execs the loader with the binary. Its paths are perflab's own cache
    paths, each quoted for sh."""
    if not build.launcher:
        return build.binary
    return write_wrapper(scratch(datadir) / "mariadbd-bootstrap", [*build.launcher, str(build.binary)])


# $0: the directory, $1: the account the server runs as (empty: the ssh user's), "$@" after: argv.
# That account must reach the datadirs: the directories above them searchable by it (exit 3 if not)
_PRIVATE_TMP = (
    'mkdir -p "$0" && chmod go+x "${0%/*}" && { [ -z "$1" ] || { chown "$1:" "$0" && '
    'setpriv --reuid="$1" --regid="$1" --init-groups test -x "$0" || '
    '{ echo "${0%/*} is not reachable by the $1 account (a directory above it is not searchable)" >&2; '
    'exit 3; }; }; } && '
    'TMPDIR="$0" && export TMPDIR && shift && exec "$@"'
)


def init_on_host(place: ServerHostPlace, datadir: str) -> str:
    """A new datadir on the server host `place` by its mariadb-install-db, as `plan` does here."""
    argv = [place.binaries["mariadb-install-db"], "--no-defaults", f"--datadir={datadir}"]
    argv += ["--auth-root-authentication-method=normal", "--skip-test-db", "--force"]
    user = account(place, RUN_USER)
    argv += [f"--user={user}"] if user else []
    # its bootstrap's temporary tables in a directory of the run's, not the host's shared /tmp (two
    # bootstraps at once there, a host axis's on one machine, lost each other's: "Could not remove
    # temporary table", "Unknown table 'mysql.tmp_proxies_priv'")
    private = f"{datadir}.tmp"
    done = place.link.run(["sh", "-c", _PRIVATE_TMP, private, user, *argv], timeout=600)
    place.link.run(["rm", "-rf", private])
    if done.status != 0:
        raise ServerStartError(
            f"mariadb-install-db on host {place.name} failed (exit {done.status}): {(done.stdout + done.stderr)[-500:]}",
            f"run it by hand there: {' '.join(argv)}"
            + (
                f" (as the {user} account: mariadb-server creates it; it must search every directory "
                "above the datadirs: chmod o+x them, or choose another [experiment] storage)"
                if user
                else ""
            ),
        )
    return "mariadb-install-db"
