"""A sysbench client on another host (`client_host`, docs/hosts.md) against a local mariadbd, the
host being a network namespace with its own sshd (sshhosts.py): the run ends with its cells
measured over the veth, the server listening on the link's address only, the client's network per
transaction and round trip recorded, the hosts' clocks and fingerprints in the meta, and nothing
left on the host. A host without sysbench: exit 3 naming the package."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perflab.store import folded

from tests.freezes import Freezes
from tests.integration.helpers import sysbench_started, used, wait_for, write_experiment
from tests.integration.sshhosts import (
    ROOT, SshLab, check_client_profile, check_pgbench_seat, namespace_commands, perflab_via, run_pg_seats, wire,
)  # fmt: skip

EXPERIMENT = """
[experiment]
name = "it-remote"
duration = "3s"
warmup = "1s"
repeats = 1
client_host = "load"

[hosts.load]
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


def test_a_client_on_another_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    load = ssh_lab.hosts["load"]
    observe = '\n[observe]\nperf = true\npmp = { interval = "0.25s" }\nstatus = true\n'  # of the server, here
    spec = write_experiment(tmp_path / "remote.toml", EXPERIMENT.format(ssh=load.ssh) + observe)
    out = tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"client on host load ({load.ssh}): " in done.stdout and "same fingerprint as this machine" in done.stdout
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    cell = exported["cells"][0]
    assert cell["status"] == "ok" and cell["summary"]["transactions"] > 0
    client = cell["client"]
    local_address = load.address.rsplit(".", 1)[0] + ".1"  # this side of the veth
    assert client["host"] == "load" and client["address"] == local_address and client["interface"] == "eth0"
    # a point select and its answer over TCP: some hundreds of bytes, not the SSH stream's few per transaction
    assert 100 < client["bytes_per_txn"] < 5000, client
    assert 0 < client["rtt_ms"] < 50
    assert client["cpu_s"] > 0 and client["cpu_us_per_txn"] > 0  # sysbench's CPU, read on its host
    options = cell["sysbench_options"]  # the password is in the host's config file, not on a command line
    assert not options.get("mysql_password") and options["config_file"].endswith("sysbench-0000.conf")
    assert f"bind-address={local_address}\n" in (out / "logs" / "cell-0000" / "my.cnf").read_text()
    log = (out / "logs" / "cell-0000" / "error.log").read_text()
    assert f"Server socket created on IP: '{local_address}'" in log and "IP: '0.0.0.0'" not in log
    meta = exported["hosts"]
    assert meta["version"] == 1 and meta["hosts"]["load"]["clock"]["end"]["error_s"] < 0.05
    assert meta["hosts"]["load"]["fingerprint"]["packages"]["sysbench"]
    assert client["version"] == exported["host"]["sysbench"], client  # the host's: here the same one
    # perflab's own CPU there: over the run (its session less sysbench's), over the cell, over the window
    run, whole = meta["hosts"]["load"]["perflab_cpu"], cell["resources"]["perflab_host_cpu_cell"]["load"]
    assert run["measured_cpu_s"] >= whole["measured_cpu_s"] >= client["cpu_s"] > 0, (run, whole, client["cpu_s"])
    assert 0 <= whole["cpu_s"] <= run["cpu_s"] and run["wall_s"] > whole["wall_s"] > 3, (run, whole)
    assert namespace_commands(ssh_lab, "load") == ["sshd"]  # nothing the run started is left on the host
    assert not Path(meta["hosts"]["load"]["dir"]).exists()
    # the server's observers ran here as for a local client: its profiles and its counters per transaction
    refs = {(p["source"], p["phase"]): p for p in cell["profiles"] if p["target"] == "server"}
    for source in ("perf", "pmp"):
        meta_ = json.loads((out / refs[(source, "measured")]["path"]).with_suffix(".json").read_text())
        assert refs[(source, "measured")]["samples"] > 0 and Path(meta_["binary"]).name == "mariadbd", meta_
    assert 0.9 < cell["status_per_txn"]["Com_select"] < 1.1, cell["status_per_txn"]


def test_client_variants_run_on_the_client_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    """client_preload (the host's jemalloc), client_env and client_library (a file here, copied there under
    the soname sysbench links) on a client host: each proven in sysbench's maps there, with its package there."""
    load = ssh_lab.hosts["load"]
    library = os.path.realpath("/usr/lib/x86_64-linux-gnu/libmariadb.so.3")
    variants = (
        '[variants.client]\nplain = {}\nje = { client_preload = "jemalloc", client_env = { PERFLAB_IT = "1" } }\n'
        f'lib = {{ client_library = "{library}" }}\n'
    )
    body = EXPERIMENT.format(ssh=load.ssh).replace('[variants.log]\nOFF = {{}}\n'.replace("{{}}", "{}"), variants)
    body = body.replace('duration = "3s"', 'duration = "2s"')
    spec, out = write_experiment(tmp_path / "variants.toml", body), tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    cells = {c["variant"]["client"]: c for c in used(exported["cells"])}
    assert set(cells) == {"plain", "je", "lib"} and all(c["status"] == "ok" for c in cells.values()), cells
    host_dir = exported["hosts"]["hosts"]["load"]["dir"]
    assert "preload_library" not in cells["plain"]["client"] and cells["plain"]["client"]["host"] == "load"
    je = cells["je"]["client"]
    assert je["preload"] == "jemalloc" and je["env"] == {"PERFLAB_IT": "1"} and je["host"] == "load", je
    assert je["preload_library"] == os.path.realpath("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"), je
    assert je["preload_version"].startswith("libjemalloc2 "), je  # its package, as the host's dpkg says
    assert os.path.basename(je["library_mapped"]).startswith("libmariadb"), je  # the host's own
    lib = cells["lib"]["client"]  # a copy in the host's run directory, mapped as sysbench's client library
    assert lib["library"] == library and lib["library_mapped"].startswith(f"{host_dir}/lib-"), lib
    assert lib["library_version"] is None and "preload_library" not in lib, lib  # no package owns the copy
    assert namespace_commands(ssh_lab, "load") == ["sshd"] and not Path(host_dir).exists()


def test_interleaved_turns_with_the_clients_on_their_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    """design = "interleaved" with client_host: each seat's server here, its sysbench on the host,
    stopped and resumed there by the host's turn agent (hosts/turns.py), which writes each resume's
    time for turns.lua there and sends its latency histogram back; the servers' counters read here, and
    their allocation counters; perf of the servers here and of the clients there, cut per seat."""
    load = ssh_lab.hosts["load"]
    body = EXPERIMENT.format(ssh=load.ssh).replace("repeats = 1", 'repeats = 1\ndesign = "interleaved"')
    body = body.replace('duration = "3s"', 'duration = "4s"').replace(
        "[variants.log]\nOFF = {}\n", '[variants.alloc]\nglibc = {}\njemalloc = { preload = "jemalloc" }\n'
    )
    # the servers' counters here; perf of the servers here and of the clients there, over each seat's turns
    observe = '[observe]\nstatus = true\nalloc = { period = "4K" }\nperf = { frequency = 999, targets = ["server", "client"] }\n'
    spec, out = write_experiment(tmp_path / "turns.toml", body + observe), tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    cells = {c["variant"]["alloc"]: c for c in used(exported["cells"])}
    assert all(c["status"] == "ok" for c in cells.values()), [c.get("error") for c in cells.values()]
    assert {c["design"]["turn"] for c in cells.values()} == {0, 1}
    pids: dict[str, set] = {}
    for cell in cells.values():
        assert cell["design"]["name"] == "interleaved" and cell["client"]["host"] == "load", cell["client"]
        assert 3.5 <= cell["design"]["active_s"] <= 8, cell["design"]  # its own seconds: warm-up and window
        assert cell["summary"]["transactions"] > 0 and cell["summary"]["latency_ms"]["p95"] > 0  # turns.lua's there
        # each second of the window's own running time: its server's counters here, its latency from the host
        series = [iv for iv in cell["intervals"] if not iv["warmup"]]
        assert len(series) == 4 and all(iv["tps"] > 0 and iv["p95_ms"] is not None for iv in series), series
        assert 0.9 <= cell["status_per_txn"]["Com_select"] <= 1.1, cell["status_per_txn"]
        assert cell["client"]["cpu_us_per_txn"] > 0, cell["client"]  # sysbench's, read on its host
        assert cell["resources"]["client_cpu_s"] > 0
        # one operator new a point select, over its own turns' transactions (both seats' would give 2)
        assert cell["alloc"]["transactions"] == cell["summary"]["transactions"], cell["alloc"]
        assert 0.9 <= cell["alloc"]["calls_per_txn"]["new"] <= 1.1, cell["alloc"]["calls_per_txn"]
        for target, binary in (("server", "/mariadbd"), ("client", "/sysbench")):
            (prof,) = [p for p in cell["profiles"] if (p["source"], p["phase"], p["target"]) == ("perf", "measured", target)]
            assert prof["samples"] >= 5 and 1.5 <= prof["seconds"] <= 8, prof
            assert prof["transactions"] == pytest.approx(cell["summary"]["transactions"], rel=0.2), prof
            meta = folded.read_meta(out / prof["path"])
            assert meta["binary"].endswith(binary) and meta["binary"].startswith("load:") == (target == "client"), meta
            pids.setdefault(target, set()).add(meta["pid"])
    assert len(pids["server"]) == len(pids["client"]) == 2  # each seat's own
    assert "libjemalloc" in cells["jemalloc"]["allocator_library"]  # the servers here
    assert namespace_commands(ssh_lab, "load") == ["sshd"]  # the clients and the agent are gone


def test_the_client_profiled_on_its_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    """perf and pmp with targets naming the client: sysbench's own process on the host, recorded and
    named there, stored as a local client's profiles (target "client"), beside the server's here."""
    load = ssh_lab.hosts["load"]
    observe = (
        '\n[observe]\nperf = { targets = ["server", "client"] }\n'
        'pmp = { interval = "0.1s", targets = ["client"], warmup = true }\n'
    )
    body = EXPERIMENT.format(ssh=load.ssh).replace('"3s"', '"2s"') + observe
    # closed loop: a paced sysbench runs a few percent of a CPU, too little for perf's 99 Hz in 2 s
    spec, out = write_experiment(tmp_path / "remote.toml", body, pace=None), tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = used(json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)["cells"])
    assert cell["status"] == "ok", cell.get("error")
    refs = {(p["source"], p["target"], p["phase"]): p for p in cell["profiles"]}
    assert ("pmp", "server", "measured") not in refs  # pmp names the client only
    for source in ("perf", "pmp"):
        ref = refs[(source, "client", "measured")]
        meta = json.loads((out / ref["path"]).with_suffix(".json").read_text())
        assert ref["samples"] > 0 and meta["binary"] == "load:/usr/bin/sysbench", (ref, meta["binary"])
        assert ref["path"].endswith(f"cell-0000.{source}.client.folded") and meta["pid"] > 0
        assert (source, "client", "warmup") in refs  # its warm-up cut by the host's samples' aligned times
    assert refs[("pmp", "client", "measured")]["call_graph"] == "eu-stack"
    server = json.loads((out / refs[("perf", "server", "measured")]["path"]).with_suffix(".json").read_text())
    assert refs[("perf", "server", "measured")]["samples"] > 0 and Path(server["binary"]).name == "mariadbd"
    clock = cell["client"]["clock"]  # the client host's, its profiles' samples aligned with it
    assert clock["aligned"] and clock["error_s"] < 0.05 and abs(clock["shift_s"]) < 0.005, clock
    for source in ("perf", "pmp"):
        check_client_profile(ssh_lab, tmp_path, out, source)  # named on the host by its perf / eu-stack
    folded = tmp_path / "client.folded"
    flame = perflab_via(
        ssh_lab, tmp_path, "flame", str(out), "--cell", "0", "--source", "pmp", "--target", "client",
        "--format", "folded", "-o", str(folded),
    )  # fmt: skip
    stacks = folded.read_text()  # sysbench's own functions and its client library's, by their names
    assert flame.returncode == 0 and "db_execute" in stacks and "mysql_stmt_execute" in stacks, flame.stderr
    assert namespace_commands(ssh_lab, "load") == ["sshd"]  # perf and the sampler stopped with the cell


def _host_path_of(ssh_lab: SshLab, tmp_path: Path, *more: str) -> None:
    """The load host's sessions get a PATH of the basic tools and `more` alone (the others hidden
    on the host only); the lab is the test's own (conftest.py's ssh_lab), its sshd_config with it."""
    load = ssh_lab.hosts["load"]
    hidden = tmp_path / "hide"
    hidden.mkdir()
    for tool in ("sh", "cat", "setsid", "mktemp", "rm", "test", "kill", "bash", "ip", "grep", "tr", "uname",
                 "getconf", "dpkg-query", "sleep", *more):  # fmt: skip
        found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True, check=False)
        if found.stdout.strip().startswith("/"):
            os.symlink(found.stdout.strip(), hidden / tool)
    env_file = ssh_lab.dir / "load" / "sshd_config"
    # sshd takes the first SetEnv line: PATH goes into sshhosts.py's own
    env_file.write_text(env_file.read_text().replace("SetEnv SHLVL=1", f"SetEnv SHLVL=1 PATH={hidden}"))
    subprocess.run(["kill", "-HUP", str(load.sshd.pid)], check=True)


def test_a_host_without_sysbench_exits_3_naming_the_package(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    load = ssh_lab.hosts["load"]
    _host_path_of(ssh_lab, tmp_path)  # sysbench hidden on the host only
    spec = write_experiment(tmp_path / "remote.toml", EXPERIMENT.format(ssh=load.ssh))
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(tmp_path / "results"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "hosts.load: expected sysbench installed on host load, found not installed" in done.stderr, done.stderr
    assert "apt-get install sysbench" in done.stderr and not (tmp_path / "results").exists()  # nothing started


def test_a_client_host_without_perf_for_the_clients_profile_exits_3(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    load = ssh_lab.hosts["load"]
    _host_path_of(ssh_lab, tmp_path, "sysbench", "eu-stack")  # perf hidden on the host only
    observe = '\n[observe]\nperf = { targets = ["client"] }\npmp = { targets = ["client"] }\n'
    spec = write_experiment(tmp_path / "remote.toml", EXPERIMENT.format(ssh=load.ssh) + observe)
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(tmp_path / "results"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "hosts.load: expected perf installed on host load, found not installed" in done.stderr, done.stderr
    assert "apt-get install linux-perf" in done.stderr and "eu-stack installed" not in done.stderr
    assert not (tmp_path / "results").exists()  # nothing started


def test_a_postgresql_client_on_another_host_over_tcp(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    load = ssh_lab.hosts["load"]
    body = EXPERIMENT.format(ssh=load.ssh).replace(
        'client_host = "load"', 'client_host = "load"\nserver = "postgresql"'
    )
    spec, out, shm = write_experiment(tmp_path / "pg.toml", body), tmp_path / "results", tmpfs("shm", "1G")
    shm.parent.chmod(0o755)  # the postgres user must reach its directories
    done = perflab_via(ssh_lab, shm, "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = used(json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)["cells"])
    local_address = load.address.rsplit(".", 1)[0] + ".1"
    assert cell["status"] == "ok" and cell["summary"]["qps"] > 100
    assert cell["sysbench_options"]["db_driver"] == "pgsql" and not cell["sysbench_options"].get("pgsql_password")
    assert cell["client"]["address"] == local_address and 100 < cell["client"]["bytes_per_txn"] < 5000
    # the server's CPU is its backends', not the postmaster's alone (which read 0.0: an idle process)
    assert 10 < cell["resources"]["server_cpu_us_per_txn"] < 20_000, cell["resources"]
    conf = (out / "logs" / "cell-0000" / "postgresql.conf").read_text()
    assert f"listen_addresses = '{local_address}'" in conf, conf
    assert namespace_commands(ssh_lab, "load") == ["sshd"]


def test_pgbench_on_another_host_against_postgresql_here(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    load = ssh_lab.hosts["load"]
    body = EXPERIMENT.format(ssh=load.ssh).replace(
        'client_host = "load"', 'client_host = "load"\nserver = "postgresql"'
    )
    body = (
        body.replace('"3s"', '"2s"')
        .replace('warmup = "1s"', "warmup = 0")
        .replace("tables = 1\ntable_size = 2000", "scale = 1")
    )
    body = body.replace('test = "oltp_point_select"', 'tool = "pgbench"\ntest = "select-only"')
    body += '\n[observe]\nperf = { frequency = 999 }\npmp = { interval = "0.25s" }\n'  # of the server, here
    spec, out, shm = write_experiment(tmp_path / "pgbench.toml", body), tmp_path / "results", tmpfs("shm", "1G")
    shm.parent.chmod(0o755)  # the postgres user must reach its directories
    with Freezes() as freezes:
        done = perflab_via(ssh_lab, shm, "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    (cell,) = used(exported["cells"])
    local_address = load.address.rsplit(".", 1)[0] + ".1"
    assert cell["status"] == "ok" and cell["summary"]["transactions"] > 100, cell.get("error")
    lost = freezes.in_cell(cell)  # a pause of this VM at a mark moves it by up to that much
    assert 1.5 - lost < cell["summary"]["total_time_s"] < 2.5 + lost and cell["summary"]["latency_ms"]["p95"] > 0
    # the per-second series, counted from pgbench's log written on the host and fetched back, cut at this
    # machine's marks put on the host's clock: both seconds of the window have transactions (a pause
    # of this VM, the host's too, may leave one without)
    tps = [iv["tps"] for iv in cell["intervals"]]
    assert len(tps) >= 2 and sum(t > 0 for t in tps[:2]) >= (1 if lost else 2), (tps, freezes.pauses)
    client = cell["client"]
    assert client["host"] == "load" and client["address"] == local_address and client["interface"] == "eth0"
    assert 100 < client["bytes_per_txn"] < 5000 and 0 < client["rtt_ms"] < 50, client  # a select and its row
    assert client["cpu_s"] > 0 and client["cpu_us_per_txn"] > 0 and client["script"] is None  # pgbench's, there
    assert client["clock"]["aligned"] and client["clock"]["error_s"] < 0.05, client["clock"]
    assert client["version"].startswith("pgbench (PostgreSQL) 15"), client  # its --version line there
    assert exported["hosts"]["hosts"]["load"]["fingerprint"]["packages"]["postgresql-client-15"]  # pgbench's package
    assert cell["resources"]["server_cpu_s"] > 0 and cell["resources"]["client_cpu_s"] is None
    assert cell["resources"]["perflab_host_cpu"]["load"] is not None
    host_dir = exported["hosts"]["hosts"]["load"]["dir"]
    options = cell["sysbench_options"]  # pgbench's options, as it ran there; its password in a passfile
    assert options["builtin"] == "select-only" and options["log_prefix"] == f"{host_dir}/client-0000/pgbench_log"
    text = (out / "logs" / "cell-0000" / "pgbench.txt").read_text()  # its -P 1 progress, streamed back
    assert "progress: 1.0 s" in text and not re.search(r"\b[0-9a-f]{32}\b", text + json.dumps(cell)), text
    conf = (out / "logs" / "cell-0000" / "postgresql.conf").read_text()
    assert f"listen_addresses = '{local_address}'" in conf, conf
    assert namespace_commands(ssh_lab, "load") == ["sshd"] and not Path(host_dir).exists()  # nothing left there
    _assert_the_postmasters_tree_profiled(out, cell, "/usr/lib/postgresql/15/bin/postgres")


@pytest.mark.parametrize("server", ["here", "db"])
def test_pgbench_seats_take_turns_on_their_host(ssh_lab: SshLab, tmpfs, tmp_path: Path, server: str) -> None:
    """design = "interleaved" with pgbench on host load against PostgreSQL here (each seat's server
    listening on a port of its own) or on host db: each seat's pgbench there, stopped and continued by
    the host's signals-only agent (no sysbench needed there), its per-transaction log fetched back once
    it has ended and its stamps put on this machine's clock, so each seat's turns are counted from it
    as a local seat's are."""
    load = ssh_lab.hosts["load"]
    more = 'design = "interleaved"\nserver = "postgresql"' + ('\nserver_host = "db"' if server == "db" else "")
    body = EXPERIMENT.format(ssh=load.ssh).replace("repeats = 1", "repeats = 1\n" + more)
    if server == "db":
        body += f'\n[hosts.db]\nssh = "{ssh_lab.hosts["db"].ssh}"\n'
        wire(ssh_lab, "load", "db")  # load reaches db's address over a link of their own
    body = body.replace("tables = 1\ntable_size = 2000", "scale = 1").replace('"3s"', '"2s"')
    body = body.replace('test = "oltp_point_select"', 'tool = "pgbench"\ntest = "select-only"')
    out, cells = run_pg_seats(ssh_lab, tmpfs("shm", "1G"), tmp_path, body)
    for cell in cells.values():
        assert cell["client"]["host"] == "load" and cell["client"]["version"].startswith("pgbench"), cell["client"]
        assert cell["build"].get("host", {}).get("name", "here") == server, cell["build"].get("host")
        check_pgbench_seat(out, cell)
    assert namespace_commands(ssh_lab, "load") == ["sshd"]  # the clients and the agent are gone


def test_pgbench_on_the_postgresql_server_host_itself(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    """server_host and client_host both: postgres there (its dataset made there), pgbench beside it."""
    db = ssh_lab.hosts["db"]
    body = EXPERIMENT.format(ssh=db.ssh).replace("[hosts.load]", "[hosts.db]").replace('"load"', '"db"')
    body = body.replace('client_host = "db"', 'client_host = "db"\nserver_host = "db"\nserver = "postgresql"')
    body = body.replace('"3s"', '"2s"').replace('warmup = "1s"', "warmup = 0")
    body = body.replace("tables = 1\ntable_size = 2000", "scale = 1")
    body = body.replace('test = "oltp_point_select"', 'tool = "pgbench"\ntest = "select-only"')
    body += '\n[observe]\nperf = { frequency = 999 }\npmp = { interval = "0.25s" }\n'  # of the server, there
    spec, out, shm = write_experiment(tmp_path / "both.toml", body), tmp_path / "results", tmpfs("shm", "1G")
    shm.parent.chmod(0o755)
    done = perflab_via(ssh_lab, shm, "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    (cell,) = used(exported["cells"])
    assert cell["status"] == "ok" and cell["summary"]["transactions"] > 100, cell.get("error")
    assert cell["build"]["host"]["name"] == "db" and cell["resources"]["server_cpu_s"] > 0  # the tree, there
    client = cell["client"]
    assert client["host"] == "db" and client["address"] == db.address and client["cpu_s"] > 0, client
    assert client["clock"]["aligned"] and len(cell["intervals"]) >= 2, (client["clock"], cell["intervals"])
    server_clock = cell["build"]["host"]["clock"]  # the server's window: its tree's RSS put on this machine's clock
    assert server_clock["aligned"] and server_clock["error_s"] < 0.05, server_clock
    times = [s["t"] for s in cell["rss_samples"]]
    assert len(times) >= 2 and times == sorted(times) and -0.05 < times[0] < 0.5 and times[-1] < 3, times
    assert namespace_commands(ssh_lab, "db") == ["sshd"]
    host_clock = cell["build"]["host"]["clock"]  # read by the server's profilers there
    assert host_clock["aligned"] and host_clock["error_s"] < 0.05, host_clock
    _assert_the_postmasters_tree_profiled(out, cell, "db:/usr/lib/postgresql/15/bin/postgres")


def _assert_the_postmasters_tree_profiled(out: Path, cell: dict, binary: str) -> None:
    """The server's perf and pmp profiles of the window with pgbench on a client host: the postmaster's
    tree (its backends), no client profile."""
    refs = {(p["source"], p["target"], p["phase"]): p for p in cell["profiles"]}
    assert {target for _, target, _ in refs} == {"server"}, sorted(refs)
    for source in ("perf", "pmp"):
        ref = refs[(source, "server", "measured")]
        meta = json.loads((out / ref["path"]).with_suffix(".json").read_text())
        assert ref["samples"] > 0 and meta["binary"] == binary, (ref, meta["binary"])
        assert len(meta["processes"]) >= 3, meta["processes"]  # the postmaster and pgbench's two backends at least
        assert 1.0 < ref["seconds"] < 3.5, ref  # the 2 s window, cut at this machine's marks


def test_a_host_that_drops_off_fails_its_cells_and_the_run_ends(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    load = ssh_lab.hosts["load"]
    body = EXPERIMENT.format(ssh=load.ssh).replace("repeats = 1", "repeats = 2").replace('"3s"', '"6s"')
    spec, out = write_experiment(tmp_path / "remote.toml", body), tmp_path / "results"
    env = {**ssh_lab.env(), "PERFLAB_TMPFS": str(tmpfs("shm", "1G"))}
    run = subprocess.Popen([sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)], env=env, cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        assert wait_for(lambda: sysbench_started(out), 120), "the first cell's client never started"
        load.drop()  # its sshd and every session: the host is gone mid-cell
        text, _ = run.communicate(timeout=180)
    finally:
        run.kill()
    assert run.returncode == 1, text  # cells failed; the run itself ended normally
    cells = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)["cells"]
    assert [c["status"] for c in cells] == ["failed", "failed"]
    assert all("host load" in c["error"] for c in cells), [c["error"] for c in cells]
    assert "2 of 2 cells failed" in text
    # the local record of what is left on the host, for `perflab doctor --clean` once it is back
    records = [json.loads(p.read_text()) for p in Path(env["PERFLAB_TMPFS"]).glob("perflab-*/hosts.json")]
    assert [[p["name"] for p in r] for r in records] == [["load"]]
    shutil.rmtree(records[0][0]["path"])  # the test's own cleanup: the namespace shares this filesystem


def test_sigkill_mid_run_then_doctor_clean_leaves_nothing_on_the_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    load = ssh_lab.hosts["load"]
    body = EXPERIMENT.format(ssh=load.ssh).replace('"3s"', '"30s"')
    spec, out, shm = write_experiment(tmp_path / "remote.toml", body), tmp_path / "results", tmpfs("shm", "1G")
    env = {**ssh_lab.env(), "PERFLAB_TMPFS": str(shm)}
    run = subprocess.Popen([sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)], env=env, cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        assert wait_for(lambda: "sysbench" in namespace_commands(ssh_lab, "load"), 120)
    finally:
        run.kill()
        run.wait(timeout=30)
    left = [Path(p["path"]) for w in shm.glob("perflab-*") for p in json.loads((w / "hosts.json").read_text())]
    assert len(left) == 1 and left[0].is_dir()  # the local record names the host's run directory
    done = subprocess.run([sys.executable, "-m", "perflab", "doctor", "--clean"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0 and f"removed load:{left[0]}" in done.stdout, done.stdout + done.stderr
    assert not left[0].exists() and not list(shm.glob("perflab-*"))
    assert wait_for(lambda: namespace_commands(ssh_lab, "load") == ["sshd"], 10), namespace_commands(ssh_lab, "load")


def test_an_unreachable_client_host_exits_3_before_anything_starts(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    load = ssh_lab.hosts["load"]
    load.drop()
    spec = write_experiment(tmp_path / "remote.toml", EXPERIMENT.format(ssh=load.ssh))
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(tmp_path / "results"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"host load ({load.ssh}) is unreachable" in done.stderr and not (tmp_path / "results").exists()


def test_a_workload_script_of_this_machine_is_copied_to_the_host(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    load = ssh_lab.hosts["load"]
    script = tmp_path / "my_select.lua"  # a copy of sysbench's own test, under a name only this machine has
    shutil.copy("/usr/share/sysbench/oltp_point_select.lua", script)
    body = EXPERIMENT.format(ssh=load.ssh).replace('test = "oltp_point_select"', f'test = "{script}"')
    spec, out = write_experiment(tmp_path / "remote.toml", body), tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "1G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = used(json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)["cells"])
    assert cell["status"] == "ok" and cell["summary"]["transactions"] > 0
    assert cell["client"]["script"].startswith("/dev/shm/perflab-host-") and cell["client"]["script"].endswith(
        "/my_select.lua"
    )


MYSQL = """
[builds.mysql97]
package = "mysql-server-core"
suite = "sid"

[variants.server]
mysql = {{ build = "mysql97" }}
"""


def test_a_client_on_another_host_against_mysql_here(ssh_lab: SshLab, tmpfs, tmp_path: Path) -> None:
    """`server = "mysql"` here, sysbench on host load: the run's caching_sha2_password user logs in
    over TCP without TLS (libmariadb3 completes it: refused until 2026-11-30, never tried)."""
    body = EXPERIMENT.format(ssh=ssh_lab.hosts["load"].ssh).replace("[variants.log]\nOFF = {}\n", MYSQL.format())
    body = body.replace('client_host = "load"', 'client_host = "load"\nserver = "mysql"')
    spec, out = write_experiment(tmp_path / "mysql.toml", body), tmp_path / "results"
    done = perflab_via(ssh_lab, tmpfs("shm", "2G"), "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(ssh_lab, tmp_path, "export", str(out), "--format", "json").stdout)
    (cell,) = used(exported["cells"])
    assert cell["status"] == "ok" and cell["summary"]["transactions"] > 0, cell.get("error")
    assert cell["build"]["name"] == "mysql97" and cell["build"]["binary"].endswith("/mysqld"), cell["build"]
    assert cell["client"]["host"] == "load" and 100 < cell["client"]["bytes_per_txn"] < 5000, cell["client"]
    assert namespace_commands(ssh_lab, "load") == ["sshd"]
