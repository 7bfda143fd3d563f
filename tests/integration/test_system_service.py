"""perflab never touches the system's own MariaDB service (servers/mysqld.py: its servers
read only their own option file, on their own socket and port, in their own datadir on tmpfs).

Debian's service is started by the test (systemctl where systemd runs, else its init script),
a small perflab run (interleaved: two servers at once) goes by beside it, and the service must
come out as it went in: the same mariadbd process (pid), still the one listening on port 3306
and on /run/mysqld/mysqld.sock (the same socket file), the same files in /var/lib/mysql with
the same mtimes, and no connection to it but the test's own. The service is left as it was
found: stopped again if the test started it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import perflab
from tests.integration.helpers import write_experiment

DATADIR = Path("/var/lib/mysql")
SOCKET = Path("/run/mysqld/mysqld.sock")
PIDFILE = Path("/run/mysqld/mysqld.pid")
# files an idle server leaves alone: the system tables and Debian's markers
STILL = ("ibdata1", "mysql/global_priv.MAD", "mysql/db.frm", "mysql/plugin.MAI", "mysql_upgrade_info")

SPEC = """
[experiment]
name = "it-beside-the-service"
duration = "2s"
warmup = "1s"
repeats = 1

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_point_select"
threads = [1]

[variants.alloc]
glibc = {}
jemalloc = { preload = "jemalloc" }
"""


def service(action: str) -> subprocess.CompletedProcess[str]:
    """systemctl where systemd is the init, else Debian's init script (a container's case)."""
    argv = ["systemctl", action, "mariadb"] if Path("/run/systemd/system").is_dir() else ["service", "mariadb", action]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def running() -> bool:
    return PIDFILE.exists() and Path(f"/proc/{PIDFILE.read_text().strip()}").exists()


def sql(query: str) -> str:
    """One query to the service, on its socket, as root (Debian's unix_socket login)."""
    done = subprocess.run(["mariadb", f"--socket={SOCKET}", "-N", "-B", "-e", query],
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def listener(port: int) -> int | None:
    """The pid of the process listening on TCP `port` (ss -ltnp), or None."""
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    pids = {int(p.split("pid=")[1].split(",")[0]) for p in out.split() if "pid=" in p}
    assert len(pids) <= 1, out
    return pids.pop() if pids else None


@dataclass(frozen=True)
class State:
    pid: int
    listener: int | None
    socket: tuple[int, int]  # the socket file's inode and mtime
    files: frozenset[str]
    mtimes: dict[str, int]
    connections: int  # the service's Connections counter: every connection ever made to it

    @classmethod
    def now(cls) -> State:
        stat = SOCKET.stat()
        return cls(
            pid=int(PIDFILE.read_text().strip()),
            listener=listener(3306),
            socket=(stat.st_ino, stat.st_mtime_ns),
            files=frozenset(str(p.relative_to(DATADIR)) for p in DATADIR.rglob("*")),
            mtimes={name: (DATADIR / name).stat().st_mtime_ns for name in STILL},
            connections=int(sql("SHOW GLOBAL STATUS LIKE 'Connections'").split()[1]),
        )


@contextlib.contextmanager
def the_system_service() -> Iterator[None]:
    """The service running inside; as it was found after."""
    was_running = running()
    if not was_running:
        started = service("start")
        assert started.returncode == 0 and running(), started.stdout + started.stderr
    try:
        yield
    finally:
        if not was_running:
            stopped = service("stop")
            assert stopped.returncode == 0 and not running(), stopped.stdout + stopped.stderr


def test_a_run_leaves_the_systems_mariadb_service_untouched(tmp_path: Path):
    assert Path("/usr/sbin/mariadbd").exists() and (DATADIR / "mysql").is_dir()  # Debian's mariadb-server
    with the_system_service():
        before = State.now()
        assert before.listener == before.pid  # the service listens on 3306 (Debian's default)
        done = perflab("run", str(write_experiment(tmp_path / "beside.toml", SPEC)), "-o", str(tmp_path / "out"))
        assert done.returncode == 0, done.stdout + done.stderr
        exported = json.loads(perflab("export", str(tmp_path / "out")).stdout)
        assert exported["experiment"]["design"] == "interleaved"  # two servers of perflab's at once
        assert [c["status"] for c in exported["cells"]] == ["ok", "ok"]
        after = State.now()
        assert after.pid == before.pid and running()  # neither restarted nor killed
        assert after.listener == before.pid
        assert after.socket == before.socket  # not replaced by another server's socket
        assert after.files == before.files, after.files ^ before.files
        assert after.mtimes == before.mtimes
        assert after.connections == before.connections + 1  # the test's own SHOW STATUS, no other
