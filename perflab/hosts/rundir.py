"""A run's directory on a remote host, and the processes perflab starts there.

Each host gets `/dev/shm/perflab-host-XXXXXX` (or under /tmp where there is no /dev/shm) for the run:
the files perflab copies there, `owner` (this machine, this perflab's pid, its local work directory)
and `pids` (every process group started there, one a line). Every process is started by a fixed
wrapper that makes it the leader of a new session, writes its pid, and tags it (and so everything it
starts) with PERFLAB_RUN=<the directory> in its environment; stopping the run signals each group,
then kills whatever still carries the tag. A perflab killed with SIGKILL leaves that behind:
the local work directory's `hosts.json` names the hosts and directories, and `perflab doctor --clean`
(or the next run) connects and removes them (hosts/clean.py). Because that record lives on this
machine's tmpfs, the directory also says from the host's side whose it is (`controller`: this
machine and its PERFLAB_TMPFS) and whether its run lives (`lock`, held by a keeper process for as long
as the run's connection lasts): `sweep` finds a dead run's directories there on the next connect.

    rundir = RunDir.create(link)            # RunDir(path="/dev/shm/perflab-host-k2j4x1", keeper="4711")
    proc, pid = rundir.start(["sysbench", ...])
    rundir.remove()                         # stops every process it started, deletes the directory
    sweep(link)                             # [("db", "/dev/shm/perflab-host-a1b2c3", [4712], None)]: a dead run's
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from perflab.errors import HostLostError
from perflab.hosts.transport import Connection, RemoteProcess
from perflab.run import storage_dirs

PREFIX = "perflab-host-"
RECORD = "hosts.json"  # in the local work directory: what doctor --clean needs to find a run's hosts
TAG = "PERFLAB_RUN"
BASES = ("/dev/shm", "/tmp")  # where run directories are made on a host (/tmp where /dev/shm is not writable)
MACHINE_ID = Path("/etc/machine-id")

# $0 = the base, $1 = this controller (controller()), $2 = the owner line. The run directory and its
# keeper: a process outside any channel of the connection (it takes none of sshd's MaxSessions) that
# takes the directory's liveness lock, writes `controller` (so a sweep never takes a directory before
# its lock is held), its pid into `keeper`, and holds the lock for as long as this connection's sshd
# lives: it ends with the connection (a killed perflab, a reboot here, a lost link). Prints the directory
_CREATE = r"""
c=$1; o=$2
d=$(mktemp -d "$0/perflab-host-XXXXXX") || exit 1
printf '%s\n' "$o" > "$d/owner" || exit 1
s=$PPID
while [ "$s" -gt 1 ]; do
  case "$(cat "/proc/$s/comm" 2>/dev/null)" in sshd*|dropbear*) break;; esac
  set -- $(sed 's/.*) //' "/proc/$s/stat" 2>/dev/null) 0 1; s=$2
done
[ "$s" -gt 1 ] || { echo "no sshd above this session to tie the run's liveness lock to" >&2; exit 1; }
setsid sh -c 'exec 9> "$0/lock" && flock 9 && echo $$ > "$0/keeper" && printf "%s\n" "$1" > "$0/controller" &&
  exec tail --pid="$2" -f /dev/null' "$d" "$c" "$s" < /dev/null > /dev/null 2>&1 &
i=0; while [ ! -s "$d/controller" ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
[ -s "$d/controller" ] || { echo "the run directory's liveness lock was not taken (flock, tail)" >&2; exit 1; }
echo "$d"
"""
# $0 = this controller, "$@" = the directories to look in. Each perflab-host-* there of this controller
# whose run is dead: not a link, owned by the ssh user with mode 700 or 711 (a server run as another user
# traverses it), its `controller` (the ssh user's) naming this controller, and its liveness lock free: the
# run directory's own, or, for a directory on disk (on_disk), that of the run directory its `rundir` names
_DEAD = r"""
me=$(id -u)
for base in "$@"; do
  for d in "$base"/perflab-host-*; do
    [ -d "$d" ] && [ ! -L "$d" ] || continue
    case "$(stat -c '%u %a' "$d")" in "$me 700"|"$me 711") ;; *) continue;; esac
    c="$d/controller"
    [ -f "$c" ] && [ ! -L "$c" ] && [ "$(stat -c %u "$c")" = "$me" ] && [ "$(cat "$c")" = "$0" ] || continue
    r=$d; [ -f "$d/rundir" ] && r=$(cat "$d/rundir")
    if [ -f "$r/lock" ] && ! flock -n "$r/lock" true; then continue; fi
    echo "$d"
  done
done
true
"""

# $0 = the run directory; "$@" = the argv. setsid --wait: a new session (its pid is the group's),
# the exit status passed on. The first stdout line is the pid, for the caller.
_WRAPPER = '[ -e "$0/stopped" ] && exit 97; echo $$; echo $$ >> "$0/pids"; export PERFLAB_RUN="$0"; exec "$@"'
# bash, $0 = the run directory; "$@" = setsid's argv. A measured process (a server, a client) has one more
# bash above its setsid, outside its session (a group's SIGKILL leaves it): once the session has ended,
# bash's `times` (its children's CPU: setsid's and the measured tree's, each reaped by the one above)
# goes into a file of its own, so that perflab's own CPU over the run leaves it out (hosts/own_cpu.py)
_MEASURED = 'setsid --wait "$@"; s=$?; times 2>/dev/null > "$0/measured-$$-$EPOCHREALTIME"; exit $s'
# Shell functions: `stopped LEADER` stops LEADER's group (nothing in it forks any more), then each
# descendant of LEADER as it is found, and prints those: PostgreSQL's backends each call setsid, so they
# are outside the postmaster's group, and their environment (the tag) is overwritten by their titles.
# `left PID...` waits until none of them runs (5 s at most): gone, or a zombie that init reaps in its time.
# `killed LEADER` SIGKILLs LEADER's group and the descendants `stopped` found, and prints the pids killed
_STOPPED = r"""
stopped() {
  kill -s STOP -- "-$1" 2>/dev/null; t=$1
  while [ -n "$t" ]; do
    n=; for q in $t; do n="$n $(cat /proc/$q/task/*/children 2>/dev/null)"; done
    t=; for q in $n; do kill -s STOP "$q" 2>/dev/null && echo "$q" && t="$t $q"; done
  done
}
running() { [ -e "/proc/$1" ] && case "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null)" in Z*|X*|"") false;; esac; }
left() { i=0; for q in "$@"; do while running "$q" && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; done; }
killed() {
  t=$(stopped "$1"); kill -s KILL -- "-$1" 2>/dev/null && echo "$1"
  for q in $t; do kill -s KILL "$q" 2>/dev/null && echo "$q"; done
}
"""
# $1 = the run directory. Each recorded group whose leader still carries this run's tag (a recycled pid
# belongs to someone else and is never touched) with its leader's descendants, then any process still
# tagged: SIGKILLed, their pids printed
_STOP = _STOPPED + r"""
d=$1
tagged() { tr '\0' '\n' < "/proc/$1/environ" 2>/dev/null | grep -qxF "PERFLAB_RUN=$d"; }
all=
[ -f "$d/pids" ] && for p in $(cat "$d/pids"); do tagged "$p" && all="$all $(killed "$p")"; done
for e in /proc/[0-9]*/environ; do
  p=${e#/proc/}; p=${p%/environ}
  tagged "$p" && kill -s KILL "$p" 2>/dev/null && all="$all $p"
done
echo $all; left $all
true
"""

# $1 = a group's leader: it, its group and its descendants outside the group SIGKILLed (`killed`), and
# waited for until none of them runs (`left`), as places/proc.kill_tree
_KILL = _STOPPED + r"""
left $(killed "$1")
true
"""

# $0 = the run directory. The System V shared memory segments servers started here made, as they
# recorded them in `shm` ("KEY SHMID" a line, KEY in decimal: a killed postmaster's), each removed
# only while that id still has that key (an id reused since is someone else's)
_RELEASE = r"""
[ -f "$0/shm" ] || exit 0
while read -r k i; do
  x=$(printf '0x%08x' "$k") || continue
  ipcs -m | awk -v k="$x" -v i="$i" '$1 == k && $2 == i { f = 1 } END { exit !f }' && ipcrm -m "$i" && echo "$i"
done < "$0/shm"
true
"""


# $0 = the run directory, $1 = a mktemp template in the storage, $2 = this controller: made traversable
# (postgres reads its datadir below it), naming its run directory (whose lock says the run lives) and
# then this controller (a sweep reads `rundir` only once `controller` is there), linked from the run
# directory as `storage`
_ON_DISK = (
    'd=$(mktemp -d "$1") && chmod 711 "$d" && printf "%s\\n" "$0" > "$d/rundir" && '
    'printf "%s\\n" "$2" > "$d/controller" && ln -s "$d" "$0/storage" && echo "$d"'
)
# $0 = the run directory: its directory on disk first (a link named `storage` to a perflab-host-* one),
# then itself, once more a moment later when a file was written into it meanwhile (a measured process's
# bash writes its `times` there as its group dies)
_REMOVE = (
    'if [ -L "$0/storage" ]; then s=$(readlink "$0/storage"); '
    'case "${s##*/}" in ' + PREFIX + '*) rm -rf --one-file-system "$s";; esac; fi; '
    'rm -rf --one-file-system "$0" 2>/dev/null || { sleep 0.2; rm -rf --one-file-system "$0"; }'
)


@dataclass(frozen=True)
class Placement:
    """Where one host's run directory is, as recorded locally for doctor --clean."""

    name: str
    ssh: str
    path: str


def controller() -> str:
    """This machine as the controller of its hosts' run directories: its machine id (hostname where it
    has none) and the tmpfs its runs' work directories live in (PERFLAB_TMPFS, run/workdir.py's TMPFS:
    each test process has its own, as each has its own dead runs to clean)."""
    try:
        machine = MACHINE_ID.read_text(encoding="ascii").strip() or socket.gethostname()
    except OSError:
        machine = socket.gethostname()
    return f"{machine} {os.environ.get('PERFLAB_TMPFS', '/dev/shm')}"


Outcome = tuple[str, str, list[int], str | None]  # host, a run directory, pids killed, why it was left (None: removed)


@dataclass
class RunDir:
    link: Connection
    path: str
    keeper: str | None = None  # the pid of the process that holds the directory's liveness lock (create)

    @classmethod
    def create(cls, link: Connection, local_workdir: Path | None = None) -> RunDir:
        base = BASES[0] if link.run(["test", "-d", BASES[0], "-a", "-w", BASES[0]]).status == 0 else BASES[1]
        owner = f"{socket.gethostname()} {os.getpid()} {local_workdir or ''}"
        made = link.run(["sh", "-c", _CREATE, base, controller(), owner])
        path = made.stdout.strip()
        if made.status != 0 or not path.startswith(f"{base}/{PREFIX}"):
            raise HostLostError(
                f"host {link.name}: cannot create a run directory in {base}: {made.stderr.strip()[-300:]}",
                f"free space or permissions on {link.name}:{base}; flock and tail there (util-linux, coreutils)",
            )
        keeper = link.run(["cat", f"{path}/keeper"]).stdout.strip()
        return cls(link, path, keeper if keeper.isdigit() else None)

    def start(self, argv: list[str], measured: bool = False) -> tuple[RemoteProcess, int]:
        """Start argv in its own process group on the host; (its process, its pid = its group).
        `measured`: a server or a client, whose CPU is not perflab's own (its `times` kept, _MEASURED)."""
        wrapped = ["setsid", "--wait", "sh", "-c", _WRAPPER, self.path, *argv]
        # tagged from the first exec (env), not from the wrapper's export only: a process started as the
        # run stops (a lane's, on SIGTERM) is killed by stop_all's tag scan however far it got (CI, ci6)
        tag = ["env", f"{TAG}={self.path}"]
        proc = self.link.start([*tag, "bash", "-c", _MEASURED, self.path, *wrapped] if measured else [*tag, *wrapped])
        first = proc.readline(timeout=30).strip()
        if not first.isdigit():
            done = proc.wait(timeout=10)
            raise HostLostError(
                f"host {self.link.name}: {argv[0]} did not start: {done.stderr.strip()[-500:]}",
                f"is {argv[0]} installed on {self.link.name}?",
            )
        return proc, int(first)

    def signal(self, pid: int, name: str = "TERM") -> None:
        """Send a signal to the process group `pid` started."""
        self.link.run(["kill", "-s", name, "--", f"-{pid}"])

    def kill(self, pid: int) -> None:
        """SIGKILL the process group `pid` started and every descendant that left it (_KILL)."""
        self.link.run(["sh", "-c", _KILL, "perflab-kill", str(pid)], timeout=30)

    def stop_all(self) -> list[int]:
        """SIGKILL every process this run started on the host (_STOP); the pids killed."""
        done = self.link.run(["sh", "-c", _STOP, "perflab-stop", self.path], timeout=60)
        return sorted({int(p) for p in done.stdout.split() if p.isdigit()})

    def on_disk(self, storage: str) -> str:
        """A directory of the run in `storage` (a server host's [experiment] storage: its datadirs),
        linked from here as `storage`, so `remove` (and doctor --clean) removes it too; its path."""
        said(self.link.name, sweep(self.link, (storage,)))  # what dead runs of this machine left there
        storage_dirs.remember(storage, str(self.link.target))  # where doctor --clean looks on this host
        made = self.link.run(["sh", "-c", _ON_DISK, self.path, f"{storage}/{PREFIX}XXXXXX", controller()])
        if made.status != 0:
            raise HostLostError(
                f"host {self.link.name}: cannot create a directory in {storage}: {made.stderr.strip()[-300:]}",
                f"mkdir -p {storage} on {self.link.name}, writable by the ssh user",
            )
        return made.stdout.strip()

    def remove(self) -> list[int]:
        """Stop everything started here, release the shared memory they left, then delete the directory
        (and its directory on disk, `on_disk`)."""
        self.link.run(["touch", f"{self.path}/stopped"])  # the wrapper starts nothing from now on
        killed = self.stop_all()
        self.link.run(["sh", "-c", _RELEASE, self.path], timeout=60)
        self.link.run(["sh", "-c", _REMOVE, self.path], timeout=600)
        if self.keeper is not None:  # the lock went with the directory; the keeper still runs (this
            self.link.run(["kill", self.keeper])  # connection lives), so the pid is still its own
        return killed

    def placement(self) -> Placement:
        return Placement(self.link.name, str(self.link.target), self.path)


def sweep(link: Connection, bases: tuple[str, ...] = BASES) -> list[Outcome]:
    """Find, from the host's side, what dead runs of this controller left in `bases` (_DEAD), stop what
    they started there (processes tagged with their directory) and remove it; what was found."""
    found = link.run(["sh", "-c", _DEAD, controller(), *bases], timeout=60)
    outcomes: list[Outcome] = []
    for path in found.stdout.splitlines():
        try:
            outcomes.append((link.name, path, RunDir(link, path).remove(), None))
        except HostLostError as exc:
            outcomes.append((link.name, path, [], exc.message))
    return outcomes


def said(name: str, outcomes: list[Outcome]) -> None:
    """Tell the user what a sweep of host `name` did (on stderr: the run's own output stays its report)."""
    for _, path, killed, why in outcomes:
        stopped = f"; stopped {', '.join(map(str, killed))}" if killed else ""
        text = f"removed {path}{stopped}" if why is None else f"left {path}: {why}"
        print(f"host {name}: {text} (a dead run of this machine had left it)", file=sys.stderr, flush=True)


def record(local_workdir: Path, placements: list[Placement]) -> None:
    """Write the run's hosts into its local work directory (atomically: a kill mid-write leaves the old one)."""
    tmp = local_workdir / (RECORD + ".tmp")
    tmp.write_text(json.dumps([asdict(p) for p in placements]), encoding="utf-8")
    tmp.replace(local_workdir / RECORD)


def recorded(local_workdir: Path) -> list[Placement]:
    try:
        rows = json.loads((local_workdir / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [Placement(**row) for row in rows if isinstance(row, dict) and set(row) == {"name", "ssh", "path"}]


class Tracked:
    """A long-running process started in a run directory (a server), driven as places/proc.py's Child:
    `pid`, `poll`, `wait`, `signal_group`, `kill`. Its exit is watched in a thread; setsid --wait
    passes on an exit code, and exits with the signal's number after "did not exit normally"."""

    def __init__(self, rundir: RunDir, argv: list[str], measured: bool = False) -> None:
        self.rundir = rundir
        self.proc, self.pid = rundir.start(argv, measured)
        self.lost: str | None = None
        self._code: int | None = None
        self._done = threading.Event()
        threading.Thread(target=self._watch, name=f"remote-{os.path.basename(argv[0])}", daemon=True).start()

    def _watch(self) -> None:
        try:
            done = self.proc.wait()
            code = done.status if done.status is not None else -9
            self._code = -code if "did not exit normally" in done.stderr and code > 0 else code
            if done.status is None:
                self.lost = f"host {self.rundir.link.name}: the connection ended before the process did"
        except (HostLostError, TimeoutError) as exc:
            self.lost, self._code = getattr(exc, "message", None) or str(exc), -9
        finally:
            self._done.set()

    def poll(self) -> int | None:
        return self._code if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise TimeoutError(f"pid {self.pid} on {self.rundir.link.name} still running after {timeout}s")
        assert self._code is not None
        return self._code

    def signal_group(self, sig: int) -> None:
        self.rundir.signal(self.pid, signal.Signals(sig).name.removeprefix("SIG"))

    def kill(self) -> None:
        if not self._done.is_set():
            with contextlib.suppress(HostLostError):
                self.rundir.kill(self.pid)
            self._done.wait(10)
