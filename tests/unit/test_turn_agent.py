"""The interleaved design's turn agent (workloads/turn_agent.lua, hosts/turns.py), run here by this
machine's sysbench as a host's would run it, over pipes in place of an SSH channel: it makes a seat's
shared file as turns.lua reads it, stops and resumes a real process group, writes each resume's time
on the clock turns.lua times with, and sends the histogram back as the local TurnClock reads it."""

from __future__ import annotations

import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from perflab.errors import HostLostError
from perflab.hosts.turns import AGENT, SIGNALS, GroupTurns, TurnAgent, parse
from perflab.workloads.turn_latency import BUCKETS, HEADER, STRIDE, TurnClock


class _Pipes:
    """A local process as hosts/transport.RemoteProcess offers it: write, readline, close."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def write(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text)
        self.proc.stdin.flush()

    def readline(self, timeout: float | None = None) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline()

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(10)
        self.proc.stdout.close()


class _RunDir:
    """What TurnAgent.start asks of a host's run directory: start a process, the link's name."""

    link = SimpleNamespace(name="here")

    def __init__(self) -> None:
        self.started: list[_Pipes] = []

    def start(self, argv: list[str], measured: bool = False) -> tuple[_Pipes, int]:
        pipes = _Pipes(argv)
        self.started.append(pipes)
        return pipes, pipes.proc.pid


@pytest.fixture
def agent() -> Iterator[TurnAgent]:
    rundir = _RunDir()
    started = TurnAgent.start(rundir, ["sysbench", str(AGENT)])  # type: ignore[arg-type]
    yield started
    started.close()
    assert rundir.started[0].proc.returncode == 0  # it ends at the end of its input


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_seat_is_stopped_and_resumed_and_each_resume_timed(agent: TurnAgent, tmp_path: Path) -> None:
    path = tmp_path / "turns-0000"  # the agent's first seat
    turns = agent.turns(str(tmp_path), 2)
    assert oct(path.stat().st_mode & 0o777) == "0o600" and path.stat().st_size == (HEADER + 2 * STRIDE) * 8
    assert turns.environment("oltp_read_only")["PERFLAB_TURNS_BYTES"] == str(path.stat().st_size)
    with subprocess.Popen(["setsid", "sleep", "60"]) as client:
        try:
            time.sleep(0.2)  # setsid has made its group
            turns.bind(client.pid)
            turns.pause()  # answered once sent: stopped before the next command
            assert _stopped(client.pid, "T"), _state(client.pid)
            before = time.monotonic() * 1000
            turns.resume()
            turns.pause()  # in order: the resume was done before this answer
            after = time.monotonic() * 1000
            header = struct.unpack_from("<5d", path.read_bytes())
            assert before <= header[0] <= after and header[1:] == (2.0, BUCKETS, STRIDE, 1.0)  # turn 1, timed
            turns.resume()
            assert _stopped(client.pid, "S"), _state(client.pid)
        finally:
            client.kill()


def test_the_histogram_comes_back_as_the_local_clock_reads_it(agent: TurnAgent, tmp_path: Path) -> None:
    path = tmp_path / "turns-0000"
    turns = agent.turns(str(tmp_path), 3)
    local = TurnClock(path, 3)  # turns.lua's side: each thread adds to its own part
    try:
        parts = [(10, 5, 2.5, 1), (10, 2, 0.75, 0), (900, 1, 123.0, 2)]  # bucket, count, sum, spanned
        for thread, (bucket, count, total, spanned) in enumerate(parts):
            base = (HEADER + thread * STRIDE) * 8
            struct.pack_into("<d", local._map, base + bucket * 8, count)
            struct.pack_into("<2d", local._map, base + BUCKETS * 8, total, spanned)
        struct.pack_into("<4d", local._map, 5 * 8, 100.0, 20.0, 10.0, 10.0)  # sysbench's reports
        assert turns.read() == local.read() and turns.read().events == 8
        assert turns.reported() == local.reported() == (100.0, 20.0, 10.0, 10.0)
        assert turns.read().spanned == 3 and turns.read().sum_ms == pytest.approx(126.25)
    finally:
        local.close()


def test_a_command_it_cannot_use_is_an_error_naming_it(agent: TurnAgent, tmp_path: Path) -> None:
    with pytest.raises(HostLostError) as exc:
        agent.ask("S 99")  # no such seat
    assert "'S 99'" in exc.value.message
    turns = agent.turns(str(tmp_path), 1)  # the agent goes on after it
    assert turns.read().events == 0 and turns.path == f"{tmp_path}/turns-0000"
    (tmp_path / "turns-0001").symlink_to(tmp_path / "elsewhere")  # planted where the next seat's goes
    with pytest.raises(HostLostError):
        agent.turns(str(tmp_path), 1)  # made new, never through a link (O_EXCL)
    assert not (tmp_path / "elsewhere").exists()
    with pytest.raises(ValueError):
        parse("ok")


def _stopped(pid: int, state: str) -> bool:
    """Whether `pid` reaches `state` (T; else running or sleeping) within 10 s: a signal sent is taken
    when the process next runs, which on a loaded machine (or a paused VM) is not at once."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _state(pid) == state or (state != "T" and _state(pid) in ("S", "R")):
            return True
        time.sleep(0.01)
    return False


def test_the_signals_agent_stops_and_continues_a_group_in_order() -> None:
    """pgbench's seats on a host (no sysbench there): the shell agent stops a real process group,
    answering once the signal is sent, continues it, and refuses a group that is not a number."""
    rundir = _RunDir()
    signals = TurnAgent.start(rundir, ["sh", "-c", SIGNALS])  # type: ignore[arg-type]
    try:
        with subprocess.Popen(["setsid", "sleep", "60"]) as client:
            try:
                time.sleep(0.2)  # setsid has made its group
                turns = GroupTurns(signals, client.pid)
                turns.pause()
                assert _stopped(client.pid, "T"), _state(client.pid)
                turns.resume()
                assert _stopped(client.pid, "S"), _state(client.pid)
                turns.pause()
                assert _stopped(client.pid, "T"), _state(client.pid)  # sent before the answer, taken when it next runs
            finally:
                client.kill()
        GroupTurns(signals, 2**22 + 7).pause()  # a group already gone: not an error (its client ended)
        with pytest.raises(HostLostError) as exc:
            signals.ask("S 12x")
        assert "'S 12x'" in exc.value.message
    finally:
        signals.close()
    assert rundir.started[0].proc.returncode == 0

