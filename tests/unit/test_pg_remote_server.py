"""PostgreSQL on another host without a host (servers/postgresql/server.py in its host's home,
hosts/home.py; docs/hosts.md): the
postmaster tree's counters parsed from the host's /proc, postgres's argv there (as the postgres
user when the ssh user is root), its postgresql.conf (the host's address only, the cell's socket
directory), and the host's tools found in postgresql-15's bin directory, off the PATH."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from perflab import servers
from perflab.hosts.target import parse_target
from perflab import workloads
from perflab.hosts import target
from perflab.places.procfs import ProcCounters
from perflab.hosts import home
from perflab.hosts.place import parse_tree
from perflab.servers.postgresql import KIND


def RemotePostgreSQL(place: SimpleNamespace, datadir: str, options: dict, **kw: object) -> Any:  # noqa: N802
    return KIND.remote_server(place, datadir, options, **kw)  # type: ignore[arg-type]

TICK = "100\n"
POSTMASTER = "4711 (postgres) S 1 4711 4711 0 -1 4194560 900 0 7 0 250 75 300 100 20 0 1 0 1234 0 0\n"
BACKEND = "4720 (postgres) S 4711 4711 4711 0 -1 4194560 50 0 1 0 40 10 0 0 20 0 1 0 1300 0 0\n"
SWITCHES = "voluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t2\n"


def test_the_tree_counts_every_backend_and_those_the_postmaster_reaped() -> None:
    text = POSTMASTER + TICK + SWITCHES + ".\n" + BACKEND + TICK + SWITCHES + ".\n"
    # postmaster 2.5 + 0.75 s, its reaped children 3.0 + 1.0 s, the live backend 0.4 + 0.1 s
    assert parse_tree(text) == ProcCounters(5.9, 1.85, 950, 8, 20, 4)
    assert parse_tree(POSTMASTER + TICK + ".\n").user_s == 5.5  # no thread status read: no switches
    with pytest.raises(ProcessLookupError):
        parse_tree("")


def _place(user: str) -> SimpleNamespace:
    link = SimpleNamespace(target=parse_target(f"{user}@10.77.1.2"), name="db", run=lambda *a, **k: None)
    return SimpleNamespace(
        name="db",
        link=link,
        rundir=SimpleNamespace(path="/dev/shm/perflab-host-abc"),
        address="10.77.1.2",
        free_port=lambda: 23456,
        binaries={"postgres": "/usr/lib/postgresql/15/bin/postgres", "psql": "/usr/lib/postgresql/15/bin/psql"},
        program="/usr/lib/postgresql/15/bin/postgres",  # the host's installed server (ServerHost.program)
    )


def _started(server: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The argv the server's start runs there (through the run directory's wrapper)."""
    started: list[list[str]] = []
    monkeypatch.setattr(home, "Tracked", lambda rundir, argv, measured=False: started.append(argv))
    server.place = server.home.place
    server.home.link.run = lambda *a, **k: SimpleNamespace(status=0, stdout="", stderr="")
    monkeypatch.setattr(type(server), "_wait_ready", lambda self, deadline: None)
    monkeypatch.setattr(type(server), "pid", 4711)
    server.start()
    return started[0]


def test_postgres_runs_as_the_postgres_user_when_the_ssh_user_is_root(tmp_path: Path, monkeypatch) -> None:
    server = RemotePostgreSQL(_place("root"), "/dev/shm/perflab-host-abc/cell-0002/data", {}, local=tmp_path / "cell-0002",
                              env={"A": "1"})  # fmt: skip
    argv = _started(server, monkeypatch)
    assert argv[:4] == ["sh", "-c", argv[2], "/dev/shm/perflab-host-abc/cell-0002/postgres.log"]
    tail = ["/usr/lib/postgresql/15/bin/postgres", "-D", "/dev/shm/perflab-host-abc/cell-0002/data",
            "-c", "config_file=/dev/shm/perflab-host-abc/cell-0002/postgresql.conf"]  # fmt: skip
    assert argv[4:] == ["env", "A=1", "setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", *tail]
    bench = RemotePostgreSQL(_place("bench"), "/d/cell-0001/data", {}, local=tmp_path / "cell-0001")
    bench.aslr = False
    assert _started(bench, monkeypatch)[4:] == ["env", "setarch", "-R", "/usr/lib/postgresql/15/bin/postgres", "-D",
                                "/d/cell-0001/data", "-c", "config_file=/dev/shm/perflab-host-abc/cell-0001/postgresql.conf"]  # fmt: skip
    assert bench.client_target == ("10.77.1.2", 23456, "perflab")


def test_its_configuration_listens_on_the_hosts_address_only(tmp_path: Path) -> None:
    sent: list[tuple[list[str], str | None]] = []
    place = _place("root")
    place.link.run = lambda argv, timeout=60, stdin=None: sent.append((argv, stdin))
    (tmp_path / "cell-0000").mkdir()
    server = RemotePostgreSQL(
        place, "/x/cell-0000/data", {"shared_buffers": "64MB", "port": 1}, local=tmp_path / "cell-0000"
    )
    server.write_option_file()
    conf = (tmp_path / "cell-0000" / "postgresql.conf").read_text()
    assert "listen_addresses = '10.77.1.2'" in conf and "port = '23456'" in conf and "port = '1'" not in conf
    assert (
        "unix_socket_directories = '/dev/shm/perflab-host-abc/cell-0000'" in conf and "shared_buffers = '64MB'" in conf
    )
    assert "hba_file = '/dev/shm/perflab-host-abc/cell-0000/pg_hba.conf'" in conf
    write = ["sh", "-c", 'mkdir -p "${0%/*}" && cat > "$0"']
    assert sent[0] == ([*write, "/dev/shm/perflab-host-abc/cell-0000/postgresql.conf"], conf)
    # who may log in: the ssh user (root) and postgres by peer on the socket, the run's role by password
    files = dict((argv[-1].rsplit("/", 1)[1], text) for argv, text in sent[1:])
    assert files["pg_hba.conf"].splitlines()[1:] == ["local all all peer map=perflab", "host all perflab all scram-sha-256"]
    assert files["pg_ident.conf"].splitlines()[1:] == ["perflab root postgres", "perflab postgres postgres"]


def test_the_hosts_postgres_is_found_off_the_path() -> None:
    kind = servers.kind("postgresql")
    assert kind.server_packages["postgres"] == "postgresql-15"
    found = subprocess.run(["sh", "-c", target.WHICH, "postgres", *kind.server_dirs], capture_output=True,
                           text=True, env={"PATH": "/usr/bin:/bin"}, check=False)  # fmt: skip
    assert found.stdout.strip() == "/usr/lib/postgresql/15/bin/postgres"
    missing = subprocess.run(["sh", "-c", target.WHICH, "postgres", "/nonexistent"], capture_output=True,
                             text=True, env={"PATH": "/usr/bin:/bin"}, check=False)  # fmt: skip
    assert missing.stdout.strip() == ""


def test_a_host_without_postgres_names_the_package_to_install_there(monkeypatch: pytest.MonkeyPatch) -> None:
    from perflab import spec
    from perflab.hosts import preflight
    from perflab.hosts.transport import Completed

    asked: list[list[str]] = []

    def run(argv: list[str], **kw: object) -> Completed:
        asked.append(argv)
        return Completed(status=1, stdout="", stderr="")

    link = SimpleNamespace(run=run, close=lambda: None)
    monkeypatch.setattr(preflight.Connection, "open", classmethod(lambda cls, name, target: link))
    exp = spec.parse(
        '[experiment]\nname = "pg"\nserver = "postgresql"\nserver_host = "db"\n[hosts.db]\nssh = "root@10.77.1.2"\n'
        '[dataset]\ntables = 1\ntable_size = 1000\n[workload]\ntest = "oltp_point_select"\nthreads = [2]\n'
    )
    kind, packages = servers.kind("postgresql"), workloads.of(exp.file).client_packages
    found = preflight.host_problems(exp.file, packages, kind.server_packages, kind.server_dirs)
    assert [p.path for p in found] == ["hosts.db"] * 3
    assert "postgres installed on host db" in found[0].render() and "apt-get install postgresql-15" in found[0].render()
    assert "apt-get install postgresql-client-15" in found[2].render()
    assert asked[0][3:] == ["postgres", "/usr/lib/postgresql/15/bin"]  # its bin directory first, then the PATH


def test_pgbench_here_reaches_the_hosts_address_with_the_password_in_a_passfile(tmp_path: Path) -> None:
    import stat

    from perflab import spec
    from perflab.workloads.pgbench import cell_argv
    from perflab.workloads.pgbench_argv import passfile

    server = RemotePostgreSQL(_place("root"), "/d/cell-0000/data", {}, local=tmp_path)
    exp = spec.parse(
        '[experiment]\nname = "pg"\nserver = "postgresql"\nserver_host = "db"\n[hosts.db]\nssh = "root@10.77.1.2"\n'
        '[dataset]\nscale = 1\n[workload]\ntool = "pgbench"\ntest = "select-only"\nthreads = [2]\n'
    )
    argv = cell_argv(exp.file, exp.cells()[0], server, 62, 2)
    assert argv[1:7] == ["-h", "10.77.1.2", "-p", "23456", "-U", "perflab"] and argv[-1] == "bench"
    assert f"--log-prefix={tmp_path}/pgbench_log" in argv  # its log is this machine's, cut at perflab's marks
    path = passfile(server, "0123abcd")
    assert path.read_text() == "10.77.1.2:23456:*:perflab:0123abcd\n" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not any("0123abcd" in a for a in argv)


def test_the_run_directorys_removal_releases_the_segments_recorded_there(tmp_path: Path) -> None:
    import ctypes
    import secrets

    from perflab.hosts import rundir

    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x50000000 + secrets.randbelow(1 << 24)
    shmid = libc.shmget(key, 64, 0o1000 | 0o600)  # IPC_CREAT: the test's own segment
    assert shmid >= 0, ctypes.get_errno()
    try:
        other = libc.shmget(key + 1, 64, 0o1000 | 0o600)
        # the first line's id has another key now (reused): left alone; the second is released
        (tmp_path / "shm").write_text(f"{key + 7} {other}\n{key} {shmid}\n")
        done = subprocess.run(["sh", "-c", rundir._RELEASE, str(tmp_path)], capture_output=True, text=True, check=True)
        assert done.stdout.split() == [str(shmid)]
        assert libc.shmctl(shmid, 2, ctypes.create_string_buffer(256)) != 0  # IPC_STAT: gone
        assert libc.shmctl(other, 2, ctypes.create_string_buffer(256)) == 0
    finally:
        libc.shmctl(shmid, 0, None)
        libc.shmctl(other, 0, None)  # IPC_RMID


def test_the_loader_here_reads_the_login_from_a_file_only_its_owner_reads(tmp_path: Path) -> None:
    import stat

    from perflab import spec
    from perflab.workloads import get

    server = RemotePostgreSQL(_place("root"), "/d/snapshot", {}, local=tmp_path)
    exp = spec.parse(
        '[experiment]\nname = "pg"\nserver = "postgresql"\nserver_host = "db"\n[hosts.db]\nssh = "root@10.77.1.2"\n'
        '[dataset]\ntables = 1\ntable_size = 1000\n[workload]\ntest = "oltp_point_select"\nthreads = [2]\n'
    )
    login = {"db-driver": "pgsql", "pgsql-host": "10.77.1.2", "pgsql-password": "0123abcd"}
    argv, _ = get("sysbench").remote_prepare_argv(exp.file, server, login, "0123abcd")
    conf = tmp_path / "sysbench-prepare.conf"
    assert argv[2:4] == ["--db-driver=pgsql", f"--config-file={conf}"] and argv[-1] == "prepare"
    assert conf.read_text() == "pgsql-host=10.77.1.2\npgsql-password=0123abcd\n"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600 and not any("0123abcd" in a for a in argv)
    argv, env = get("pgbench").remote_prepare_argv(exp.file, server, login, "0123abcd")
    assert argv[1:7] == ["-h", "10.77.1.2", "-p", "23456", "-U", "perflab"] and "-i" in argv
    assert env["PGPASSFILE"] == str(tmp_path / "pgpass") and not any("0123abcd" in a for a in argv)


def test_initdb_on_the_host_runs_as_the_postgres_user_in_a_directory_it_owns() -> None:
    ran: list[list[str]] = []
    place = _place("root")
    place.binaries["initdb"] = "/usr/lib/postgresql/15/bin/initdb"
    place.link.run = lambda argv, timeout=60: ran.append(argv) or SimpleNamespace(status=0, stdout="", stderr="")
    assert KIND.remote_init(place, "/dev/shm/perflab-host-abc/snapshot") == "initdb"  # type: ignore[arg-type]
    (argv,) = ran
    assert argv[3:6] == ["/dev/shm/perflab-host-abc/snapshot", "postgres", "-"]
    assert argv[6:] == ["/usr/lib/postgresql/15/bin/initdb", "-D", "/dev/shm/perflab-host-abc/snapshot", "-U",
                        "postgres", "--auth-local=peer", "--auth-host=reject", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8"]  # fmt: skip


def test_the_init_script_makes_the_datadir_and_runs_the_tool_there(tmp_path: Path) -> None:
    from perflab.hosts.home import _INIT

    datadir = tmp_path / "run" / "snapshot"
    datadir.parent.mkdir()
    done = subprocess.run(["sh", "-c", _INIT, str(datadir), "", "-", "sh", "-c", "pwd; ls -ld snapshot"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0] == str(datadir.parent) and lines[1].startswith("drwx------")


def test_prepare_on_is_for_a_server_host_only() -> None:
    from perflab import spec
    from perflab.errors import SpecError

    base = (
        '[experiment]\nname = "x"\n{}\n[hosts.db]\nssh = "root@10.77.1.2"\n[dataset]\ntables = 1\ntable_size = 1000\n'
    )
    assert spec.parse(base.format('server_host = "db"')).file.experiment.prepare_on == "host"
    assert spec.parse(base.format('server_host = "db"\nprepare_on = "here"')).file.experiment.prepare_on == "here"
    with pytest.raises(SpecError) as exc:
        spec.parse(base.format('prepare_on = "here"'))
    assert [p.path for p in exc.value.problems] == ["experiment.prepare_on"]


def test_a_segment_is_released_or_recorded_only_when_the_postmaster_made_it(tmp_path: Path) -> None:
    """postmaster.pid is the server's account's file: the segment it names is taken only when the
    kernel's table says the postmaster (here: this test's process, its creator) made it (issue 48)."""
    import ctypes
    import os
    import secrets

    from perflab.hosts.home import _RECORD, _RELEASE

    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x51000000 + secrets.randbelow(1 << 24)
    shmid = libc.shmget(key, 64, 0o1000 | 0o600)  # IPC_CREAT: made by this process
    assert shmid >= 0, ctypes.get_errno()
    try:
        (tmp_path / "postmaster.pid").write_text(f"{os.getpid()}\n/x\n0\n5432\n/tmp\n*\n {key} {shmid}\nready\n")
        exists = lambda: libc.shmctl(shmid, 2, ctypes.create_string_buffer(256)) == 0  # noqa: E731  # IPC_STAT
        for script in (_RECORD, _RELEASE):  # another pid named as the postmaster: nothing recorded, nothing removed
            subprocess.run(["sh", "-c", script, str(tmp_path), "1", str(tmp_path)], check=True)
        assert exists() and not (tmp_path / "shm").exists()
        subprocess.run(["sh", "-c", _RECORD, str(tmp_path), str(os.getpid()), str(tmp_path)], check=True)
        assert (tmp_path / "shm").read_text() == f"{key} {shmid}\n"
        subprocess.run(["sh", "-c", _RELEASE, str(tmp_path), str(os.getpid()), ""], check=True)
        assert not exists()
    finally:
        libc.shmctl(shmid, 0, None)  # IPC_RMID
