"""pgbench on a client host without a network (workloads/pgbench_argv.py and pgbench_log.py, hosts/client.py):
its argv there (the same options as here, its password in a passfile only), a missing pgbench naming
its package, its log fetched back and cut at this machine's marks put on the host's clock, and the
alarm that ends pgbench there and not its wrapper (run here)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from perflab import spec
from perflab.errors import ToolMissingError
from perflab.hosts.clock import Alignment
from perflab.hosts.rundir import RunDir
from perflab.hosts.transport import Completed
from perflab import workloads
from perflab.hosts import target
from perflab.hosts.child import _SIGNAL_CHILD, times_cpu_s
from perflab.hosts.client import ClientOnHost, RemoteClient
from perflab.workloads.pgbench_log import intervals, load_log, window_summary
from perflab.workloads import pgbench_argv, pgbench_log

RUNDIR = "/dev/shm/perflab-host-k2j4x1"
PASSWORD = "0123456789abcdef0123456789abcdef"
EXPERIMENT = """
[experiment]
name = "pg-remote"
duration = "2s"
warmup = 0
repeats = 1
server = "postgresql"
client_host = "load"
[hosts.load]
ssh = "root@10.77.1.2"
[dataset]
scale = 1
[workload]
tool = "pgbench"
test = "{test}"
threads = [2]
options = {{ max_tries = 3 }}
"""


class FakeLink:
    """What the client host answers: each command's (argv, stdin) kept; `answers` by the command's first word."""

    name, target = "load", "root@10.77.1.2"

    def __init__(self, answers: dict[str, str] | None = None, files: dict[str, str] | None = None) -> None:
        self.answers, self.files = answers or {}, files or {}
        self.ran: list[tuple[list[str], str | None]] = []
        self.put_calls: list[tuple[Path, str]] = []

    def run(self, argv: list[str], timeout: float = 60, stdin: str | None = None) -> Completed:
        self.ran.append((argv, stdin))
        key = argv[2] if argv[:2] == ["sh", "-c"] else argv[0]
        return Completed(0, self.answers.get(key, ""), "")

    def put(self, local: Path, remote: str) -> None:
        self.put_calls.append((local, remote))

    def get(self, remote: str, local: Path) -> None:
        local.write_text(self.files[remote], encoding="ascii")

    def local_address(self) -> str:
        return "10.77.1.1"


class FakeHosts:
    def __init__(self, link: FakeLink) -> None:
        self.link_, self.targets = link, {"load": "root@10.77.1.2"}

    def link(self, name: str) -> FakeLink:
        return self.link_

    def rundir(self, name: str) -> RunDir:
        return RunDir(self.link_, RUNDIR)  # type: ignore[arg-type]


def _remote(link: FakeLink) -> RemoteClient:
    binary = "/usr/lib/postgresql/15/bin/pgbench"
    return RemoteClient(FakeHosts(link), "load", "10.77.1.1", PASSWORD, binary, "eth0")  # type: ignore[arg-type]


def _login() -> dict[str, str]:
    return {"pgsql-host": "10.77.1.1", "pgsql-port": "5432", "pgsql-user": "perflab", "pgsql-password": PASSWORD}


def _runner(test: str) -> Any:
    return SimpleNamespace(exp=spec.parse(EXPERIMENT.format(test=test)))


CELL = SimpleNamespace(order=3, threads=2, workload_options={})


def test_pgbench_runs_on_the_host_with_the_options_it_has_here_its_password_in_a_passfile() -> None:
    link = FakeLink()
    argv, env, script = pgbench_argv.host_command(_runner("select-only").exp.file, CELL, None, _login(), _remote(link))
    there = f"{RUNDIR}/client-0003"
    assert env == {"PGPASSFILE": f"{there}/pgpass"}  # ClientOnHost.start runs it under `env`
    assert script is None and argv == [
        "/usr/lib/postgresql/15/bin/pgbench",
        "-h", "10.77.1.1", "-p", "5432", "-U", "perflab", "-n",
        "--client=2", "--jobs=2", "--time=62", "--progress=1",  # the window, and the tail perflab cuts
        "--log", f"--log-prefix={there}/pgbench_log",
        "--protocol=prepared", "--max-tries=3", "--builtin=select-only", "bench",
    ]  # fmt: skip
    assert PASSWORD not in " ".join(argv)
    (command, passfile), = [(a, stdin) for a, stdin in link.ran if stdin is not None]  # fmt: skip
    assert "umask 077" in command[2] and command[3] == f"{there}/pgpass"  # mode 600, its directory made
    assert passfile == f"10.77.1.1:5432:*:perflab:{PASSWORD}\n"  # libpq's passfile line


def test_a_script_of_this_machine_is_copied_there_once(tmp_path: Path) -> None:
    local = tmp_path / "point.sql"
    local.write_text("\\set aid random(1, 100000)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n")
    link = FakeLink()
    remote = _remote(link)
    for order in (0, 1):
        argv, _, script = pgbench_argv.host_command(_runner(str(local)).exp.file,
                                                      SimpleNamespace(**{**vars(CELL), "order": order}),
                                                      None, _login(), remote)  # fmt: skip
        assert script == f"{RUNDIR}/point.sql" and f"--file={RUNDIR}/point.sql" in argv
    assert link.put_calls == [(local, f"{RUNDIR}/point.sql")]


def test_a_host_without_pgbench_exits_3_naming_postgresql_client_15() -> None:
    link = FakeLink()  # _WHICH prints nothing: neither in postgresql's bin nor on the PATH
    with pytest.raises(ToolMissingError) as exc:
        RemoteClient.open(FakeHosts(link), "load", workloads.get("pgbench"))  # type: ignore[arg-type]
    assert exc.value.message == "host load has no pgbench"
    assert "apt-get install postgresql-client-15 (on root@10.77.1.2)" in exc.value.hint
    assert link.ran[0][0][3:] == ["pgbench", "/usr/lib/postgresql/15/bin"]  # looked for there first, then on the PATH
    binary = "/usr/lib/postgresql/15/bin/pgbench"
    version = "pgbench (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n"
    found = FakeLink({target.WHICH: binary + "\n", "ip": "10.77.1.1 dev eth0 src 10.77.1.2", binary: version})
    remote = RemoteClient.open(FakeHosts(found), "load", workloads.get("pgbench"))  # type: ignore[arg-type]
    assert remote.binary == binary and remote.interface == "eth0"
    assert remote.address == "10.77.1.1" and len(remote.password) == 32
    assert [binary, "--version"] in [argv for argv, _ in found.ran]  # the client found is the one asked
    # the cell's client.version: its --version line, as this machine's meta `host` records a local pgbench's
    assert remote.version == "pgbench (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"


def test_the_alarm_reaches_the_client_alone_and_its_wrapper_still_writes_times(tmp_path: Path) -> None:
    from perflab.hosts.child import _CLIENT

    times = tmp_path / "times"
    wrapper = subprocess.Popen(["bash", "-c", _CLIENT, str(times), "sleep", "30"], stdout=subprocess.DEVNULL)
    try:
        children = Path(f"/proc/{wrapper.pid}/task/{wrapper.pid}/children")
        deadline = time.monotonic() + 10
        while not children.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.01)
        subprocess.run(["sh", "-c", _SIGNAL_CHILD, str(wrapper.pid), "ALRM"], check=True)
        assert wrapper.wait(timeout=10) == 128 + 14  # sleep ended by SIGALRM; bash went on to `times`
    finally:
        wrapper.kill()
    assert times_cpu_s(times.read_text()) is not None


def _log(host_epoch: float) -> str:
    """A pgbench log of one transaction every 10 ms for 3 s from `host_epoch` (the host's clock), 1 ms each,
    each ending 5 ms off a 10 ms step (none on a second's boundary)."""
    lines = []
    for n in range(300):
        at = host_epoch + 0.005 + 0.01 * n
        lines.append(f"0 {n + 1} 1000 0 {int(at)} {round((at - int(at)) * 1e6)} 0")
    return "\n".join(lines) + "\n"


def test_the_log_is_fetched_and_cut_at_this_machines_marks_on_the_hosts_clock(tmp_path: Path) -> None:
    here = 1_795_389_218.0  # this machine's time.time() at pgbench's launch
    ahead = 5.0  # the host's clock runs 5 s ahead: its log's times are 5 s later than this machine's
    there = f"{RUNDIR}/client-0003"
    files = {f"{there}/pgbench_log.77": _log(here + ahead), f"{there}/pgbench_log.77.1": _log(here + ahead)}
    link = FakeLink({pgbench_log._LOGS: "\n".join(files) + "\n"}, files)
    fetched = pgbench_log.fetch_log(_remote(link), CELL, tmp_path)
    assert sorted(p.name for p in fetched) == ["pgbench_log.77", "pgbench_log.77.1"]
    assert link.ran[-1][0] == ["rm", "-rf", "--one-file-system", there]  # its directory there, once fetched
    end = ClientOnHost.__new__(ClientOnHost)
    end.alignment = Alignment("load", -ahead, 0.0002, 0.0)  # shift: what puts the host's times on this clock
    launched, window = end.on_its_clock(here, (here + 1.0, here + 3.0))
    assert launched == here + ahead and window == (here + ahead + 1.0, here + ahead + 3.0)
    log = load_log(tmp_path / "pgbench_log")
    summary = window_summary(log, window, 1)
    assert summary is not None and summary.transactions == 2 * 200 and summary.latency_ms["p95"] == 1.0
    seconds = intervals(log, launched, window[1], 1, 0)
    assert [s["tps"] for s in seconds] == [200.0, 200.0, 200.0]  # seconds from the launch, on the host's clock
    unshifted = window_summary(log, (here + 1.0, here + 3.0), 1)  # cut on this machine's clock: none inside
    assert unshifted is None


def test_the_preflight_looks_for_pgbench_on_the_client_host(monkeypatch: pytest.MonkeyPatch) -> None:
    from perflab import preflight
    from perflab.errors import EnvironmentProblem
    from perflab.hosts import preflight as host_preflight

    asked: list[list[str]] = []

    def run(argv: list[str], **kw: object) -> Completed:
        asked.append(argv)
        return Completed(status=1, stdout="", stderr="")  # no such tool there

    link = SimpleNamespace(run=run, close=lambda: None)
    monkeypatch.setattr(host_preflight.Connection, "open", classmethod(lambda cls, name, target: link))
    with pytest.raises(EnvironmentProblem) as exc:  # exit 3, before any results directory
        preflight.check(spec.parse(EXPERIMENT.format(test="select-only")))
    found = [p.render() for p in exc.value.problems if p.path == "hosts.load"]
    assert len(found) == 1 and "pgbench installed on host load" in found[0], found
    assert "apt-get install postgresql-client-15 (on root@10.77.1.2)" in found[0]
    assert [a[3] for a in asked] == ["pgbench"] and "/usr/lib/postgresql/15/bin" in asked[0][4:]
