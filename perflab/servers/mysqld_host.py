"""A server of MySQL's protocol on another host (`[experiment] server_host`, docs/hosts.md): the
host's installed mariadbd or a build copied there (MariaDB's, MySQL's: hosts/trees.py), on a
datadir in the host's run directory, started through the run directory's wrapper (its own process
group, tagged PERFLAB_RUN, its pid in `pids`) with an option file perflab writes here and copies
there. It listens only on the host's address as this machine reaches it, and its
readiness is its handshake there, from here. The cell's local directory keeps the option file and,
once it stops, a copy of its error log (for the results' logs/).

    server = RemoteMysqld(place, "/dev/shm/perflab-host-x/cell-0003/data", options, local=rundir)
    with server: server.sql("SELECT 1")      # over SSH, with the host's mariadb client
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab.builds import Build
from perflab.errors import PerflabError, ServerStartError
from perflab.hosts.home import HostHome
from perflab.hosts.rundir import Tracked
from perflab.observers.status import StatusSampler
from perflab.servers.managed import OnHost
from perflab.servers.mysql_dialects import dialect, installed_dialect
from perflab.servers.mysqld import READY_DEADLINE_S, RUN_USER, Mysqld, binary, defaults, option_line

if TYPE_CHECKING:
    from perflab.servers.kind import ServerHostPlace


class RemoteStatusSampler(StatusSampler):
    """[observe] status of a server on a host: this machine's `mariadb` client over TCP to the
    server's address (the path the workload's client takes), as the run's `perflab` user, its
    password in an option file only its owner reads (`--defaults-file`, never the command line)."""

    def __init__(self, server: RemoteMysqld, password: str, lean: bool = False) -> None:
        flavor = server.flavor  # a build copied there; else the host's own server, by its version
        if server.build is None or server.build.kind == "installed":
            flavor = installed_dialect(server.place.version)  # "mariadbd  Ver 10.11.19-MariaDB-..."
        # its stderr beside the socket's name (.parent): the cell's local directory
        super().__init__(server.rundir / "mysqld.sock", lean=lean, enabled=flavor.metrics_enabled)
        self.options = server.rundir / "status.cnf"
        fd = os.open(self.options, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"[client]\nprotocol=tcp\nhost={server.bind_address}\nport={server.port}\n")
            f.write(f"user=perflab\npassword={password}\n")

    def argv(self) -> list[str]:
        return [binary("mariadb"), f"--defaults-file={self.options}", "--batch", "--skip-column-names", "--unbuffered"]


# $0: the cell's directory, $1: that account, $2: the datadir (a copy of the snapshot, made by the
# ssh user: from a tarball when it was prepared here). Its socket, log, files and data: the account's
# alone (0700: a server's command line names its cell's directory to every account there: issue 48)
_ADOPT = (
    'mkdir -p "$0/tmp" "$0/files" && chmod 700 "$0" && '
    '{ [ -z "$1" ] || { chmod go+x "${0%/*}" && { [ "${2%/*}" = "$0" ] || chmod go+x "${2%/*}"; } && '
    'chown -R "$1:" "$0" "$2"; }; }'
)


def server_account(place: ServerHostPlace) -> str:
    """The account mariadbd runs as on the host: Debian's `mysql` (mariadb-server creates it) when
    the ssh user is root, as here (never root: issue 48); else the ssh user ("")."""
    return RUN_USER if place.link.target.user == "root" else ""


# $0: the directory, $1: the account the server runs as (empty: the ssh user's), "$@" after: argv.
# That account must reach the datadirs: the directories above them searchable by it (exit 3 if not)
_PRIVATE_TMP = (
    'mkdir -p "$0" && chmod go+x "${0%/*}" && { [ -z "$1" ] || { chown "$1:" "$0" && '
    'setpriv --reuid="$1" --regid="$1" --init-groups test -x "$0" || '
    '{ echo "${0%/*} is not reachable by the $1 account (a directory above it is not searchable)" >&2; '
    'exit 3; }; }; } && '
    'TMPDIR="$0" && export TMPDIR && shift && exec "$@"'
)


def init_datadir(place: ServerHostPlace, datadir: str) -> str:
    """A new datadir on the host by its mariadb-install-db, as servers/mariadb/datadir.py does here."""
    argv = [place.binaries["mariadb-install-db"], "--no-defaults", f"--datadir={datadir}"]
    argv += ["--auth-root-authentication-method=normal", "--skip-test-db", "--force"]
    user = server_account(place)
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


class RemoteMysqld(OnHost, Mysqld):
    """One mariadbd or mysqld on a host (`place`: the run's ServerHost, hosts/server.py)."""

    def __init__(
        self,
        place: ServerHostPlace,
        datadir: str,
        options: dict[str, Any],
        *,
        local: Path,
        env: dict[str, str] | None = None,
        alloc: Any = None,
        preload: str | None = None,
        build: Build | None = None,
    ) -> None:
        self.place_on(place, HostHome(place, local, datadir), env, alloc, preload, build)
        self.socket = f"{self.remote_dir}/mysqld.sock"  # type: ignore[assignment]
        self.error_log = local / "error.log"
        self.option_file = local / "my.cnf"
        self.tmpdir = local / "tmp"
        self.options = {**defaults(False, options), **options}
        self.flavor = dialect(None if build is None or build.kind == "installed" else build)
        self.child: Tracked | None = None  # type: ignore[assignment]

    def write_option_file(self) -> None:
        fixed: dict[str, Any] = {
            "datadir": self.datadir,
            "socket": self.socket,
            "port": self.port,
            "bind-address": self.bind_address,
            "pid-file": f"{self.remote_dir}/mysqld.pid",
            "log-error": f"{self.remote_dir}/error.log",
            "tmpdir": f"{self.remote_dir}/tmp",
            "secure-file-priv": f"{self.remote_dir}/files",  # LOAD_FILE and OUTFILE: the cell's own directory
        }
        account = server_account(self.place)
        if account:  # started as root, it becomes that account itself
            fixed["user"] = account
        private = self.flavor.private(self.rundir, self.build)  # MySQL's basedir and mysqlx=0, beside ours
        if "basedir" in private and self.build is not None:  # the tree copied there: BASE of BASE/sbin/mysqld
            private["basedir"] = self.build.binary.parent.parent
        fixed.update({k: v for k, v in private.items() if k != "secure-file-priv"})
        if self.build is not None and self.build.share is not None:  # a build's messages and charsets, there
            charsets = f"{self.build.share}/charsets"
            fixed["lc-messages-dir"] = str(self.build.share)
            if self.link.run(["test", "-d", charsets]).status == 0:
                fixed["character-sets-dir"] = charsets
        lines = ["# written by perflab; the server reads no other option file", f"[{self.flavor.group}]"]
        lines += [option_line(k, v) for k, v in {**self.flavor.translate(self.options), **fixed}.items()]
        self.home.write("my.cnf", "\n".join(lines) + "\n")  # its copy here: option_file
        adopted = self.link.run(["sh", "-c", _ADOPT, self.remote_dir, account, self.datadir])
        if adopted.status != 0:
            raise ServerStartError(
                f"host {self.link.name}: cannot give {self.remote_dir} to {account}: "
                f"{adopted.stderr.strip()[-300:]}",
                f"apt-get install mariadb-server on {self.link.target} creates the {RUN_USER} account",
            )

    def start(self, deadline_s: float = READY_DEADLINE_S) -> None:
        self.write_option_file()
        launcher = self.build.launcher if self.build is not None else []  # a private root's loader there
        argv = self.launched([*launcher, str(self.program), f"--defaults-file={self.remote_dir}/my.cnf"])
        # what it prints before its error log is open (a datadir it cannot reach...), kept as here
        console = ["sh", "-c", 'exec "$@" > "$0" 2>&1', f"{self.remote_dir}/stdout.log"]
        self.child = Tracked(self.place.rundir, [*console, *self.environment(), *argv], measured=True)
        self._wait_ready(deadline_s)

    def _ready(self) -> bool:
        """True once the server sends its greeting on its address, from this machine."""
        with socket.socket(socket.AF_INET6 if ":" in self.bind_address else socket.AF_INET) as sock:
            sock.settimeout(2.0)
            try:
                sock.connect((self.bind_address, self.port))
                return len(sock.recv(5)) > 0
            except OSError:
                time.sleep(0.2)  # each miss costs a round trip's worth at most: no tight loop over the network
                return False

    def fetch_log(self) -> None:
        self.home.fetch("error.log", "stdout.log")

    def error_lines(self, limit: int = 12) -> str:
        try:
            self.fetch_log()
        except PerflabError:
            pass  # a host that dropped off: what was fetched before
        return super().error_lines(limit)

    def sql(self, statement: str) -> str:
        argv = [self.place.binaries["mariadb"], "--no-defaults", f"--socket={self.socket}", "--user=root"]
        return self.home.client([*argv, "--batch", "--skip-column-names"], statement, "mariadb client")

    def stop(self, clean: bool = False) -> None:
        if self.child is not None and self.child.lost and self.crashed is None:
            self.crashed = False  # the host dropped off: how the server fares there is unknown, not a crash
        try:
            super().stop(clean)
        finally:
            if self.child is not None:
                try:
                    self.fetch_log()
                except PerflabError:
                    pass  # the host dropped off: its log stays there, for doctor --clean to remove

    def data_bytes(self, database: str) -> int:
        """The database's files on the host, in bytes (as servers/dataset.py's tree_bytes here)."""
        script = 'find "$0" -type f -printf "%s\\n" | awk "{ s += \\$1 } END { print s + 0 }"'
        done = self.link.run(["sh", "-c", script, f"{self.datadir}/{database}"], timeout=120)
        return int(done.stdout.strip() or 0)
