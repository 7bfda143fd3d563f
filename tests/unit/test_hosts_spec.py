"""[hosts], server_host and client_host in an experiment file (docs/hosts.md): names that must be
[hosts] tables (exit 2), ssh targets of the documented form, and what a remote client refuses."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from perflab import spec
from perflab.errors import EXIT_USAGE, SpecError

ROOT = Path(__file__).resolve().parents[2]
BASE = """
[experiment]
name = "remote"
duration = "5s"
repeats = 3
{experiment}
[dataset]
tables = 1
table_size = 1000
[workload]
test = "oltp_point_select"
threads = [2]
[variants.log]
OFF = {{}}
ON = {{ server_options = {{ general_log = "ON" }} }}
{rest}
"""
HOSTS = '[hosts.load]\nssh = "root@10.77.1.2"\n[hosts.db]\nssh = "bench@db1:2222"\n'


def parse(experiment: str, rest: str = HOSTS) -> spec.Experiment:
    return spec.parse(BASE.format(experiment=experiment, rest=rest))


def problems(experiment: str, rest: str = HOSTS) -> dict[str, str]:
    with pytest.raises(SpecError) as exc:
        parse(experiment, rest)
    assert exc.value.exit_code == EXIT_USAGE
    return {p.path: p.render() for p in exc.value.problems}


def test_a_client_host_runs_the_sequential_design_and_says_why() -> None:
    exp = parse('client_host = "load"')
    assert exp.file.experiment.client_host == "load" and exp.file.hosts["db"].ssh == "bench@db1:2222"
    assert exp.file.experiment.design == "sequential" and "client runs on host load" in exp.design_reason


def test_an_unknown_host_name_lists_the_defined_ones() -> None:
    found = problems('client_host = "loadd"')
    assert "expected the name of a [hosts.NAME] table, found 'loadd'" in found["experiment.client_host"]
    assert "defined hosts: load, db" in found["experiment.client_host"]
    assert "add a [hosts.NAME] table" in problems('client_host = "load"', rest="")["experiment.client_host"]


@pytest.mark.parametrize("target", ["db1", "root@", "root@db1:99999", "root@db1 -oProxyCommand=x"])
def test_an_ssh_target_of_another_form(target: str) -> None:
    found = problems("", rest=f'[hosts.db]\nssh = "{target}"\n')
    assert "user@address[:port]" in found["hosts.db.ssh"]


def test_what_a_remote_client_does_not_support_yet() -> None:
    found = problems(
        'client_host = "load"\ndesign = "interleaved"',
        rest=HOSTS + "[observe]\nperf = true\nstatus = true\nio = true\n",
    )
    # sysbench's seats take their turns on a client host (hosts/turns.py); perf records the servers here
    assert "experiment.design" not in found and "observe.perf" not in found
    # and the clients' own recording there (observers/seats.py)
    clients = parse('client_host = "load"\ndesign = "interleaved"', rest=HOSTS + '[observe]\nperf = { targets = ["client"] }\n')
    assert clients.file.experiment.interleaved and clients.file.observe.perf.targets == ["client"]
    assert "interleaved" in found["observe.io"] and "client_host" not in found["observe.io"]  # the design's only
    # the server here: its perf, pmp and status run here
    here = parse('client_host = "load"', rest=HOSTS + "[observe]\nperf = true\npmp = true\nstatus = true\n")
    assert here.file.observe.perf is not None and here.file.observe.status
    # its allocations, I/O and canary here too, as for a local client (hosts/client.py)
    counted = parse('client_host = "load"', rest=HOSTS + "[observe]\nalloc = true\nhost_speed = true\nio = true\n")
    assert counted.file.observe.alloc is not None and counted.file.observe.host_speed and counted.file.observe.io
    both = parse('client_host = "load"\ndesign = "interleaved"\nserver_host = "db"', rest=HOSTS)
    assert both.file.experiment.design == "interleaved"  # the server on one host, its clients on another
    # pgbench's seats count from its log, fetched from the host
    assert spec.parse(_pgbench('client_host = "load"\ndesign = "interleaved"')).file.experiment.interleaved
    assert parse('client_host = "load"\nserver = "postgresql"').file.experiment.server == "postgresql"  # sysbench
    tpcc = BASE.format(experiment='client_host = "load"', rest=HOSTS).replace(
        'test = "oltp_point_select"', 'tool = "go-tpc"\ntest = "tpcc"\nwarehouses = 1'
    )
    with pytest.raises(SpecError) as exc:
        spec.parse(tpcc.replace("[dataset]\ntables = 1\ntable_size = 1000\n", ""))
    found = {p.path: p.render() for p in exc.value.problems}
    assert set(found) == {"workload.tool"}, found  # MariaDB: go-tpc's MySQL driver takes --password only
    assert "a tool that takes its password from a file with client_host" in found["workload.tool"]
    assert "every account on a host reads" in found["workload.tool"] and "PGPASSFILE" in found["workload.tool"]
    pg = tpcc.replace("[dataset]\ntables = 1\ntable_size = 1000\n", "").replace(
        'client_host = "load"', 'client_host = "load"\nserver = "postgresql"'
    )
    assert spec.parse(pg).file.workload.tool == "go-tpc"  # lib/pq reads PGPASSFILE there


def test_pgbench_on_a_client_host_with_postgresql_only() -> None:
    exp = spec.parse(_pgbench('client_host = "load"'))
    assert exp.file.workload.tool == "pgbench" and exp.file.experiment.client_host == "load"
    assert exp.file.experiment.design == "sequential" and "client runs on host load" in exp.design_reason
    with pytest.raises(SpecError) as exc:  # pgbench needs PostgreSQL, wherever it runs: exit 2
        spec.parse(_pgbench('client_host = "load"').replace('\nserver = "postgresql"', ""))
    assert exc.value.exit_code == EXIT_USAGE
    found = {p.path: p.render() for p in exc.value.problems}
    assert set(found) == {"workload.tool"} and 'set server = "postgresql"' in found["workload.tool"], found
    # the server's profiles with pgbench on a host (its postmaster's tree, here or on its host)
    for where in ('client_host = "load"', 'client_host = "load"\nserver_host = "db"'):
        profiled = spec.parse(_pgbench(where) + "[observe]\nperf = true\npmp = true\n").file.observe
        assert profiled.perf is not None and profiled.pmp is not None
    with pytest.raises(SpecError) as exc:  # no status on PostgreSQL, on any host: its own refusal, not the host's
        spec.parse(_pgbench('client_host = "load"') + "[observe]\nstatus = true\n")
    (status,) = exc.value.problems
    assert status.path == "observe.status" and "no [observe] status on PostgreSQL" in status.render()
    # its seats on the host too (their turns by signals there, counted from its log fetched back)
    assert spec.parse(_pgbench('client_host = "load"\ndesign = "interleaved"')).file.experiment.design == "interleaved"


def test_the_cli_exits_2_on_an_unknown_host(tmp_path: Path) -> None:
    path = tmp_path / "x.toml"
    path.write_text(BASE.format(experiment='client_host = "nowhere"', rest=HOSTS), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "perflab", "run", str(path), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and "experiment.client_host" in done.stderr + done.stdout


def test_calibrate_keeps_the_client_host() -> None:
    from perflab.spec.aa import aa_experiment

    aa = aa_experiment(parse('client_host = "load"'), rounds=4)
    assert aa.file.experiment.client_host == "load" and aa.file.hosts["load"].ssh == "root@10.77.1.2"
    assert aa.file.observe.host_speed is True  # the canary runs here, where the server runs (remote_io.here)


def test_a_server_host_runs_the_sequential_design_and_says_why() -> None:
    exp = parse('server_host = "db"')
    assert exp.file.experiment.server_host == "db" and exp.file.experiment.design == "sequential"
    assert "server runs on host db" in exp.design_reason
    both = parse('server_host = "db"\nclient_host = "load"')
    assert both.file.experiment.client_host == "load" and both.file.experiment.design == "sequential"


def test_what_a_remote_server_does_not_support_yet() -> None:
    found = problems(
        'server_host = "db"\ndesign = "interleaved"\npin = true\nstorage = "/var/tmp"\ndrop_caches = true',
        rest=HOSTS + "[observe]\nperf = true\npmp = true\nalloc = true\nio = true\nstatus = true\nhost_speed = true\n",
    )
    assert set(found) == {
        "experiment.pin",
        "experiment.drop_caches",
        "observe.io",
        "observe.host_speed",
        "observe.pmp",
    }, found  # fmt: skip  (pmp: refused by the interleaved design's own check)
    # each seat's allocation counter there (observers/seats.py with the host's tracer)
    assert parse('server_host = "db"\ndesign = "interleaved"', rest=HOSTS + "[observe]\nalloc = true\n").file.observe.alloc
    # the seats' perf records on the server host, of the servers
    assert parse('server_host = "db"\ndesign = "interleaved"', rest=HOSTS + "[observe]\nperf = true\n").file.observe.perf
    # the interleaved design's seats there, their clients here or on a client host: MariaDB's
    assert parse('server_host = "db"\ndesign = "interleaved"').file.experiment.interleaved
    assert parse('server_host = "db"\ndesign = "interleaved"\nclient_host = "load"').file.experiment.interleaved
    # PostgreSQL's sysbench seats there too (their turns counted by the client: turns.lua), and pgbench's
    # (counted from its log here)
    assert parse('server_host = "db"\ndesign = "interleaved"\nserver = "postgresql"').file.experiment.interleaved
    assert spec.parse(_pgbench('server_host = "db"\ndesign = "interleaved"')).file.experiment.interleaved
    assert spec.parse(_pgbench('server_host = "db"\ndesign = "interleaved"\nclient_host = "load"')).file.experiment.interleaved
    assert "interleaved" in found["observe.pmp"]
    assert "interleaved" in found["observe.io"] and "run on different machines" in found["experiment.pin"]
    assert "interleaved" in found["experiment.drop_caches"]  # the design's own check; sequential: on the host
    disk = parse('server_host = "db"\nstorage = "/var/tmp/perflab"\ndrop_caches = true').file.experiment
    assert disk.storage == "/var/tmp/perflab" and disk.drop_caches  # they apply on the host
    # sequential: io and host_speed run on the server host (observers/remote_io.py)
    observed = parse('server_host = "db"', rest=HOSTS + "[observe]\nio = true\nhost_speed = true\n")
    assert observed.file.observe.io and observed.file.observe.host_speed
    both = parse('server_host = "db"\nclient_host = "load"', rest=HOSTS + "[observe]\nio = true\nhost_speed = true\n")
    assert both.file.observe.io and both.file.observe.host_speed  # with the client on a host too
    # a build and a glibc variant run there from their copies (hosts/trees.py), MariaDB's and PostgreSQL's
    build = '[builds.sid]\npackage = "mariadb-server-core"\nsuite = "sid"\n'
    build += '[variants.server]\nsid = { build = "sid" }\nold = {}\n'
    libc = '[variants.alloc]\nglibc = {}\nje = { preload = "jemalloc", glibc = "sid" }\n'
    assert {c.build for c in parse('server_host = "db"', rest=HOSTS + build).cells()} == {"sid", None}
    assert {c.glibc for c in parse('server_host = "db"', rest=HOSTS + libc).cells()} == {"sid", None}
    pg = 'server = "postgresql"\nserver_host = "db"'
    pg18 = build.replace("mariadb-server-core", "postgresql-18")
    assert {c.build for c in parse(pg, rest=HOSTS + pg18).cells()} == {"sid", None}
    # a client here takes its variants beside a server host as beside a local one (run/window.ClientHere)
    client_here = 'je = { client_preload = "jemalloc", client_env = { A = "1" } }\n'
    assert parse('server_host = "db"', rest=HOSTS + "[variants.client]\n" + client_here).cells()[0].client_preload
    both = parse('server_host = "db"\nclient_host = "load"', rest=HOSTS + "[variants.client]\n" + client_here)
    assert both.cells()[0].client_env == {"A": "1"}  # a client on its host takes them there (ClientOnHost.variant_env)
    # a preload runs there (the host's allocator: hosts/server.py), looked for there, not here
    from perflab.spec.hosts import preloads_by_host

    on_host = parse('server_host = "db"', rest=HOSTS + '[variants.alloc]\nglibc = {}\nje = { preload = "jemalloc" }\n')
    assert preloads_by_host(on_host.file) == {"db": {"jemalloc"}}
    axis = AXIS.replace('b = { server_host = "db2" }', "b = {}") + '[variants.alloc]\nje = { preload = "jemalloc" }\n'
    assert preloads_by_host(parse("", rest=axis).file) == {"db": {"jemalloc"}, None: {"jemalloc"}}
    unknown = problems('server_host = "dbb"')
    assert "defined hosts: load, db" in unknown["experiment.server_host"]


def test_perf_pmp_and_status_observe_a_server_host() -> None:
    exp = parse('server_host = "db"', rest=HOSTS + "[observe]\nperf = true\npmp = true\nstatus = true\n")
    assert exp.file.observe.perf is not None and exp.file.observe.pmp is not None and exp.file.observe.status
    eu_stack = parse('server_host = "db"', rest=HOSTS + '[observe]\npmp = { tool = "eu-stack" }\n')
    assert eu_stack.file.observe.pmp.tool == "eu-stack"
    found = problems(
        'server_host = "db"',
        rest=HOSTS + '[observe]\nperf = { targets = ["server", "client"] }\npmp = { tool = "libdw" }\n',
    )
    assert set(found) == {"observe.pmp.tool"}, found  # the client here is profiled here, the server there
    assert "eu-stack there" in found["observe.pmp.tool"]
    both = parse('server_host = "db"\nclient_host = "load"', rest=HOSTS + "[observe]\nperf = true\nstatus = true\n")
    assert both.file.observe.perf is not None and both.file.observe.status  # the client on a host too


def test_perf_and_pmp_of_a_client_on_its_host() -> None:
    """targets naming the client with client_host: profiled on its host (observers/paired.on_host),
    the server here or on its host; pmp there is eu-stack; with the client here beside a server host,
    the client is profiled here (observers/paired.alone)."""
    from perflab.hosts.preflight import client_observer_packages

    both = '[observe]\nperf = { targets = ["server", "client"] }\npmp = { targets = ["client"] }\n'
    for where in ('client_host = "load"', 'client_host = "load"\nserver_host = "db"'):
        observe = parse(where, rest=HOSTS + both).file.observe
        assert observe.perf.targets == ["server", "client"] and observe.pmp.targets == ["client"]
    eu_stack = '[observe]\npmp = { targets = ["client"], tool = "eu-stack" }\n'
    assert parse('client_host = "load"', rest=HOSTS + eu_stack).file.observe.pmp.tool == "eu-stack"
    libdw = '[observe]\npmp = { targets = ["server", "client"], tool = "libdw" }\n'
    found = problems('client_host = "load"', rest=HOSTS + libdw)
    assert set(found) == {"observe.pmp.tool"} and "eu-stack there" in found["observe.pmp.tool"], found
    assert parse('client_host = "load"', rest=HOSTS + libdw.replace('"server", "client"', '"server"'))  # here
    beside = parse('server_host = "db"', rest=HOSTS + both).file  # the client here, beside a server host
    assert beside.observe.perf.targets == ["server", "client"] and beside.observe.pmp.targets == ["client"]
    # the client host's tools: perf for perf's client target, eu-stack for pmp's
    assert client_observer_packages(parse('client_host = "load"', rest=HOSTS + both).file) == {
        "perf": "linux-perf",
        "eu-stack": "elfutils",
    }
    server_only = parse('client_host = "load"', rest=HOSTS + "[observe]\nperf = true\npmp = true\n")
    assert client_observer_packages(server_only.file) == {}  # the server's, here: nothing on the host


def test_observe_of_one_target_keeps_perf_and_pmp_where_they_name_it() -> None:
    from perflab.observers.paired import of_target

    observe = parse('client_host = "load"', rest=HOSTS + '[observe]\nperf = { targets = ["server", "client"], '
                    'frequency = 49 }\npmp = { targets = ["client"] }\nstatus = true\n').file.observe  # fmt: skip
    server, client = of_target(observe, "server"), of_target(observe, "client")
    assert server.perf.targets == ["server"] and server.perf.frequency == 49 and server.pmp is None
    assert client.perf.targets == ["client"] and client.pmp.targets == ["client"] and server.status
    assert observe.perf.targets == ["server", "client"]  # the experiment's own, unchanged


def test_alloc_counts_a_server_where_it_runs_mariadb_or_postgresql() -> None:
    """[observe] alloc runs where the server runs (observers/alloc/tracer.py, on its place): MariaDB's, with the
    client here or on a host; PostgreSQL's (a process tree: every backend counts) too."""
    rest = HOSTS + '[observe]\nalloc = { period = "256K" }\n'
    exp = parse('server_host = "db"', rest=rest)
    assert exp.file.observe.alloc is not None and exp.file.observe.alloc.syscalls
    assert parse('server_host = "db"\nclient_host = "load"', rest=rest).file.observe.alloc is not None
    for where in ('server_host = "db"', 'server_host = "db"\nclient_host = "load"'):
        assert parse(where + '\nserver = "postgresql"', rest=rest).file.observe.alloc is not None
    local_client = parse('client_host = "load"', rest=rest)  # the server here: its counter here
    assert local_client.file.observe.alloc is not None
    pg_here = parse('client_host = "load"\nserver = "postgresql"', rest=rest)  # a PostgreSQL here, pgbench there
    assert pg_here.file.observe.alloc is not None


def test_alloc_syscalls_on_a_server_host_need_perf_there() -> None:
    from perflab.hosts.preflight import observer_packages

    rest = HOSTS + "[observe]\nalloc = true\n"
    assert observer_packages(parse('server_host = "db"', rest=rest).file) == {"perf": "linux-perf"}
    quiet = parse('server_host = "db"', rest=HOSTS + "[observe]\nalloc = { syscalls = false }\n")
    assert observer_packages(quiet.file) == {}


def _pgbench(experiment: str) -> str:
    return (
        BASE.format(experiment=experiment + '\nserver = "postgresql"', rest=HOSTS)
        .replace('test = "oltp_point_select"', 'tool = "pgbench"\ntest = "select-only"')
        .replace("tables = 1\ntable_size = 1000", "scale = 1")
    )


def test_a_postgresql_server_host_runs_sysbench_and_pgbench_from_here() -> None:
    exp = parse('server_host = "db"\nserver = "postgresql"')
    assert exp.file.experiment.server_host == "db" and exp.file.experiment.design == "sequential"
    both = parse('server_host = "db"\nclient_host = "load"\nserver = "postgresql"')
    assert both.file.experiment.client_host == "load"
    assert spec.parse(_pgbench('server_host = "db"')).file.workload.tool == "pgbench"
    both_pgbench = spec.parse(_pgbench('server_host = "db"\nclient_host = "load"'))  # pgbench on the client host
    assert both_pgbench.file.experiment.client_host == "load" and both_pgbench.file.workload.tool == "pgbench"
    # the canary and the server's I/O run where the server runs, whichever host pgbench runs on
    observe = "[observe]\nio = true\nhost_speed = true\n"
    for where in ('server_host = "db"', 'server_host = "db"\nclient_host = "load"', 'client_host = "load"'):
        observed = spec.parse(_pgbench(where) + observe).file.observe
        assert observed.io and observed.host_speed, where
    tpcc = BASE.format(experiment='server_host = "db"', rest=HOSTS).replace(
        'test = "oltp_point_select"', 'tool = "go-tpc"\ntest = "tpcc"\nwarehouses = 1'
    )
    with pytest.raises(SpecError) as exc:
        spec.parse(tpcc.replace("[dataset]\ntables = 1\ntable_size = 1000\n", ""))
    found = {p.path: p.render() for p in exc.value.problems}
    assert "a tool that takes its password from a file with server_host" in found["workload.tool"], found
    for where in ('server_host = "db"', 'server_host = "db"\nclient_host = "load"'):
        pg = tpcc.replace("[dataset]\ntables = 1\ntable_size = 1000\n", "").replace(
            'server_host = "db"', where + '\nserver = "postgresql"'
        )
        assert spec.parse(pg).file.workload.tool == "go-tpc", where


def test_calibrate_keeps_the_server_host_and_its_canary_there() -> None:
    from perflab.spec.aa import aa_experiment

    aa = aa_experiment(parse('server_host = "db"'), rounds=4)  # the canary runs on the host (remote_io.py)
    assert aa.file.experiment.server_host == "db" and aa.file.observe.host_speed is True
    off = aa_experiment(parse('server_host = "db"', rest=HOSTS + "[observe]\nhost_speed = false\n"), rounds=4)
    assert off.file.observe.host_speed is False


HOSTS2 = HOSTS + '[hosts.db2]\nssh = "bench@db2"\n'
AXIS = HOSTS2 + '[variants.host]\na = { server_host = "db" }\nb = { server_host = "db2" }\n'


def test_a_host_axis_runs_each_round_as_one_block_per_host() -> None:
    exp = dataclasses.replace(parse("", rest=AXIS), seed=7)
    cells = exp.cells()
    assert {c.server_host for c in cells} == {"db", "db2"} and len(cells) == 3 * 4
    assert all(c.server_host == {"a": "db", "b": "db2"}[c.variant["host"]] for c in cells)
    for repeat in (1, 2, 3):
        hosts = [c.server_host for c in cells if c.repeat == repeat]
        assert hosts in (["db", "db", "db2", "db2"], ["db2", "db2", "db", "db"])  # whole blocks
    firsts = {next(c.server_host for c in exp.round(r)) for r in range(1, 30)}
    assert firsts == {"db", "db2"}  # the hosts' order is drawn, not always the file's
    assert exp.file.experiment.design == "sequential" and "host axis host" in exp.design_reason


def test_a_host_axis_label_without_server_host_runs_on_the_experiments() -> None:
    exp = parse('server_host = "db"', rest=HOSTS2 + '[variants.host]\nhere = {}\nb = { server_host = "db2" }\n')
    assert {c.variant["host"]: c.server_host for c in exp.cells()} == {"here": "db", "b": "db2"}
    local = parse("", rest=HOSTS2 + '[variants.host]\nhere = {}\nb = { server_host = "db2" }\n')
    assert {c.variant["host"]: c.server_host for c in local.cells()} == {"here": None, "b": "db2"}


def test_a_host_axis_refuses_unknown_hosts_two_host_axes_and_a_client_host() -> None:
    found = problems("", rest=HOSTS + '[variants.host]\na = { server_host = "dbx" }\n')
    assert (
        "found 'dbx'" in found["variants.host.a.server_host"]
        and "defined hosts: load, db" in found["variants.host.a.server_host"]
    )
    two = '[variants.h1]\na = { server_host = "db" }\n[variants.h2]\nb = { server_host = "db2" }\n'
    assert "server_host to both db and db2" in " ".join(problems("", rest=HOSTS2 + two).values())
    found = problems('design = "interleaved"', rest=AXIS)
    assert "a host axis's variants run on different machines" in found["experiment.design"]


def test_a_client_host_per_variant_belongs_to_a_host_axis() -> None:
    found = problems("", rest=HOSTS + '[variants.host]\na = { client_host = "load" }\n')
    assert "client_host in the variants of a host axis" in found["variants.host.a.client_host"]
    assert "set client_host under [experiment]" in found["variants.host.a.client_host"]
    found = problems("", rest=LANES.replace('client_host = "l2"', 'client_host = "l3"'))
    assert "found 'l3'" in found["variants.host.b.client_host"]


LANES = (
    HOSTS2
    + '[hosts.l1]\nssh = "root@10.77.3.2"\n[hosts.l2]\nssh = "root@10.77.4.2"\n'
    + '[variants.host]\na = { server_host = "db", client_host = "l1" }\nb = { server_host = "db2", client_host = "l2" }\n'
)


def test_each_host_of_an_axis_with_its_own_client_host_runs_at_once() -> None:
    from perflab.spec.hosts import host_lanes

    exp = parse("", rest=LANES)
    cells = exp.cells()
    assert {(c.server_host, c.client_host) for c in cells} == {("db", "l1"), ("db2", "l2")}
    lanes = host_lanes(exp.file)
    assert lanes["concurrent"] is True and lanes["lanes"] == {"db": ["db", "l1"], "db2": ["db2", "l2"]}
    assert "client runs on host l1" in exp.design_reason
    off = host_lanes(parse("concurrent_hosts = false", rest=LANES).file)
    assert off["concurrent"] is False and off["why"] == "concurrent_hosts = false"
    from perflab.spec.hosts import longest_lane
    from perflab.spec.loading import round_seconds

    # the round's time: the busiest host's cells (half of them here), not all in turn
    assert longest_lane(exp.file) == 0.5 and longest_lane(parse("", rest=AXIS).file) == 1.0
    assert round_seconds(exp.file) * 2 == round_seconds(parse("concurrent_hosts = false", rest=LANES).file)


def test_hosts_that_share_a_machine_run_one_at_a_time_and_say_why() -> None:
    from perflab.spec.hosts import host_lanes

    here = host_lanes(parse("", rest=AXIS).file)  # both clients on this machine
    assert here["concurrent"] is False and "host db: its client runs on this machine" in here["why"]
    shared = host_lanes(parse('client_host = "load"', rest=AXIS).file)  # one client host for both
    assert shared["concurrent"] is False and "both use load" in shared["why"]
    same = LANES.replace('ssh = "root@10.77.4.2"', 'ssh = "other@10.77.3.2:2222"')  # l2 is l1's machine
    alias = host_lanes(parse("", rest=same).file)
    assert alias["concurrent"] is False and "(10.77.3.2)" in alias["why"]
    mixed = LANES.replace('b = { server_host = "db2", client_host = "l2" }', 'b = { client_host = "l2" }')
    local = host_lanes(parse("", rest=mixed).file)  # b's server on this machine
    assert local["concurrent"] is False and "its server runs on this machine" in local["why"]
    assert local["lanes"]["(this machine)"] == ["(this machine)", "l2"]


def test_an_experiment_client_host_is_the_default_of_a_host_axis_without_its_own() -> None:
    one = LANES.replace(', client_host = "l2"', "")
    cells = parse('client_host = "load"', rest=one).cells()
    assert {(c.server_host, c.client_host) for c in cells} == {("db", "l1"), ("db2", "load")}
    found = problems("concurrent_hosts = false")
    assert "concurrent_hosts with a host axis only" in found["experiment.concurrent_hosts"]


def test_a_host_axis_profiles_its_clients_where_each_runs() -> None:
    """targets naming the client with a host axis: each label's client profiled where it runs, on
    its client host or here (against its server host)."""
    from perflab.hosts.preflight import client_observer_packages

    observe = '[observe]\nperf = { targets = ["server", "client"] }\n'
    exp = parse("", rest=LANES + observe)
    assert {c.client_host for c in exp.cells()} == {"l1", "l2"}
    assert client_observer_packages(exp.file) == {"perf": "linux-perf"}
    here = LANES.replace(', client_host = "l2"', "")  # label b: its client here, its server on db2
    mixed = parse("", rest=here + observe)
    assert {c.client_host for c in mixed.cells()} == {"l1", None}
    assert client_observer_packages(mixed.file) == {"perf": "linux-perf"}  # l1's; label b's client here


def test_mysql_runs_on_a_server_host_and_beside_a_client_host() -> None:
    """MySQL's build runs there as MariaDB's do (servers/mysql_protocol.remote_server), counted by
    alloc there, its clients on either host logging in over TCP as the run's user."""
    mysql = '[builds.m97]\npackage = "mysql-server-core"\nsuite = "sid"\n[variants.server]\nm = { build = "m97" }\n'
    rest = HOSTS + mysql + "[observe]\nalloc = true\nstatus = true\n"
    for where in ('server_host = "db"', 'client_host = "load"', 'server_host = "db"\nclient_host = "load"'):
        exp = parse(f'server = "mysql"\n{where}', rest=rest)
        assert exp.file.experiment.server == "mysql" and exp.file.observe.alloc is not None, where
