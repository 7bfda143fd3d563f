"""PostgreSQL on another host (`[experiment] server_host`, docs/hosts.md): the host's installed
postgres (Debian's postgresql-15, /usr/lib/postgresql/15/bin), on a datadir in the host's run
directory, started through the run directory's wrapper (its own process group, tagged PERFLAB_RUN,
its pid in `pids`) with a postgresql.conf perflab writes here and copies there. It listens only on
the host's address as this machine reaches it (`listen_addresses`), and the run's `perflab` role
logs in there by password only (pg_hba: scram-sha-256). perflab's own statements (readiness, the
login, prewarm) run through the host's psql on the server's socket. When the ssh user is root, the
server runs as the host's `postgres` user (`setpriv`), which gets the cell's directory.

Its CPU, faults and context switches are the postmaster's tree on the host (every backend, and
those it reaped), its memory the tree's RSS once a second there: the host's place's `tree_counters`
and `rss_sampler(pid, tree=True)` (hosts/place.py).

    server = RemotePostgreSQL(place, "/dev/shm/perflab-host-x/cell-0003/data", options, local=rundir)
    with server: server.sql("SELECT 1")      # over SSH, with the host's psql
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab.builds import Build
from perflab.errors import PerflabError, ServerStartError, ServerStopError
from perflab.hosts.rundir import Tracked
from perflab.servers.managed import OnHost
from perflab.servers.postgresql.server import (
    DEFAULT_OPTIONS,
    INITDB_OPTIONS,
    READY_DEADLINE_S,
    RUN_USER,
    SUPERUSER,
    PostgreSQL,
    auth_files,
)

if TYPE_CHECKING:
    from perflab.servers.kind import ServerHostPlace

# $0: the cell's directory, $1: its datadir, $2: the user that runs postgres (empty: the ssh user)
_ADOPT = 'chmod go+x "$(dirname "$0")" && chmod 700 "$1" && if [ -n "$2" ]; then chown -R "$2:" "$0"; fi'
# $0: the log file, "$@": postgres's argv, run in the cell's directory (not the ssh user's home, which
# the postgres user may not reach); exec keeps the wrapper's pid (the postmaster's = the group's)
_LOGGED = 'cd "${0%/*}" && exec "$@" > "$0" 2>&1'
# $0: the datadir, $1: the postmaster's pid, $2: the run directory. The System V segment a killed
# postmaster leaves: postmaster.pid's 7th line names it (key and shmid), but the server's account
# writes that file, so it is taken only when the kernel's table says this postmaster made it
# (/proc/sysvipc/shm: shmid, then cpid in the 5th column); then $1 = pid, $2 = key, $3 = shmid
_OURS = (
    'r=$2; set -- "$1" $(sed -n 7p "$0/postmaster.pid" 2>/dev/null); [ -n "$3" ] && '
    "awk -v i=\"$3\" -v p=\"$1\" '$2 == i && $5 == p { f = 1 } END { exit !f }' /proc/sysvipc/shm"
)
# marked for removal: the kernel frees it once the last backend has gone
_RELEASE = _OURS + ' && ipcrm -m "$3" 2>/dev/null; true'
# recorded in the run directory's `shm`, for a run killed before its stop: the run directory's removal
# (doctor --clean) releases it (hosts/rundir.py)
_RECORD = _OURS + ' && echo "$2 $3" >> "$r/shm"; true'
# $0: the datadir (new), $1: the user that runs postgres (empty: the ssh user), "$@" after: initdb's
# argv, run in the run directory (the postgres user may not reach the ssh user's home)
# $0: the postmaster's pid; $1: " DATABASE ". Its children whose title names the database, counted
_BACKENDS = (
    'n=0; for p in $(cat /proc/"$0"/task/*/children 2>/dev/null); do '
    't=$(tr "\\0" " " < /proc/"$p"/cmdline 2>/dev/null) || continue; '
    'case "$t" in *"$1"*) n=$((n + 1));; esac; done; echo "$n"'
)
_INIT = (
    'mkdir -m 700 "$0" && chmod go+x "${0%/*}" && { [ -z "$1" ] || chown "$1:" "$0"; } && cd "${0%/*}" && '
    'u=$1 && shift 2 && if [ -n "$u" ]; then exec setpriv --reuid="$u" --regid="$u" --init-groups "$@"; fi; exec "$@"'
)


def init_datadir(place: ServerHostPlace, datadir: str) -> str:
    """A new cluster at `datadir` on the host by its initdb, as servers/postgresql/server.py does here."""
    user = RUN_USER if place.link.target.user == "root" else ""
    argv = [place.binaries["initdb"], "-D", datadir, "-U", SUPERUSER, *INITDB_OPTIONS]
    done = place.link.run(["sh", "-c", _INIT, datadir, user, "-", *argv], timeout=300)
    if done.status != 0:
        raise ServerStartError(
            f"initdb on host {place.name} failed (exit {done.status}): {(done.stdout + done.stderr)[-500:]}",
            f"postgresql-15 there provides initdb and the {RUN_USER} user: apt-get install postgresql-15",
        )
    return "initdb"


class RemotePostgreSQL(OnHost, PostgreSQL):
    """One postmaster (and its backends) on a host (`place`: the run's ServerHost, hosts/server.py)."""

    def __init__(
        self,
        place: ServerHostPlace,
        datadir: str,
        options: dict[str, Any],
        *,
        local: Path,
        env: dict[str, str] | None = None,
        preload: str | None = None,
        alloc: Any = None,
        build: Build | None = None,
    ) -> None:
        self.place_on(place, datadir, local, env, alloc, preload, build)  # pgbench's log in `local` too
        self.socket = self.remote_dir  # type: ignore[assignment]  # psql's -h on the host: the socket's directory
        self.listen_address = self.bind_address
        self.error_log = local / "postgres.log"
        self.option_file = local / "postgresql.conf"
        self.options = {**DEFAULT_OPTIONS, **options}
        self.bindir = None
        self.user = RUN_USER if self.link.target.user == "root" else ""  # postgres refuses to run as root
        self.child: Tracked | None = None  # type: ignore[assignment]

    @property
    def client_target(self) -> tuple[str, int, str]:
        """Where a client here reaches it: (address, port, role); the password is the run's."""
        return self.listen_address, self.port, "perflab"

    @property
    def conf_dir(self) -> str:
        return self.remote_dir

    def write_option_file(self) -> None:
        super().write_option_file()  # here, then copied there: postgresql.conf names the files there
        # the run's role by password over TCP; on the socket, the ssh user and the server's by peer only
        files = auth_files(True, [self.link.target.user, self.user or self.link.target.user])
        for name, text in {"postgresql.conf": self.option_file.read_text(), **files}.items():
            self.put(name, text)

    def argv(self) -> list[str]:
        """postgres's argv on the host: as the postgres user when the ssh user is root."""
        launcher = self.build.launcher if self.build is not None else []  # a private root's loader there
        conf = f"config_file={self.remote_dir}/postgresql.conf"
        argv = [*launcher, str(self.program), "-D", self.datadir, "-c", conf]
        if self.user:
            argv = ["setpriv", f"--reuid={self.user}", f"--regid={self.user}", "--init-groups", *argv]
        return ["sh", "-c", _LOGGED, f"{self.remote_dir}/postgres.log", *self.environment(), *self.launched(argv)]

    def start(self, deadline_s: float = READY_DEADLINE_S) -> None:
        self.write_option_file()
        adopted = self.link.run(["sh", "-c", _ADOPT, self.remote_dir, self.datadir, self.user])
        if adopted.status != 0:
            raise ServerStartError(
                f"host {self.link.name}: cannot give {self.remote_dir} to {self.user or 'the ssh user'}: "
                f"{adopted.stderr.strip()[-300:]}",
                f"postgresql-15 creates the {RUN_USER} user: apt-get install postgresql-15 on {self.link.target}",
            )
        self.child = Tracked(self.place.rundir, self.argv(), measured=True)
        self._wait_ready(deadline_s)
        self.link.run(["sh", "-c", _RECORD, self.datadir, str(self.pid), self.place.rundir.path])

    READY_POLL_S = 0.2  # each look is an SSH round trip and a psql

    def _ready(self) -> bool:
        """A real connection and query on the host's socket (psql there), not just a port that accepts."""
        try:
            return self.sql("SELECT 1").strip() == "1"
        except PerflabError:
            return False

    def sql(self, statement: str, database: str = "postgres") -> str:
        return self.run_client(self.psql(self.place.binaries["psql"], database), statement, "psql")

    def fetch_log(self) -> None:
        self.fetch({"postgres.log": self.error_log})

    def log_lines(self) -> list[str]:
        try:
            self.fetch_log()
        except PerflabError:
            pass  # a host that dropped off: what was fetched before
        return super().log_lines()

    def alive(self) -> bool:
        return self.child is not None and self.child.poll() is None and self.restart_cause() is None

    def client_backends(self, database: str) -> int:
        """The postmaster's backends serving a client on `database` there (their titles name it), in one
        round trip."""
        done = self.link.run(["sh", "-c", _BACKENDS, str(self.pid), f" {database} "])
        return int(done.stdout.strip() or 0) if done.status == 0 else 0

    def data_bytes(self, database: str) -> int:
        return int(self.sql(f"SELECT pg_database_size('{database}')").strip())

    def stop(self, clean: bool = False) -> None:
        """SIGKILL to the process group on the host (the datadir is thrown away), or `clean`: a fast
        shutdown first (SIGINT: a checkpoint, for a snapshot); its shared memory segment released
        there, its log fetched back."""
        if self.child is None:
            return
        if self.crashed is None:
            self.crashed = self.child.poll() is not None and not self.child.lost
        try:
            if clean:
                self._fast_shutdown()
        finally:
            try:
                self.child.kill()
                self.link.run(["sh", "-c", _RELEASE, self.datadir, str(self.pid), ""])
                self.fetch_log()
            except PerflabError:
                pass  # the host dropped off: the server, its segment and log stay there for doctor --clean

    def _fast_shutdown(self) -> None:
        """SIGINT to the postmaster alone (a checkpoint, then exit 0), or ServerStopError."""
        assert self.child is not None
        self.link.run(["kill", "-s", "INT", str(self.pid)])
        try:
            code = self.child.wait(self.CLEAN_STOP_S)
        except TimeoutError:
            code = None
        if code != 0:
            said = "did not finish" if code is None else f"exited with code {code} from"
            raise ServerStopError(
                f"postgres on host {self.link.name} {said} its fast shutdown: the snapshot may need recovery:\n"
                f"{self.error_lines()}",
                f"its log: {self.error_log}",
            )

