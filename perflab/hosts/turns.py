"""The interleaved design's turns for clients on a client host: one agent a host
(workloads/turn_agent.lua, run by the host's sysbench as a Lua script) holds each seat's shared file
there, writes each resume's time into it on the host's clock just before its SIGCONT, stops the
client's process group, and sends its latency histogram back. A seat's `HostTurns` is the local
TurnClock's interface (workloads/turn_latency.py: environment, read, reported, close) plus the
client's pause and resume, which a local seat sends itself.

Why an agent: a seat stops and resumes its client every turn (10 a second at `slice = 0.1`), and
turns.lua reads the last resume's time after every event from a file it maps: an SSH command a
turn would cost a new channel each time, and no shell on the host writes a double into a mapped file.
The agent reads one command a line from a channel that stays open; its commands are sent in order,
so one seat's SIGSTOP is sent before the next seat's SIGCONT, as here.

    agent = TurnAgent.start(rundir, [sysbench, lua])    # once per client host and run
    turns = agent.turns(rundir.path, 8)                  # before the client starts: environment(test)
    turns.bind(child.pid); turns.resume(); ...; turns.pause(); turns.read()

A client that counts its own turns' transactions (pgbench: its per-transaction log) needs only its
pauses and resumes: `SIGNALS`, a shell loop on the host (no sysbench there), stops and continues its
process group (`GroupTurns`), in order, as the Lua agent does.

    signals = TurnAgent.start(rundir, ["sh", "-c", SIGNALS])
    turns = GroupTurns(signals, child.pid); turns.resume(); ...; turns.pause()
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

from perflab.errors import HostLostError
from perflab.hosts.rundir import RunDir
from perflab.hosts.transport import RemoteProcess
from perflab.workloads.turn_latency import BUCKETS, Histogram, size_of

AGENT = Path(__file__).resolve().parents[1] / "workloads" / "turn_agent.lua"
ANSWER_S = 30  # a command's answer (the host is alive: its link's keepalives say otherwise)
# The signals-only agent: "C GROUP" continues the process group (no answer), "S GROUP" stops it and
# answers "ok" once sent (a group already gone is not an error: its client ended)
SIGNALS = (
    'echo ready; while read -r w g; do case "$g" in ""|*[!0-9]*) echo error; continue;; esac; '
    'case "$w" in C) kill -s CONT -- "-$g" 2>/dev/null;; S) kill -s STOP -- "-$g" 2>/dev/null; echo ok;; '
    "*) echo error;; esac; done"
)


class TurnAgent:
    """One host's agent: the commands of every seat there, one at a time."""

    def __init__(self, rundir: RunDir, proc: RemoteProcess) -> None:
        self.rundir, self._proc = rundir, proc
        self._lock = threading.Lock()
        self._slots = itertools.count()

    @classmethod
    def start(cls, rundir: RunDir, argv: list[str]) -> TurnAgent:
        """`argv`: the host's sysbench and the agent's path there (copied), or the signals-only shell."""
        proc, _ = rundir.start(argv)
        for _ in range(20):  # sysbench's banner first
            line = proc.readline(timeout=ANSWER_S)
            if line.strip() == "ready":
                return cls(rundir, proc)
            if not line:  # it ended
                break
        raise HostLostError(
            f"host {rundir.link.name}: the interleaved design's turn agent did not start ({argv[0]} {argv[-1][:60]})",
            "the host's sysbench must run Lua scripts (sysbench 1.0 with LuaJIT)",
        )

    def tell(self, line: str) -> None:
        with self._lock:
            self._proc.write(line + "\n")

    def ask(self, line: str) -> str:
        with self._lock:
            self._proc.write(line + "\n")
            answer = self._proc.readline(timeout=ANSWER_S).strip()
        if not answer or answer.startswith("error"):
            raise HostLostError(
                f"host {self.rundir.link.name}: the turn agent answered {answer or 'nothing'!r} to {line!r}",
                "a bug in perflab: report it with this line",
            )
        return answer

    def turns(self, directory: str, threads: int) -> HostTurns:
        """A seat's shared file, made new (never through a link: O_EXCL) in `directory` on the host for
        `threads` client threads: `turns-SLOT`, one a seat of the run."""
        slot = next(self._slots)
        path = f"{directory}/turns-{slot:04d}"
        self.ask(f"M {slot} {path} {threads}")
        return HostTurns(self, slot, path, threads)

    def close(self) -> None:
        self._proc.close()


class HostTurns:
    """One seat's turns on its host (TurnClock's interface, and the client's pause and resume)."""

    def __init__(self, agent: TurnAgent, slot: int, path: str, threads: int) -> None:
        self.agent, self.slot, self.path, self.threads = agent, slot, path, threads

    def environment(self, test: str) -> dict[str, str]:
        """What turns.lua reads there: the test (its path on the host), the shared file and its size."""
        return {"PERFLAB_TEST": test, "PERFLAB_TURNS": self.path, "PERFLAB_TURNS_BYTES": str(size_of(self.threads))}

    def bind(self, group: int) -> None:
        """The client's process group on the host (its RunDir.start pid)."""
        self.agent.ask(f"G {self.slot} {group}")

    def resume(self) -> None:
        """The agent writes the turn and its time on the host's clock, then continues the client."""
        self.agent.tell(f"C {self.slot}")

    def pause(self) -> None:
        self.agent.ask(f"S {self.slot}")

    def read(self) -> Histogram:
        return parse(self.agent.ask(f"R {self.slot}"))[0]

    def reported(self) -> tuple[float, float, float, float]:
        return parse(self.agent.ask(f"R {self.slot}"))[1]

    def close(self) -> None:
        pass  # the file goes with the host's run directory


def parse(answer: str) -> tuple[Histogram, tuple[float, float, float, float]]:
    """The agent's "h SUM SPANNED R W O E I:C ..." -> (the histogram, sysbench's reported counts)."""
    fields = answer.split()
    if len(fields) < 7 or fields[0] != "h":
        raise ValueError(f"not a turn agent's histogram: {answer[:80]!r}")
    total, spanned, *reported = (float(v) for v in fields[1:7])
    counts = [0.0] * BUCKETS
    for pair in fields[7:]:
        index, _, count = pair.partition(":")
        counts[int(index)] = float(count)
    return Histogram(tuple(counts), total, spanned), (reported[0], reported[1], reported[2], reported[3])


class GroupTurns:
    """One seat's pauses and resumes on its host through the signals-only agent (`SIGNALS`): a client
    that counts its own turns' transactions (pgbench)."""

    def __init__(self, agent: TurnAgent, group: int) -> None:
        self.agent, self.group = agent, group

    def resume(self) -> None:
        self.agent.tell(f"C {self.group}")

    def pause(self) -> None:
        self.agent.ask(f"S {self.group}")

