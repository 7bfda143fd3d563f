"""perf and pmp of a client here beside a server on its host (run/ends.ServerThere): the server's
profilers there, of [observe] restricted to the server; the client's here, a local cell's profilers of
the client alone (observers/paired.alone), its pid given when the workload starts."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from perflab.hosts.place import HostPlace
from perflab.observers.paired import Paired, on_host
from perflab.places.here import Here
from perflab.run.ends import ClientHere
from perflab.spec import ObserveSection


def runner(observe: ObserveSection) -> SimpleNamespace:
    """A run whose server host answers `readlink /proc/PID/exe` (its profilers name the server's binary)."""
    answer = SimpleNamespace(status=0, stdout="/usr/sbin/mariadbd\n", stderr="")
    link = SimpleNamespace(name="db", run=lambda argv, **_: answer)
    host = SimpleNamespace(rundir=SimpleNamespace(path="/dev/shm/perflab-host-abc", link=link), link=link)
    kind = SimpleNamespace(profiles_tree=False)
    return SimpleNamespace(exp=SimpleNamespace(file=SimpleNamespace(observe=observe)), server_host=host, kind=kind)


def beside_server_host(runner: SimpleNamespace, cell: SimpleNamespace, server: SimpleNamespace, clock: None) -> Paired:
    """As ServerThere.observers pairs them: the server's there, of [observe] restricted to it; the client's here."""
    observe = runner.exp.file.observe
    host = runner.server_host
    there = f"{host.rundir.path}/profile-{cell.order:04d}"
    mine = on_host(observe, "server", server.pid, server.rundir, host.rundir, there, clock)
    return Paired(mine, ClientHere.profilers(None, runner, cell, server))  # type: ignore[arg-type]


def test_the_client_alone_is_profiled_here_and_the_server_alone_there(tmp_path: Path) -> None:
    observe = ObserveSection.model_validate(
        {"perf": {"targets": ["server", "client"]}, "pmp": {"targets": ["client"]}, "host_speed": True}
    )
    cell, server = SimpleNamespace(order=3), SimpleNamespace(pid=4242, rundir=tmp_path)
    paired = beside_server_host(runner(observe), cell, server, None)
    assert paired.server is not None and paired.client is not None
    assert isinstance(paired.server.site.place, HostPlace) and isinstance(paired.client.site.place, Here)
    assert paired.server.binaries == {"server": "db:/usr/sbin/mariadbd"} and paired.server.own_clock
    assert str(paired.server.site.dir) == "/dev/shm/perflab-host-abc/profile-0003" and paired.server.site.own_dir
    there, here = paired.server.observe, paired.client.observe
    assert there.perf.targets == ["server"] and there.pmp is None  # pmp names the client only
    assert here.perf.targets == ["client"] and here.pmp.targets == ["client"]
    assert not here.host_speed and paired.client.pids == {} and paired.client.binaries == {}  # no server here
    try:
        paired.workload_started(SimpleNamespace(pid=os.getpid()))  # the client's process here
        assert paired.client.pids == {"client": os.getpid()} and paired.client.binaries["client"]
        assert set(paired.client.pmp) == {"client"}  # its stack sampler started (pmp warmup = false: paused)
    finally:
        paired.client.__exit__(None, None, None)


def test_without_a_client_target_only_the_servers_profilers_run() -> None:
    observe = ObserveSection.model_validate({"perf": {"targets": ["server"]}})
    paired = beside_server_host(runner(observe), SimpleNamespace(order=0), SimpleNamespace(pid=1, rundir=Path()), None)
    assert paired.client is None and paired.server is not None and paired.members == [paired.server]
    client_only = ObserveSection.model_validate({"perf": {"targets": ["client"]}})
    paired = beside_server_host(
        runner(client_only), SimpleNamespace(order=0), SimpleNamespace(pid=1, rundir=Path("/x")), None
    )
    assert paired.server is None and paired.members == [paired.client]


def test_paired_hands_each_member_its_start() -> None:
    calls: list[str] = []
    server = SimpleNamespace(workload_started=lambda: calls.append("server"))
    client = SimpleNamespace(workload_started=lambda child: calls.append(f"client {child}"))
    Paired(server, client).workload_started(77)  # type: ignore[arg-type]  (its pid there: ClientOnHost.running)
    assert calls == ["server", "client 77"]
