"""A managed server's quarters on a server host (servers/home.py's Home): its cell's directory in the
host's run directory, the files perflab writes here and copies there, its start through the run
directory's wrapper (its own process group, tagged PERFLAB_RUN, its pid in `pids`) as the account
the host's package made (when the ssh user is root: never root), its client run there over the link,
its log fetched back.

    home = HostHome(server_host, rundir, datadir)    # the cell's directory there, its datadir there
    child = home.start(argv, env, "postgres.log", "postgres")
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.errors import ServerStartError
from perflab.hosts import libraries
from perflab.hosts.rundir import Tracked
from perflab.servers.managed import randomizing

if TYPE_CHECKING:
    from perflab.servers.home import ServerHostPlace

# $0: the cell's directory, $1: its datadir, $2: the account that runs the server (empty: the ssh user),
# $3: the directories made in it (names perflab gives: mysqld's tmp and files). Its socket, log, files
# and data: the account's alone (0700: a server's command line names its cell's directory to every
# account there: issue 48)
_ADOPT = (
    'mkdir -p "$0" && for d in $3; do mkdir -p "$0/$d" || exit 1; done && chmod 700 "$0" "$1" && '
    'chmod go+x "${0%/*}" && { [ -z "$2" ] || { '
    '{ [ "${1%/*}" = "$0" ] || chmod go+x "${1%/*}"; } && chown -R "$2:" "$0" "$1"; }; }'
)
# $0: a directory; the bytes of the files under it
_BYTES = 'find "$0" -type f -printf "%s\\n" | awk "{ s += \\$1 } END { print s + 0 }"'
# $0: the log file, "$@": the argv, run in the cell's directory (not the ssh user's home, which the
# server's account may not reach); exec keeps the wrapper's pid (the server's = the group's)
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
# $0: a pid; $1: a text. Its children whose command line holds the text, counted
_TITLED = (
    'n=0; for p in $(cat /proc/"$0"/task/*/children 2>/dev/null); do '
    't=$(tr "\\0" " " < /proc/"$p"/cmdline 2>/dev/null) || continue; '
    'case "$t" in *"$1"*) n=$((n + 1));; esac; done; echo "$n"'
)

# $0: a datadir (new), $1: the account that runs the server (empty: the ssh user), "$@" after: the
# tool's argv (initdb), run in the datadir's parent (the account may not reach the ssh user's home)
_INIT = (
    'mkdir -m 700 "$0" && chmod go+x "${0%/*}" && { [ -z "$1" ] || chown "$1:" "$0"; } && cd "${0%/*}" && '
    'u=$1 && shift 2 && if [ -n "$u" ]; then exec setpriv --reuid="$u" --regid="$u" --init-groups "$@"; fi; exec "$@"'
)


def init_as(place: ServerHostPlace, datadir: str, argv: list[str], user: str, hint: str) -> None:
    """A new datadir there made by its tool `argv` (initdb) as the server's account (`account`)."""
    done = place.link.run(["sh", "-c", _INIT, datadir, account(place, user), "-", *argv], timeout=300)
    if done.status != 0:
        tool = argv[0].rsplit("/", 1)[-1]
        raise ServerStartError(
            f"{tool} on host {place.name} failed (exit {done.status}): {(done.stdout + done.stderr)[-500:]}", hint
        )


def account(place: ServerHostPlace, user: str) -> str:
    """The account a server runs as on the host: `user` (its package's) when the ssh user is root;
    else the ssh user ("")."""
    return user if place.link.target.user == "root" else ""


class HostHome:
    """The cell's directory `local`'s namesake in the host's run directory (`place`: the run's
    ServerHost, hosts/server.py), its datadir `datadir` there."""

    remote_clients = True

    def __init__(self, place: ServerHostPlace, local: Path, datadir: str) -> None:
        self.place, self.link, self.local, self.datadir = place, place.link, local, datadir
        self.name = place.name
        self.dir = f"{place.rundir.path}/{local.name}"

    def peers(self, user: str) -> list[str]:
        ssh = self.link.target.user
        return list(dict.fromkeys([ssh, account(self.place, user) or ssh]))

    def write(self, name: str, text: str) -> None:
        self.local.mkdir(parents=True, exist_ok=True)
        (self.local / name).write_text(text, encoding="utf-8")
        self.link.run(["sh", "-c", 'mkdir -p "${0%/*}" && cat > "$0"', f"{self.dir}/{name}"], stdin=text)

    def preloaded(self, library: str) -> str:
        return library  # a path perflab made there (the run directory's copy, or the host's own)

    def account(self, user: str, hint: str) -> str:
        return account(self.place, user)

    def reaches(self, user: str, programs: Sequence[str], files: Sequence[str]) -> bool:
        """Not read from here: the server starts as the ssh user and becomes `user` itself."""
        return False

    def start(self, argv: list[str], env: dict[str, str], log: str, user: str, hint: str, *, become: bool = True,
              dirs: Sequence[str] = (), network: bool = False) -> Tracked:  # fmt: skip
        assert not network, "a network of its own is this machine's (places/netns.py)"
        who = account(self.place, user)
        adopted = self.link.run(["sh", "-c", _ADOPT, self.dir, self.datadir, who, " ".join(dirs)])
        if adopted.status != 0:
            raise ServerStartError(
                f"host {self.name}: cannot give {self.dir} to {who or 'the ssh user'}: {adopted.stderr.strip()[-300:]}",
                f"{hint}, on {self.link.target}",
            )
        if who and become:
            argv = ["setpriv", f"--reuid={who}", f"--regid={who}", "--init-groups", *argv]
        environment = ["env", *(f"{k}={v}" for k, v in env.items())]
        logged = ["sh", "-c", _LOGGED, f"{self.dir}/{log}", *environment, *argv]
        return Tracked(self.place.rundir, logged, measured=True)

    def ready(self, name: str) -> bool:
        return True  # each look is a round trip: the client's own try is the look

    def client(self, argv: list[str], statement: str, what: str) -> str:
        done = self.link.run(argv, timeout=120, stdin=statement)
        if done.status != 0:
            raise ServerStartError(
                f"{what} on host {self.name} failed (exit {done.status}): {done.stderr.strip()[-500:]}",
                f"the server's log: {self.local}",
            )
        return done.stdout

    def fetch(self, *names: str) -> None:
        for name in names:
            done = self.link.run(["cat", f"{self.dir}/{name}"], timeout=60)
            if done.status == 0:
                (self.local / name).write_text(done.stdout, encoding="utf-8")

    def signal(self, pid: int, sig: int) -> None:
        self.link.run(["kill", "-s", signal.Signals(sig).name.removeprefix("SIG"), str(pid)])

    def started(self, pid: int, datadir: str) -> None:
        self.link.run(["sh", "-c", _RECORD, datadir, str(pid), self.place.rundir.path])

    def release(self, pid: int, datadir: str) -> None:
        self.link.run(["sh", "-c", _RELEASE, datadir, str(pid), ""])

    def children_titled(self, pid: int, text: str) -> int:
        done = self.link.run(["sh", "-c", _TITLED, str(pid), text])  # one round trip
        return int(done.stdout.strip() or 0) if done.status == 0 else 0

    def aslr_seen(self, pid: int) -> bool | None:
        return randomizing(self.link.run(["cat", f"/proc/{pid}/personality"]).stdout)

    def mapped(self, pid: int) -> set[str]:
        return libraries.mapped(self.link, pid)

    def is_dir(self, path: str) -> bool:
        return self.link.run(["test", "-d", path]).status == 0

    def tree_bytes(self, path: str) -> int:
        return int(self.link.run(["sh", "-c", _BYTES, path], timeout=120).stdout.strip() or 0)

    def remove(self) -> None:
        self.link.run(["rm", "-rf", "--one-file-system", self.dir], timeout=120)
