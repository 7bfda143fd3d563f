"""A MariaDB server on another host (`server_host`, docs/hosts.md), the host being a network namespace
with its own sshd (sshhosts.py): the dataset is copied there, each cell's mariadbd runs there on the
host's address only, the client here (or on that host) reaches it over the veth, the server's
resources are read there, each cell records where its server ran, and nothing is left on the host,
after a run or after a SIGKILL and `perflab doctor --clean`."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from perflab.store import folded
from tests.integration.helpers import sysbench_started, used, wait_for, write_experiment
from tests.integration.sshhosts import (
    ROOT, SshLab, check_client_profile, check_pgbench_seat, namespace_commands, perflab_via, run_pg_seats,
)  # fmt: skip


@pytest.fixture
def disk() -> Iterator[Path]:
    """A directory on disk the lab's host shares with this machine, searchable by every account:
    the server there runs as mysql (issue 48), which must reach its datadir below it."""
    path = Path(tempfile.mkdtemp(prefix="plrs-", dir="/var/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)

EXPERIMENT = """
[experiment]
name = "it-server-host"
duration = "2s"
warmup = "1s"
repeats = 1
server_host = "db"
{more}
[hosts.db]
ssh = "{ssh}"

[dataset]
tables = 1
table_size = 2000

[workload]
test = "oltp_point_select"
threads = [2]

[variants.log]
OFF = {{}}
"""


def test_a_server_on_another_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    db = ssh_lab.hosts["db"]
    body = EXPERIMENT.format(ssh=db.ssh, more="") + "[observe]\nstatus = true\n"  # read from here over TCP
    spec = write_experiment(tmp_path / "server.toml", body)
    out = tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "server on host db" in done.stdout, done.stdout
    said = " ".join(done.stdout.split())  # the terminal's wrapping undone
    assert re.search(r"perflab's own CPU there [^;]*% over the run \([\d.]+ s in \d+ s\)", said), said
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    (cell,) = used(exported["cells"])
    assert cell["status"] == "ok" and cell["summary"]["transactions"] > 0, cell.get("error")
    host = cell["build"]["host"]
    assert host["name"] == "db" and host["address"] == db.address and host["fingerprint"]["kernel"]
    assert cell["client"]["address"] == db.address
    resources = cell["resources"]  # read in the host's /proc
    assert resources["server_cpu_s"] > 0 and resources["rss_end_bytes"] > 50 << 20, resources
    assert resources["restore_method"] == "copy" and resources["server_start_s"] > 0
    assert exported["datasets"]["mariadb-10.11"]["init"] == "mariadb-install-db on host db"  # prepared there
    per_txn = cell["status_per_txn"]  # the host's server's own counters, as the run's user over TCP
    assert 0.9 < per_txn["Com_select"] < 1.1 and cell["status_gauges"]["Threads_connected"] >= 2, per_txn
    assert f"bind-address={db.address}\n" in (out / "logs" / "cell-0000" / "my.cnf").read_text()
    log = (out / "logs" / "cell-0000" / "error.log").read_text()  # fetched back from the host
    assert f"Server socket created on IP: '{db.address}'" in log and "IP: '0.0.0.0'" not in log
    options = cell["sysbench_options"]  # the password is in a file readable by its owner only
    assert not options.get("mysql_password") and options["config_file"].endswith("sysbench.conf")
    assert "libc.so" in cell["allocator_library"] and cell["allocator_version"].startswith("glibc ")
    assert cell["build"]["binary"].endswith("/mariadbd") and "MariaDB" in cell["build"]["version"]
    assert namespace_commands(ssh_lab, "db") == ["sshd"]  # nothing the run started is left on the host
    assert not Path(exported["hosts"]["hosts"]["db"]["dir"]).exists()
    html = perflab_via(ssh_lab, tmp_path, "report", str(out), "--html")
    assert html.returncode == 0, html.stdout + html.stderr
    assert f'<ul id="remote-hosts"><li>server on host db ({db.ssh})' in (out / "report.html").read_text()


def test_interleaved_turns_with_the_servers_on_their_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    """design = "interleaved" with server_host: every seat's server there (restored, started, proven
    there), its client here taking turns (SIGSTOP, SIGCONT), its counters over TCP from here and its
    CPU read there, each cell's use over its own turns; one `perf record -a` there for the group, each
    seat's server profiled from it over its own turns (observers/seats.py on the host's place), its
    client from a recording of the clients here, and
    each seat's allocation counter there, over its own turns' transactions."""
    db = ssh_lab.hosts["db"]
    body = EXPERIMENT.format(ssh=db.ssh, more='design = "interleaved"').replace('duration = "2s"', 'duration = "4s"')
    body += '[variants.alloc]\nglibc = {}\njemalloc = { preload = "jemalloc" }\n[observe]\nstatus = true\n'
    body += 'perf = { frequency = 999, targets = ["server", "client"] }\nalloc = { period = "4K" }\n'
    spec, out = write_experiment(tmp_path / "turns.toml", body), tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    cells = {c["variant"]["alloc"]: c for c in used(exported["cells"])}
    assert all(c["status"] == "ok" for c in cells.values()), [c.get("error") for c in cells.values()]
    assert exported["experiment"]["design"] == "interleaved"
    turns = {c["design"]["turn"] for c in cells.values()}
    assert turns == {0, 1} and all(c["design"]["name"] == "interleaved" for c in cells.values())
    for alloc, cell in cells.items():
        assert cell["build"]["host"]["name"] == "db" and cell["summary"]["transactions"] > 0
        assert cell["client"]["address"] == db.address, cell["client"]  # where it reached its server, as a sequential row
        assert 3.5 <= cell["design"]["active_s"] <= 8, cell["design"]  # its own seconds: warm-up and window
        resources = cell["resources"]  # the server's there, over its own turns
        assert resources["server_cpu_s"] > 0 and resources["rss_end_bytes"] > 50 << 20, resources
        assert 0.9 <= cell["status_per_txn"]["Com_select"] <= 1.1, cell["status_per_txn"]  # over TCP from here
        counted = cell["alloc"]  # its own server's counter there, per transaction of its own turns
        assert counted["transactions"] == cell["summary"]["transactions"] and counted["window_share"] == 1.0, counted
        # one operator new a point select (64-128 bytes; 1.00 on 2026-11-30): its own server's calls over
        # its own turns' transactions (over both seats' it would be 2, over the group's seconds ~0.5)
        assert 0.9 <= counted["calls_per_txn"]["new"] <= 1.1, counted
        (stacks,) = [p for p in cell["profiles"] if p["source"] == "alloc"]
        meta = folded.read_meta(out / stacks["path"])
        assert stacks["samples"] > 0 and meta["binary"].startswith("db:") and meta["binary"].endswith("/mariadbd"), meta
    jemalloc = cells["jemalloc"]["allocator_library"]  # the host's own, mapped there
    assert "libjemalloc" in jemalloc and "libc.so" in cells["glibc"]["allocator_library"]
    pids: dict[str, set] = {"server": set(), "client": set()}
    for cell in cells.values():  # its own server's samples (there) and client's (here), over its own turns
        for target, binary in (("server", "/mariadbd"), ("client", "/sysbench")):
            (prof,) = [p for p in cell["profiles"] if (p["source"], p["phase"], p["target"]) == ("perf", "measured", target)]
            assert prof["samples"] >= 5, prof  # a paced client: ~0.1 core
            assert 1.5 <= prof["seconds"] <= 8, prof
            assert prof["transactions"] == pytest.approx(cell["summary"]["transactions"], rel=0.2), prof
            meta = folded.read_meta(out / prof["path"])
            assert meta["binary"].endswith(binary) and binary[1:] in meta["dsos"].values(), meta["binary"]
            assert meta["binary"].startswith("db:") == (target == "server"), meta["binary"]  # where each ran
            pids[target].add(meta["pid"])
    assert len(pids["server"]) == len(pids["client"]) == 2  # each seat's own server and client
    assert namespace_commands(ssh_lab, "db") == ["sshd"]


def test_postgresql_seats_take_turns_on_their_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    """design = "interleaved" with a PostgreSQL server_host: each seat's postmaster there, its sysbench
    here taking turns, its transactions counted by the client itself (turns.lua: PostgreSQL's own counts
    come too late for a turn), its tree's CPU and memory read there; the group's perf there, each seat's
    profile its postmaster's tree (its backends' samples: none before 2026-11-29, here or there), and its
    tree's allocation counter there."""
    db = ssh_lab.hosts["db"]
    body = EXPERIMENT.format(ssh=db.ssh, more='design = "interleaved"\nserver = "postgresql"')
    body += '[observe]\nperf = { frequency = 999 }\nalloc = { period = "64K" }\n'
    body += '[server_options]\nautovacuum = "off"\n'  # a worker forked in a turn would add its mallocs
    out, cells = run_pg_seats(ssh_lab, tmpfs("shm", "1G"), tmp_path, body)
    for cell in cells.values():
        assert cell["build"]["host"]["name"] == "db" and cell["summary"]["transactions"] > 0, cell.get("error")
        assert cell["resources"]["server_cpu_s"] > 0 and cell["resources"]["rss_end_bytes"] > 10 << 20, cell["resources"]
        assert cell["server_options"]["shared_buffers"] == cell["variant"]["sb"]
        (prof,) = [p for p in cell["profiles"] if (p["source"], p["phase"]) == ("perf", "measured")]
        meta = folded.read_meta(out / prof["path"])
        assert prof["samples"] >= 20 and len(meta["processes"]) >= 1 + 2, (prof, meta["processes"])  # backends
        assert any("PostgresMain" in stack.split(";") for stack in folded.read(out / prof["path"])), prof["top"]
        counted = cell["alloc"]  # its postmaster's tree's counter there, over its own turns
        assert counted["transactions"] == cell["summary"]["transactions"] and counted["threads"] >= 2, counted
        assert counted["threads_started"] == 0, counted  # sysbench connected before the first turn
        # sysbench's point select: two mallocs a transaction in a backend (2.00 on 2026-11-30), counted
        # over its own turns (the group's would double it)
        assert 1.8 <= counted["calls_per_txn"]["malloc"] <= 2.2, counted
        (stacks,) = [p for p in cell["profiles"] if p["source"] == "alloc"]
        assert stacks["samples"] > 0 and folded.read_meta(out / stacks["path"])["binary"].startswith("db:"), stacks
    assert namespace_commands(ssh_lab, "db") == ["sshd"]


def test_the_client_on_the_server_host_too(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    db = ssh_lab.hosts["db"]
    more = 'client_host = "db"\nprepare_on = "here"'  # the dataset prepared here, its snapshot copied over SFTP
    # perf of both, each on the host: the server's recording and the client's (999 Hz: the client is paced)
    observe = '\n[observe]\nperf = { targets = ["server", "client"], frequency = 999 }\nstatus = true\n'
    body = EXPERIMENT.format(ssh=db.ssh, more=more) + observe
    spec, out = write_experiment(tmp_path / "server.toml", body), tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    (cell,) = used(exported["cells"])
    assert cell["status"] == "ok" and cell["summary"]["transactions"] > 0, cell.get("error")
    assert cell["client"]["host"] == "db" and cell["client"]["address"] == db.address
    assert cell["build"]["host"]["name"] == "db" and cell["resources"]["server_cpu_s"] > 0
    own = cell["resources"]["perflab_host_cpu"]["db"]  # sysbench and mariadbd left out: perflab's session, perf
    assert 0 <= own["cpu_s"] and own["cores"] < 0.5, (own, cell["client"]["cpu_s"])  # 10 ms ticks: 0 happens
    assert cell["build"]["host"]["clock"]["aligned"]
    perf = {p["target"]: p for p in cell["profiles"] if p["source"] == "perf" and p["phase"] == "measured"}
    assert set(perf) == {"server", "client"} and perf["server"]["samples"] > 0  # recorded on the server's host
    binaries = {t: json.loads((out / p["path"]).with_suffix(".json").read_text())["binary"] for t, p in perf.items()}
    assert binaries == {"server": "db:/usr/sbin/mariadbd", "client": "db:/usr/bin/sysbench"}, binaries
    assert perf["client"]["samples"] > 0 and cell["client"]["clock"]["aligned"]  # sysbench's, on the same host
    assert 0.9 <= cell["status_per_txn"]["Com_select"] <= 1.1  # over TCP from here
    assert exported["datasets"]["mariadb-10.11"]["init"] == "mariadb-install-db"  # here, by this machine's
    assert namespace_commands(ssh_lab, "db") == ["sshd"]


def test_the_client_here_profiled_here_beside_the_server_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    """perf and pmp naming the client, with the client here and the server on its host: sysbench
    profiled here as a local cell's client (system-wide perf here folded for its pid, its stack
    sampler here), the server there; both stored as a local cell's profiles. The client's variant
    (its preload and environment) is proven in its maps, as beside a local server."""
    db = ssh_lab.hosts["db"]
    observe = (
        '\n[observe]\nperf = { targets = ["server", "client"] }\npmp = { targets = ["client"], interval = "0.1s" }\n'
    )
    client = '[variants.client]\nje = { client_preload = "jemalloc", client_env = { MALLOC_CONF = "narenas:1" } }\n'
    body = EXPERIMENT.format(ssh=db.ssh, more="") + client + observe
    # closed loop: a paced sysbench runs a few percent of a CPU, too little for perf's 99 Hz in 2 s
    spec, out = write_experiment(tmp_path / "here.toml", body, pace=None), tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = used(json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)["cells"])
    assert cell["status"] == "ok", cell.get("error")
    mine = cell["client"]  # proven mapped into sysbench here, the server on its host
    assert mine["preload"] == "jemalloc" and "libjemalloc" in mine["preload_library"], mine
    assert mine["env"] == {"MALLOC_CONF": "narenas:1"} and mine["address"] == db.address
    refs = {(p["source"], p["target"], p["phase"]): p for p in cell["profiles"]}
    assert ("pmp", "server", "measured") not in refs  # pmp names the client only
    binary = {k: json.loads((out / r["path"]).with_suffix(".json").read_text())["binary"] for k, r in refs.items()}
    assert binary[("perf", "server", "measured")] == "db:/usr/sbin/mariadbd"  # recorded on the server's host
    for source in ("perf", "pmp"):
        ref = refs[(source, "client", "measured")]
        assert ref["samples"] > 0 and binary[(source, "client", "measured")] == shutil.which("sysbench"), ref
        check_client_profile(ssh_lab, tmp_path, out, source)  # named here
    assert refs[("perf", "server", "measured")]["samples"] > 0
    assert namespace_commands(ssh_lab, "db") == ["sshd"]


def test_sigkill_mid_run_then_doctor_clean_stops_the_remote_server(
    ssh_lab: SshLab, tmpfs, tmp_path: Path, disk: Path
) -> None:
    db = ssh_lab.hosts["db"]  # the datadirs on the host's disk (`disk`): doctor --clean removes them there too
    body = EXPERIMENT.format(ssh=db.ssh, more=f'storage = "{disk}"').replace('"2s"', '"30s"')
    spec, out, shm = write_experiment(tmp_path / "server.toml", body), tmp_path / "results", tmpfs("shm", "1G")
    env = {**ssh_lab.env(), "PERFLAB_TMPFS": str(shm)}
    run = subprocess.Popen([sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)], env=env, cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        # the window's client connected: the cell's server runs there (not `mariadbd --version` at the start)
        assert wait_for(lambda: sysbench_started(out), 120), namespace_commands(ssh_lab, "db")
    finally:
        run.kill()
        run.wait(timeout=30)
    assert "mariadbd" in namespace_commands(ssh_lab, "db")  # a killed perflab leaves its server running there
    (on_disk,) = disk.iterdir()  # and its datadirs on the host's disk
    assert on_disk.name.startswith("perflab-host-") and any(on_disk.iterdir())
    left = [Path(p["path"]) for w in shm.glob("perflab-*") for p in json.loads((w / "hosts.json").read_text())]
    assert len(left) == 1 and left[0].is_dir()
    done = subprocess.run([sys.executable, "-m", "perflab", "doctor", "--clean"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0 and f"removed db:{left[0]}" in done.stdout, done.stdout + done.stderr
    assert not left[0].exists() and list(disk.iterdir()) == []
    assert wait_for(lambda: namespace_commands(ssh_lab, "db") == ["sshd"], 10), namespace_commands(ssh_lab, "db")


def test_a_host_without_mariadbd_exits_3_naming_the_package(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    db = ssh_lab.hosts["db"]
    hidden = tmp_path / "hide"  # mariadbd hidden on the host only: its sessions get a PATH without it
    hidden.mkdir()
    for tool in ("sh", "cat", "mariadb"):
        found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True, check=False)
        (hidden / tool).symlink_to(found.stdout.strip())
    config = ssh_lab.dir / "db" / "sshd_config"
    # sshd takes the first SetEnv line: PATH goes into sshhosts.py's own
    config.write_text(config.read_text().replace("SetEnv SHLVL=1", f"SetEnv SHLVL=1 PATH={hidden}"))
    subprocess.run(["kill", "-HUP", str(db.sshd.pid)], check=True)
    spec = write_experiment(tmp_path / "server.toml", EXPERIMENT.format(ssh=db.ssh, more=""))
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(tmp_path / "results"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "hosts.db: expected mariadbd installed on host db, found not installed" in done.stderr, done.stderr
    assert "apt-get install mariadb-server" in done.stderr and not (tmp_path / "results").exists()


def test_a_server_host_that_drops_off_fails_its_cells_and_the_run_ends(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    db = ssh_lab.hosts["db"]
    body = EXPERIMENT.format(ssh=db.ssh, more="").replace("repeats = 1", "repeats = 2").replace('"2s"', '"5s"')
    spec, out = write_experiment(tmp_path / "server.toml", body), tmp_path / "results"
    env = {**ssh_lab.env(), "PERFLAB_TMPFS": str(tmpfs("shm", "1G"))}
    run = subprocess.Popen([sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)], env=env, cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        assert wait_for(lambda: sysbench_started(out), 120), "the first cell's client never started"
        db.drop()  # its sshd and every session: perflab loses the host mid-cell (its mariadbd runs on)
        text, _ = run.communicate(timeout=180)
    finally:
        run.kill()
    assert run.returncode == 1, text  # cells failed; the run itself ended normally
    cells = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)["cells"]
    assert [c["status"] for c in cells] == ["failed", "failed"]
    assert all("host db" in c["error"] for c in cells), [c["error"] for c in cells]
    assert "2 of 2 cells failed" in text
    records = [json.loads(p.read_text()) for p in Path(env["PERFLAB_TMPFS"]).glob("perflab-*/hosts.json")]
    assert [[p["name"] for p in r] for r in records] == [["db"]]  # for doctor --clean once it is back
    shutil.rmtree(records[0][0]["path"])  # the test's own cleanup: the namespace shares this filesystem


def test_perf_pmp_and_status_observe_the_server_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    db = ssh_lab.hosts["db"]
    body = EXPERIMENT.format(ssh=db.ssh, more="") + "\n[observe]\nperf = true\npmp = true\nstatus = true\n"
    spec, out = write_experiment(tmp_path / "server.toml", body), tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    (cell,) = used(exported["cells"])
    assert cell["status"] == "ok", cell.get("error")
    clock = cell["build"]["host"]["clock"]  # read at the window's start and end; both clocks are this machine's
    assert clock["aligned"] and clock["error_s"] < 0.05 and abs(clock["shift_s"]) < 0.005, clock
    assert exported["hosts"]["hosts"]["db"]["clock"]["refused"] is None
    times = [s["t"] for s in cell["rss_samples"]]  # the host's stamps on this machine's clock
    assert times == sorted(times) and 0 <= times[0] < 1.5 and times[-1] < 4, times
    window = {p["source"]: p for p in cell["profiles"] if p["phase"] == "measured"}
    assert set(window) == {"perf", "pmp"} and window["perf"]["samples"] > 0 and window["pmp"]["samples"] > 0
    assert window["pmp"]["call_graph"] == "eu-stack"
    quality = window["perf"]["quality"]  # the host's mariadbd inspected as the same file here
    assert quality["binary"] is not None and quality["stacks_complete_pct"] is not None, quality
    per_txn = cell["status_per_txn"]  # SHOW GLOBAL STATUS over TCP, with the run's login
    assert 0.9 <= per_txn["Com_select"] <= 1.1, per_txn.get("Com_select")  # oltp_point_select: one per transaction
    for source in ("perf", "pmp"):
        shown = perflab_via(
            ssh_lab, tmp_path, "profile", str(out), "--source", source, "--format", "json", "--top", "0"
        )
        assert shown.returncode == 0, shown.stderr
        rows = json.loads(shown.stdout)  # named on the host by its perf / eu-stack
        assert any(r["dso"] == "mariadbd" and r["function"] != "[unknown]" for r in rows), (source, rows[:10])
    own = cell["resources"]["perflab_host_cpu"]["db"]  # perflab's CPU there: its session, perf, the loops
    assert 0 < own["cpu_s"] and own["cores"] < 0.5, own  # perf -a and eu-stack there: never zero
    assert namespace_commands(ssh_lab, "db") == ["sshd"]  # perf and the sampler stopped with the cell
    assert not Path(exported["hosts"]["hosts"]["db"]["dir"]).exists()


def _postgres_segments() -> set[str]:
    """The System V shared memory segments the postgres user owns whose creator is gone: what a killed
    postmaster leaves. A live postmaster's is its server's, running: another module's, in parallel
    (ci19: a PostgreSQL run of another worker started during this one and was still up at its end)."""
    text = subprocess.run(["ipcs", "-m", "-p"], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in text.splitlines()]  # shmid owner cpid lpid
    return {
        r[0] for r in rows if len(r) >= 3 and r[1] == "postgres" and r[2].isdigit() and not Path(f"/proc/{r[2]}").exists()
    }


def test_a_postgresql_server_on_another_host_with_pgbench_from_here(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    db = ssh_lab.hosts["db"]
    body = EXPERIMENT.format(ssh=db.ssh, more='server = "postgresql"').replace('"1s"', "0")
    body = body.replace("tables = 1\ntable_size = 2000", "scale = 1")  # pgbench's smallest
    body = body.replace('test = "oltp_point_select"', 'tool = "pgbench"\ntest = "select-only"')
    body = body.replace('duration = "2s"', 'duration = "3s"')  # 3 ticks or more: below
    body += '\n[observe]\nperf = { frequency = 199 }\npmp = { interval = "0.25s" }\n'  # of the tree, on the host
    spec, out, shm = write_experiment(tmp_path / "pg.toml", body), tmp_path / "results", tmpfs("shm", "1G")
    shm.parent.chmod(0o755)  # the postgres user must reach the local dataset's directories
    segments = _postgres_segments()
    done = perflab_via(ssh_lab, shm, "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    (cell,) = used(exported["cells"])
    assert cell["status"] == "ok" and cell["summary"]["qps"] > 0, cell.get("error")
    assert cell["build"]["host"]["name"] == "db" and cell["build"]["binary"] == "/usr/lib/postgresql/15/bin/postgres"
    assert cell["client"]["address"] == db.address and cell["resources"]["server_cpu_s"] > 0  # the tree, on the host
    # the dataset prepared on the host by its initdb, pgbench -i from here over TCP: no snapshot here
    record = exported["datasets"]["postgresql-15"]
    assert record["init"] == "initdb on host db" and record["dir"] is None, record
    prepared = (out / "logs" / "prepare-error.log").read_text()  # the preparing server's log, fetched back
    assert f'listening on IPv4 address "{db.address}"' in prepared and not (out / "dataset").exists()
    # the run's password (32 hex digits) went to pgbench in a passfile: not in its output, options or the row
    pgbench = (out / "logs" / "cell-0000" / "pgbench.txt").read_text()
    assert cell["sysbench_options"]["builtin"] == "select-only" and "number of transactions" in pgbench, pgbench
    assert not re.search(r"\b[0-9a-f]{32}\b", pgbench + json.dumps(cell)), "the password was recorded"
    # it ran in the host's namespace: the only place where the host's address exists to listen on
    log = (out / "logs" / "cell-0000" / "error.log").read_text()
    assert f'listening on IPv4 address "{db.address}", port {cell["build"]["host"]["port"]}' in log, log
    conf = (out / "logs" / "cell-0000" / "postgresql.conf").read_text()
    assert "0.0.0.0" not in log and f"listen_addresses = '{db.address}'" in conf
    _tree_profiles(out, cell)
    _tree_rss_aligned(cell, window_s=3)
    _own_cpu_over_the_run(exported, cell, "db")
    assert namespace_commands(ssh_lab, "db") == ["sshd"]  # nothing the run started is left on the host
    assert not Path(exported["hosts"]["hosts"]["db"]["dir"]).exists()
    assert wait_for(lambda: _postgres_segments() <= segments, 5), "the postmaster's segment was left on the host"


def test_pgbench_seats_take_turns_against_their_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    """design = "interleaved" with pgbench here and PostgreSQL on host db: each seat's postmaster there,
    its pgbench here over TCP as the run's role (its password in a passfile), connected once it holds
    a socket for each client and the postmaster there has that many backends (read in the host's
    /proc), each seat's turns
    counted from its own per-transaction log here, which pgbench completes when ended as -T ends it."""
    db = ssh_lab.hosts["db"]
    body = EXPERIMENT.format(ssh=db.ssh, more='design = "interleaved"\nserver = "postgresql"')
    body = body.replace("tables = 1\ntable_size = 2000", "scale = 1")
    body = body.replace('test = "oltp_point_select"', 'tool = "pgbench"\ntest = "select-only"')
    out, cells = run_pg_seats(ssh_lab, tmpfs("shm", "1G"), tmp_path, body)
    for cell in cells.values():
        assert cell["build"]["host"]["name"] == "db" and cell["client"]["cpu_us_per_txn"] > 0, cell["client"]
        assert cell["client"]["address"] == db.address and cell["client"]["preload"] is None, cell["client"]
        assert cell["resources"]["server_cpu_s"] > 0, cell["resources"]  # the tree's, there
        check_pgbench_seat(out, cell)
    assert namespace_commands(ssh_lab, "db") == ["sshd"]


def _tree_rss_aligned(cell: dict, window_s: int) -> None:
    """The tree's RSS samples, stamped with the host's clock, put on this machine's with the window's
    readings: within the window (window_s, from its start), a second apart as stamped there."""
    clock = cell["build"]["host"]["clock"]
    assert clock["aligned"] and clock["error_s"] < 0.05 and abs(clock["shift_s"]) < 0.005, clock
    times = [s["t"] for s in cell["rss_samples"]]
    assert len(times) >= 2 and times == sorted(times) and -0.05 < times[0] < 0.5 and times[-1] < window_s + 1, times
    assert all(0.9 < b - a < 1.5 for a, b in itertools.pairwise(times[:-1])), times  # the last: the end's reading
    assert cell["resources"]["rss_end_bytes"] > 10 << 20  # the tree's, read at the window's end


def _own_cpu_over_the_run(exported: dict, cell: dict, name: str) -> None:
    """perflab's own CPU on the host: over the run (meta hosts), over the cell, over the window."""
    run = exported["hosts"]["hosts"][name]["perflab_cpu"]
    whole = cell["resources"]["perflab_host_cpu_cell"][name]
    window = cell["resources"]["perflab_host_cpu"][name]
    assert run["wall_s"] > whole["wall_s"] > 1.5 and run["measured_cpu_s"] >= whole["measured_cpu_s"] > 0, (run, whole)
    # the servers' CPU (the dataset's and the cell's) over their lives: at least the window's, 10 ms ticks aside
    assert whole["measured_cpu_s"] >= cell["resources"]["server_cpu_s"] - 0.02, (whole, cell["resources"])
    assert 0 < whole["cpu_s"] <= run["cpu_s"] and 0 < run["cores"] < 1, (run, whole)  # never 0: restores, psql
    # the window is inside the cell; outside it: the restore, the start, `perf script` there (seconds of CPU)
    assert window["cpu_s"] <= whole["cpu_s"] + 0.02, (window, whole)


def _tree_profiles(out: Path, cell: dict) -> None:
    """perf and pmp made on the host hold the postmaster's tree: pgbench's 2 backends, not only it."""
    refs = {p["source"]: p for p in cell["profiles"] if p["phase"] == "measured"}
    for source in ("perf", "pmp"):
        meta = json.loads((out / refs[source]["path"]).with_suffix(".json").read_text())
        assert meta["pid"] in meta["processes"] and len(meta["processes"]) >= 1 + 2, (source, meta["processes"])
        assert meta["binary"].startswith("db:") and refs[source]["samples"] > 0, (source, refs[source])
    ticks: dict[str, int] = {}  # per tick, the rows in a backend (PostgresMain)
    for line in (out / refs["pmp"]["path"]).with_suffix(".timed").read_text().splitlines():
        t, stack, _ = line.split(" ")
        ticks[t] = ticks.get(t, 0) + ("PostgresMain" in stack.split(";"))
    # both backends at (nearly) every tick; a tick walks ~8 processes with eu-stack on the host: 0.55 s
    # apart beside five other workers (CI 2026-11-28: 3 ticks in the 2 s window at interval 0.25 s; CI
    # 2026-11-30: 0.8 s apart, 2 ticks in 2 s, hence its 3 s window).
    # A tick is stamped when it begins: the last may reach the backends after the window's end, when
    # pgbench is told to end (ci27: ticks at 0.02, 0.41, 0.96 with both, 1.62 with none, a walk taking
    # 0.4-0.6 s there), so the backends are counted in the ticks that ended before the next began
    ended = [n for t, n in sorted(ticks.items(), key=lambda kv: float(kv[0]))][:-1]
    assert len(ended) >= 2 and sum(n >= 2 for n in ended) >= 0.8 * len(ended), ticks
    perf = (out / refs["perf"]["path"]).read_text()
    assert "PostgresMain" in perf, perf[:2000]  # the backends' on-CPU samples


def test_an_allocator_preloaded_on_the_server_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    """A variant's preload runs there: the host's own tcmalloc (its real path there), proven mapped into
    the server there, its package version as the host's dpkg says (a glibc cell's fields: the first test).
    The same for a PostgreSQL server there: the postmaster maps it (its backends inherit it)."""
    import os

    db = ssh_lab.hosts["db"]
    alloc = '[variants.alloc]\ntc = { preload = "tcmalloc" }\n'
    real = os.path.realpath("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4")  # the lab's host shares the files
    mariadb = EXPERIMENT.format(ssh=db.ssh, more="").replace('"1s"', "0") + alloc
    postgresql = EXPERIMENT.format(ssh=db.ssh, more='server = "postgresql"').replace('"1s"', "0") + alloc
    postgresql = postgresql.replace("tables = 1\ntable_size = 2000", "scale = 1")
    postgresql = postgresql.replace('test = "oltp_point_select"', 'tool = "pgbench"\ntest = "select-only"')
    shm = tmpfs("shm", "1G")
    shm.parent.chmod(0o755)  # the postgres user must reach the local dataset's directories
    for name, body in (("mariadb", mariadb), ("postgresql", postgresql)):
        out = tmp_path / name
        done = perflab_via(ssh_lab, shm, "run", str(write_experiment(tmp_path / f"{name}.toml", body)), "-o", str(out))
        assert done.returncode == 0, done.stdout + done.stderr
        cells = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)["cells"]
        (cell,) = cells
        assert cell["status"] == "ok", cell.get("error")
        assert cell["allocator_library"] == real and cell["allocator_version"].startswith("libtcmalloc-minimal4 ")
        assert namespace_commands(ssh_lab, "db") == ["sshd"]


def test_a_server_host_on_its_disk(ssh_lab: SshLab, tmpfs, tmp_path: Path, disk: Path) -> None:
    """[experiment] storage on a server host: the datadirs (the dataset prepared there, each cell's copy)
    are made in that directory there, described as the host's mountinfo says, with the page cache dropped
    there before each cell, and its block device's counters read in the host's /proc/diskstats once a
    second ([observe] io); nothing is left in it; a directory the host lacks exits 3 naming the host."""
    from perflab.run.storage import describe

    db = ssh_lab.hosts["db"]
    more = f'storage = "{disk}"\ndrop_caches = true'
    body = EXPERIMENT.format(ssh=db.ssh, more=more).replace('"1s"', "0").replace("point_select", "write_only")
    body = body.replace('duration = "2s"', 'duration = "3s"') + "[observe]\nio = true\n"
    spec, out = write_experiment(tmp_path / "disk.toml", body), tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    (cell,) = used(exported["cells"])
    assert cell["status"] == "ok" and cell["summary"]["transactions"] > 0, cell.get("error")
    here = describe(disk)
    recorded = exported["storage"]  # the server's storage: the host's
    assert recorded["host"] == "db" and recorded["path"] == str(disk) and recorded["on_disk"] is here.on_disk
    assert recorded["fstype"] == here.fstype and recorded["device"] == here.device, recorded
    host = exported["hosts"]["hosts"]["db"]
    assert host["storage"]["dir"].startswith(f"{disk}/perflab-host-") and host["storage"]["fstype"] == here.fstype
    assert host["dir"].startswith("/dev/shm/")  # the sockets, logs and observers' files stay on its tmpfs
    assert cell["resources"]["drop_caches_s"] is not None and cell["resources"]["drop_caches_s"] >= 0
    # the disk's counters, the host's (a namespace shares this machine's /proc/diskstats: the same device)
    assert here.block_device and host["storage"]["dev"] == here.dev, host["storage"]
    per_txn = cell["resources"]["io"]["per_txn"]  # InnoDB's redo synced at each commit, on the disk's defaults
    assert per_txn["disk.write_bytes"] > 0 and per_txn["sys.fsync"] + per_txn["sys.fdatasync"] >= 0.3, per_txn
    writes = [s["values"]["disk.write_bytes"] for s in cell["status_samples"] if "disk.write_bytes" in s["values"]]
    assert len(writes) >= 3 and writes == sorted(writes) and writes[-1] > writes[0], writes  # once a second
    assert list(disk.iterdir()) == [] and namespace_commands(ssh_lab, "db") == ["sshd"]
    missing = EXPERIMENT.format(ssh=db.ssh, more=f'storage = "{tmp_path}/nowhere"')
    refused = perflab_via(ssh_lab, tmp_path, "run", str(write_experiment(tmp_path / "m.toml", missing)), "--check")
    assert refused.returncode == 3 and "on host db" in refused.stderr and "no such directory" in refused.stderr


def test_no_account_gets_into_the_server_on_its_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    """Issue 48, on a host: an unprivileged account reads the server's command line (its cell's
    directory), then tries its socket as root with no password, and root over TCP at the host's
    address: both fail (the cell's directory there is 0700; TCP logins need the run's password)."""
    db = ssh_lab.hosts["db"]
    body = EXPERIMENT.format(ssh=db.ssh, more="").replace('"2s"', '"30s"')
    spec, out = write_experiment(tmp_path / "server.toml", body), tmp_path / "results"
    env = {**ssh_lab.env(), "PERFLAB_TMPFS": str(tmpfs("shm", "1G"))}
    run = subprocess.Popen([sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)], env=env, cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    try:
        assert wait_for(lambda: sysbench_started(out), 120), namespace_commands(ssh_lab, "db")
        (pid,) = [p for p in db.pids() if Path(f"/proc/{p}/comm").read_text().strip() == "mariadbd"]
        cmdline = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
        cell_dir = Path(next(a for a in cmdline if a.startswith("--defaults-file=")).split("=", 1)[1]).parent
        port = int(re.search(r"^port=(\d+)$", (cell_dir / "my.cnf").read_text(), re.M).group(1))
        socket = subprocess.run([*nobody, "mariadb", "--no-defaults", f"--socket={cell_dir}/mysqld.sock", "-uroot",
                                 "-Ne", "SELECT 'in'"], capture_output=True, text=True, timeout=60)  # fmt: skip
        assert socket.returncode != 0 and "in" not in socket.stdout, socket.stdout
        tcp = subprocess.run([*nobody, "mariadb", "--no-defaults", "--protocol=tcp", f"-h{db.address}", f"-P{port}",
                              "-uroot", "-Ne", "SELECT 'in'"], capture_output=True, text=True, timeout=60)  # fmt: skip
        assert tcp.returncode != 0 and "in" not in tcp.stdout, tcp.stdout
        assert cell_dir.stat().st_mode & 0o077 == 0
    finally:
        run.terminate()  # an orderly stop: the host is cleaned
        run.wait(timeout=120)
    assert wait_for(lambda: namespace_commands(ssh_lab, "db") == ["sshd"], 30), namespace_commands(ssh_lab, "db")
