"""go-tpc v1.0.12 on PostgreSQL (issue 50): its postgres driver through the cell server's unix
socket as the superuser, no TCP and no password; the version perflab needs, read from the
binary's Go build information; which servers a go-tpc cell makes listen on 127.0.0.1; a --wait
run (TPC-C's keying and think times) ended after its time."""

from __future__ import annotations

import re
import time
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qsl

import pytest

from perflab import servers
from perflab.errors import ToolMissingError
from perflab.workloads import gotpc, tpcc

BINARY = "/usr/local/bin/go-tpc"


@pytest.fixture
def binary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gotpc, "go_tpc_binary", lambda: BINARY)


def _spec(server: str, options: dict | None = None) -> SimpleNamespace:
    return SimpleNamespace(
        experiment=SimpleNamespace(server=server), workload=SimpleNamespace(warehouses=2, options=options or {})
    )


def _flag(argv: list[str], name: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")]
    return value


def test_postgresql_is_reached_through_its_socket_as_the_superuser(binary: None) -> None:
    server = SimpleNamespace(port=5432, rundir=Path("/dev/shm/perflab-x/cell-0001"), client=lambda argv: argv)
    argv = tpcc.GO_TPC.prepare_argv(_spec("postgresql"), server)
    assert argv[:3] == [BINARY, "tpcc", "prepare"] and "--warehouses=2" in argv and argv[-1] == "--no-check=true"
    assert _flag(argv, "driver") == "postgres"
    assert argv[argv.index("-U") + 1] == "postgres" and argv[argv.index("-D") + 1] == "tpcc"
    # the URL's host empty (it sorts before the socket's directory in lib/pq's pairs), no -H/-P, no password
    assert _flag(argv, "targets") == ":5432" and "-H" not in argv and "-P" not in argv
    assert not any(a in ("-p", "--password") or a.startswith("--password") for a in argv)
    params = dict(parse_qsl(_flag(argv, "conn-params")))
    assert params == {"host": "/dev/shm/perflab-x/cell-0001", "port": "5432", "sslmode": "disable"}


def test_mariadb_keeps_tcp_to_127_0_0_1_as_tpcc(binary: None) -> None:
    argv = tpcc.GO_TPC.prepare_argv(_spec("mariadb"), SimpleNamespace(port=3307, client=lambda argv: argv))
    assert argv[3:11] == ["-H", "127.0.0.1", "-P", "3307", "-U", "tpcc", "-D", "tpcc"]
    assert not any(a.startswith(("--driver", "--targets", "--conn-params")) for a in argv)


def test_the_experiment_s_conn_params_come_after_perflab_s_and_a_path_is_quoted(binary: None) -> None:
    """lib/pq keeps a query key's first value: perflab's host, port and sslmode win over the file's."""
    cell = SimpleNamespace(threads=4, workload_options={"wait": True})
    spec = _spec("postgresql", {"conn_params": "application_name=tpcc&host=/elsewhere"})
    server = SimpleNamespace(port=5432, rundir=Path("/tmp/a b+c&d"), client=lambda argv: argv)
    argv = tpcc.GO_TPC.run_argv(spec, cell, server, 12, None)
    assert [a for a in argv if a.startswith("--conn-params")] == [
        "--conn-params=host=/tmp/a%20b%2Bc%26d&port=5432&sslmode=disable&application_name=tpcc&host=/elsewhere"
    ]
    pairs = parse_qsl(_flag(argv, "conn-params"))
    assert pairs[0] == ("host", "/tmp/a b+c&d")  # the first one, decoded as Go's url.ParseQuery does
    assert ("application_name", "tpcc") in pairs
    assert ["--time=12s", "--interval=1s", "--wait=true"] == argv[-3:]


def test_the_kinds_name_their_driver_and_only_mysql_s_listens_on_tcp() -> None:
    assert servers.kind("postgresql").gotpc_driver == "postgres" and servers.kind("postgresql").gotpc_socket
    assert servers.kind("mariadb").gotpc_driver == servers.kind("mysql").gotpc_driver == "mysql"
    assert not tpcc.GO_TPC.tcp_on(servers.kind("postgresql"))
    assert tpcc.GO_TPC.tcp_on(servers.kind("mariadb")) and tpcc.GO_TPC.tcp_on(servers.kind("mysql"))


def _go_binary(tmp_path: Path, version: str) -> str:
    """A file holding Go's build information as `go build` embeds it (what `go version -m` reads)."""
    path = tmp_path / "go-tpc"
    info = f"path\tgithub.com/pingcap/go-tpc/cmd/go-tpc\nmod\tgithub.com/pingcap/go-tpc\t{version}\th1:su+ZPX=\n"
    path.write_bytes(b"\x7fELF" + b"\0" * 4096 + info.encode() + b"dep\tgithub.com/lib/pq\tv1.10.6\n")
    return str(path)


def test_the_version_is_read_from_the_binary(tmp_path: Path) -> None:
    assert gotpc.built_version(_go_binary(tmp_path, "v1.0.12")) == "v1.0.12"
    assert gotpc.built_version(str(tmp_path / "none")) is None
    (tmp_path / "plain").write_bytes(b"no build information")
    assert gotpc.built_version(str(tmp_path / "plain")) is None


def test_an_older_go_tpc_is_a_tool_problem_naming_make(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = _go_binary(tmp_path, "v1.0.7")
    monkeypatch.setattr(gotpc, "go_tpc_binary", lambda: old)
    (problem,) = tpcc.GO_TPC.tool_problems()
    assert "v1.0.7" in problem.render() and gotpc.VERSION in problem.render() and "make go-tpc" in problem.hint
    monkeypatch.setattr(gotpc, "go_tpc_binary", lambda: _go_binary(tmp_path, gotpc.VERSION))
    assert tpcc.GO_TPC.tool_problems() == []
    assert gotpc.version() == f"go-tpc {gotpc.VERSION} (go install)"


def test_a_wait_run_is_ended_after_its_time_and_its_waits_are_not_transactions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--wait: go-tpc's clients finish their keying and think times past --time, reporting nothing
    more; perflab ends it WAIT_GRACE_S after (a real process standing for it), the run a success."""
    from perflab.places.proc import Child

    monkeypatch.setattr(tpcc, "WAIT_GRACE_S", 0.3)
    child = Child(["sh", "-c", "sleep 30", "--wait=true"])
    with child:
        assert tpcc.GO_TPC.wait(child, 0.2, 60.0) == 0
    assert child.poll() is not None and time.monotonic() - child.started < 10
    quick = Child(["sh", "-c", "exit 3"])
    with quick:
        assert tpcc.GO_TPC.wait(quick, 0.2, 60.0) == 3  # without --wait: its own exit, as any client's
    text = (Path(__file__).resolve().parents[1] / "data" / "gotpc" / "run-pg-wait.txt").read_text()
    ticks = gotpc.parse_ticks(text)
    assert ticks and all(not op.startswith(("KEYINGTIME", "THINKINGTIME")) for t in ticks for op in t.reports)
    counted = sum(t.reports["NEW_ORDER"].count for t in ticks if "NEW_ORDER" in t.reports)
    assert counted == sum(int(n) for n in re.findall(r"\[Current\] NEW_ORDER - .*?Count: (\d+)", text)) > 0


def test_on_hosts_the_run_role_logs_in_over_tcp_its_password_in_a_passfile(binary, tmp_path: Path) -> None:
    """docs/hosts.md#go-tpc-on-hosts: the URL's password is empty (lib/pq then reads PGPASSFILE)."""
    login = {"pgsql-host": "10.0.0.2", "pgsql-port": "5432", "pgsql-user": "perflab", "pgsql-password": "ab" * 16}
    server = SimpleNamespace(rundir=tmp_path, client_target=("10.0.0.2", 5432, "perflab"))
    cell = SimpleNamespace(threads=4, workload_options={})
    spec = SimpleNamespace(workload=SimpleNamespace(warehouses=1, options={"conn_params": "connect_timeout=5"}))
    argv, env = tpcc.GO_TPC.login_command(spec, cell, server, login, 10)
    assert argv[:3] == [BINARY, "tpcc", "run"] and "--targets=10.0.0.2:5432" in argv and "perflab" in argv
    assert "--conn-params=sslmode=disable&connect_timeout=5" in argv and login["pgsql-password"] not in " ".join(argv)
    passfile = Path(env["PGPASSFILE"])
    assert passfile.read_text() == f"10.0.0.2:5432:*:perflab:{'ab' * 16}\n" and passfile.stat().st_mode & 0o077 == 0
    assert gotpc.login_connection("fd00::2", 5432, "perflab")[1] == "--targets=[fd00::2]:5432"


def test_on_hosts_go_tpc_drives_postgresql_only_and_its_version_there_is_checked() -> None:
    assert tpcc.GO_TPC.host_refusal(servers.kind("postgresql")) is None
    refusal = tpcc.GO_TPC.host_refusal(servers.kind("mariadb"))
    assert refusal is not None and "--password" in refusal and "PGPASSFILE" in refusal

    def link(found: str) -> SimpleNamespace:
        return SimpleNamespace(name="load", run=lambda argv: SimpleNamespace(stdout=found, status=0))

    built = "mod\tgithub.com/pingcap/go-tpc\tv1.0.12\n"
    assert tpcc.GO_TPC.host_version(link(built), BINARY) == "go-tpc v1.0.12 (go install)"
    with pytest.raises(ToolMissingError) as exc:  # v1.0.7: no postgres driver, other flags
        tpcc.GO_TPC.host_version(link(built.replace("v1.0.12", "v1.0.7")), BINARY)
    assert "go-tpc v1.0.7, not v1.0.12" in exc.value.message and "go install" in exc.value.hint
    with pytest.raises(ToolMissingError):  # another build (no module information)
        tpcc.GO_TPC.host_version(link(""), BINARY)
