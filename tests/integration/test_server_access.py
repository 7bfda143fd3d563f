"""No way in through perflab's servers (issue 48): during a real run, an unprivileged account
(`setpriv --reuid=65534`) tries what a review found open: root@127.0.0.1 with no password on the
MariaDB cell's TCP port, its socket, go-tpc's tpcc@127.0.0.1 with no password, and the
PostgreSQL cell's socket with `trust` auth. Each fails; the server itself reads no file outside
the cell's directory (secure_file_priv); PostgreSQL refuses an account it does not map even on a
socket it could reach (peer authentication)."""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT
from tests.integration.helpers import processes, runs_tmpfs, write_experiment

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]

MARIADB = """
[experiment]
design = "sequential"
name = "access"
duration = "30s"
warmup = "1s"
repeats = 1

[dataset]
tables = 1
table_size = 1000

[workload]
threads = [1]
"""

POSTGRESQL = """
[experiment]
design = "sequential"
name = "pg-access"
server = "postgresql"
duration = "30s"
warmup = "1s"
repeats = 1

[dataset]
scale = 1

[workload]
tool = "pgbench"
test = "select-only"
threads = [1]
"""


TPCC = """
[experiment]
design = "sequential"
name = "tpcc-access"
duration = "30s"
warmup = "1s"
repeats = 1

[workload]
tool = "go-tpc"
test = "tpcc"
warehouses = 1
threads = [1]
"""


def _start(tmp_path: Path, body: str, client: str) -> tuple[subprocess.Popen, int, str]:
    """`perflab run` in the background, until its `client` runs: (the run, its server's pid, its cmdline)."""
    spec = write_experiment(tmp_path / "access.toml", body)
    run = subprocess.Popen(
        [sys.executable, "-m", "perflab", "run", str(spec), "-o", str(tmp_path / "out")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 180
    server = "postgres" if "postgresql" in body else "mariadbd"
    while time.monotonic() < deadline:
        # a cell's server (not the dataset's prepare), with its client running
        servers = [p for p in processes(server) if f"{runs_tmpfs()}/perflab-" in p[1] and "/cell-" in p[1]]
        servers = [p for p in servers if "-D " in p[1] or server == "mariadbd"]
        if servers:  # ready once its socket is there (under load a server is found before it listens)
            cell = Path(re.search(r"(/[^\s=]*/cell-\d{4})", servers[0][1]).group(1))
            if (cell / "mysqld.sock").exists() or (cell / ".s.PGSQL.5432").exists():
                return run, servers[0][0], servers[0][1]
        assert run.poll() is None, run.communicate()
        time.sleep(0.2)
    run.kill()
    raise AssertionError(f"no {client} within 180 s: {run.communicate()}")


def _stop(run: subprocess.Popen) -> None:
    run.terminate()
    try:
        run.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        run.kill()
        run.communicate()


def _listening_ports(pid: int) -> list[int]:
    """TCP ports the process listens on (its sockets' inodes matched in /proc/net/tcp{,6})."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "0A" and parts[9] in inodes:
                ports.append(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


def _uids(pid: int) -> list[int]:
    """The process's real, effective, saved and filesystem uids."""
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("Uid:"))
    return [int(x) for x in line.split()[1:]]


def _as_nobody(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([*NOBODY, *argv], capture_output=True, text=True, timeout=60, cwd="/")


def test_no_local_account_gets_into_a_mariadb_cell(tmp_path: Path):
    run, pid, cmdline = _start(tmp_path, MARIADB, "sysbench")
    try:
        option_file = Path(cmdline.split("--defaults-file=")[1].split()[0])
        rundir = option_file.parent
        # the server is not root: a way in would not be root's (it runs as Debian's `mysql` account)
        assert 0 not in _uids(pid) and _uids(pid)[0] == pwd.getpwnam("mysql").pw_uid
        assert rundir.stat().st_uid == pwd.getpwnam("mysql").pw_uid and rundir.stat().st_mode & 0o077 == 0
        # TCP: root with no password on any port the server listens on (as a local account sees them);
        # not 3306 blindly: the system's own service may be there (test_system_service.py counts its
        # connections, and runs beside this module)
        for port in _listening_ports(pid):
            tried = _as_nobody(["mariadb", "--no-defaults", "--protocol=tcp", "-h127.0.0.1", f"-P{port}", "-uroot",
                                "-Ne", "SELECT 'in'"])  # fmt: skip
            assert tried.returncode != 0 and "in" not in tried.stdout, f"port {port}: {tried.stdout}"
        assert _listening_ports(pid) == []  # sysbench and perflab connect by the socket: no TCP at all
        # the socket: in the run's directory, which only root reaches
        tried = _as_nobody(["mariadb", "--no-defaults", f"--socket={rundir / 'mysqld.sock'}", "-uroot", "-e", "SELECT 1"])
        assert tried.returncode != 0 and "1" not in tried.stdout
        # and the server itself (root) reads no file outside the cell's directory
        secret = tmp_path / "secret.txt"
        secret.write_text("not for the server\n")
        read = subprocess.run(
            ["mariadb", "--no-defaults", f"--socket={rundir / 'mysqld.sock'}", "-uroot", "-N", "-e",
             f"SELECT LOAD_FILE('{secret}') IS NULL, @@secure_file_priv"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert read.returncode == 0, read.stderr
        is_null, priv = read.stdout.split("\t")
        assert is_null == "1" and priv.strip().rstrip("/") == str(rundir / "files")
    finally:
        _stop(run)


def test_no_local_account_gets_into_a_postgresql_cell(tmp_path: Path):
    run, pid, cmdline = _start(tmp_path, POSTGRESQL, "pgbench")
    try:
        datadir = Path(cmdline.split("-D ")[1].split()[0])
        rundir = datadir.parent
        assert 0 not in _uids(pid)  # postgres, as ever
        assert _listening_ports(pid) == []  # no TCP
        tried = _as_nobody(["psql", "-h", str(rundir), "-p", "5432", "-U", "postgres", "-d", "postgres", "-Atc",
                            "SELECT 'in'"])  # fmt: skip
        assert tried.returncode != 0 and "in" not in tried.stdout, tried.stdout
        tried = _as_nobody(["cat", str(rundir / "postgres.log")])
        assert tried.returncode != 0  # its log and files: the server's user's and root's
        assert (rundir.stat().st_mode & 0o077) == 0
    finally:
        _stop(run)


def test_go_tpcs_server_listens_only_in_a_network_of_its_own(tmp_path: Path):
    """go-tpc connects by TCP and takes a password only in argv: its server listens on 127.0.0.1 of
    a network namespace of its own (places/netns.py), which no other account can enter."""
    run, pid, cmdline = _start(tmp_path, TPCC, "go-tpc")
    try:
        option_file = Path(cmdline.split("--defaults-file=")[1].split()[0])
        port = int(re.search(r"^port=(\d+)$", option_file.read_text(), re.M).group(1))
        assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
        login = ["mariadb", "--no-defaults", "--protocol=tcp", "-h127.0.0.1", f"-P{port}", "-utpcc", "-Ne"]
        # from this machine's network, as any account (root too): nothing listens there
        for who in (NOBODY, []):
            tried = subprocess.run([*who, *login, "SELECT 'in'"], capture_output=True, text=True, timeout=60)
            assert tried.returncode != 0 and "in" not in tried.stdout, tried.stdout
            assert "Can't connect" in tried.stderr, tried.stderr
        # inside the server's network (root only may enter: setns needs CAP_SYS_ADMIN) it does,
        # and tpcc has its own database only (no FILE, no SUPER)
        enter = ["nsenter", f"--net=/proc/{pid}/ns/net", "--"]
        inside = subprocess.run([*enter, *login, "SHOW GRANTS"], capture_output=True, text=True, timeout=60)
        assert inside.returncode == 0, inside.stderr
        grants = inside.stdout.replace("USAGE ON *.*", "")
        assert "ON `tpcc`.*" in grants and "ON *.*" not in grants, inside.stdout
        tried = _as_nobody([*enter, "true"])
        assert tried.returncode != 0  # nobody cannot enter it
    finally:
        _stop(run)


def test_postgresql_refuses_an_account_it_does_not_map_on_its_socket(tmp_path: Path):
    """Peer authentication: even with the socket's directory and the socket opened to everyone
    (what the test does, as root), an account perflab does not map to the superuser is refused."""
    run, pid, cmdline = _start(tmp_path, POSTGRESQL, "pgbench")
    try:
        rundir = Path(cmdline.split("-D ")[1].split()[0]).parent
        sock = rundir / ".s.PGSQL.5432"
        modes = rundir.stat().st_mode & 0o777, sock.stat().st_mode & 0o777
        rundir.chmod(0o711)
        sock.chmod(0o777)
        try:
            psql = ["psql", "-h", str(rundir), "-p", "5432", "-d", "postgres", "-Atc", "SELECT 'in'"]
            for user in ("postgres", "nobody"):
                tried = _as_nobody([*psql, "-U", user])
                assert tried.returncode != 0 and "in" not in tried.stdout, tried.stdout
                assert "Peer authentication failed" in tried.stderr, tried.stderr
            assert "local all all peer map=perflab" in (rundir / "pg_hba.conf").read_text()
            mine = subprocess.run([*psql, "-U", "postgres"], capture_output=True, text=True, timeout=60)
            assert mine.stdout.strip() == "in", mine.stderr  # perflab's own account (root) is mapped
        finally:
            rundir.chmod(modes[0])
            sock.chmod(modes[1])
    finally:
        _stop(run)
