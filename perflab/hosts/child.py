"""A workload's client on a host (`client_host`, hosts/client.py), as workloads/client.py drives a
local one: started in the run directory's wrapper, its output streamed back into a local file (each
line stamped on arrival for a tool whose reports carry no time), its pid, CPU and signals there.

    child = RemoteChild(rundir, argv, out, "sysbench")   # ClientOnHost.seat_start
    child.wait(30); child.cpu_s(); child.signal_client("INT")
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from pathlib import Path
from typing import Self, TextIO

from perflab.errors import HostLostError
from perflab.hosts.rundir import RunDir
from perflab.workloads.client import stamp

# $0: where bash writes `times` (its children's user and system CPU) once sysbench has exited; "$@": sysbench
_CLIENT = '"$@" 2>&1; s=$?; times > "$0"; exit $s'
# $0: the wrapper's pid (bash); its child is sysbench: its /proc stat line, then the clock tick
_CHILD_STAT = "c=$(cat /proc/$0/task/$0/children); cat /proc/${c%% *}/stat; getconf CLK_TCK"
# $0: the wrapper's pid: its child's (the client's) pid
_CHILD_PID = "c=$(cat /proc/$0/task/$0/children) && echo ${c%% *}"
# $0: the wrapper's pid: the sockets its child (the client) holds open
_CHILD_SOCKETS = 'c=$(cat /proc/$0/task/$0/children) && ls -l /proc/${c%% *}/fd | grep -c " socket:"'
# $0: the wrapper's pid, $1: a signal: sent to its child (the client)
_SIGNAL_CHILD = 'c=$(cat /proc/$0/task/$0/children) && kill -s "$1" ${c%% *}'
_TIMES = re.compile(r"(\d+)m([\d.]+)s\s+(\d+)m([\d.]+)s")


def stat_cpu_s(text: str) -> float | None:
    """user + system CPU seconds from a /proc/PID/stat line followed by CLK_TCK's line."""
    lines = text.strip().splitlines()
    if len(lines) != 2 or ")" not in lines[0] or not lines[1].isdigit():
        return None
    fields = lines[0].rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / int(lines[1]) if len(fields) > 12 else None


def times_cpu_s(text: str) -> float | None:
    """bash's `times`: the second line (its children's) "0m1.234s 0m0.567s" -> 1.801."""
    found = _TIMES.findall(text)
    if len(found) < 2:
        return None
    um, us, sm, ss = found[1]
    return int(um) * 60 + float(us) + int(sm) * 60 + float(ss)


class RemoteChild:
    """The workload's client (`tool`: sysbench, pgbench) on the host, as workloads/client.py drives a local
    Child: poll, wait, kill, `started`; its output (stderr merged) copied into `out` as it comes."""

    def __init__(
        self, rundir: RunDir, argv: list[str], out: Path, tool: str = "sysbench", stamped: bool = False
    ) -> None:
        self.rundir, self.rusage, self.tool = rundir, None, tool  # no rusage here: its CPU is the host's (cpu_s)
        self.argv, self.stamped = argv, stamped  # stamped: each line prefixed with its arrival, as a local client's
        self.times = f"{rundir.path}/times-{out.parent.name}"  # bash's `times` once sysbench has exited
        self.started = time.monotonic()
        self.lost: str | None = None
        self._code: int | None = None
        self._done = threading.Event()
        sink = out.open("w", encoding="utf-8")  # before the start watch reads it
        try:
            self.proc, self.pid = rundir.start(["bash", "-c", _CLIENT, self.times, *argv], measured=True)
        except BaseException:
            sink.close()
            raise
        self._thread = threading.Thread(target=self._pump, args=(sink,), name="remote-client", daemon=True)
        self._thread.start()

    def _pump(self, sink: TextIO) -> None:
        try:
            with sink:
                for line in self.proc.lines():  # a stamp: seconds since the launch (workloads/client.start)
                    sink.write(stamp(time.monotonic() - self.started, line) if self.stamped else line)
                    sink.flush()
            status = self.proc.wait(timeout=30).status
            if status is None:  # no exit status: the connection ended under it (a host that dropped off)
                self.lost = f"host {self.rundir.link.name}: the connection ended before {self.tool} did"
            self._code = status if status is not None else -9
        except (HostLostError, TimeoutError) as exc:
            self.lost = getattr(exc, "message", None) or f"host {self.rundir.link.name}: {exc}"
            self._code = -9
        finally:
            self._done.set()

    def signal_client(self, name: str) -> None:
        """Send signal `name` to the client alone (not its wrapper, which writes `times` once it exits)."""
        with contextlib.suppress(HostLostError):
            self.rundir.link.run(["sh", "-c", _SIGNAL_CHILD, str(self.pid), name])

    def client_pid(self) -> int | None:
        """The client's own pid on its host (the wrapper's child: bash waits for it); None once it has exited."""
        found = self.rundir.link.run(["sh", "-c", _CHILD_PID, str(self.pid)]).stdout.strip()
        return int(found) if found.isdigit() else None

    def sockets(self) -> int:
        """How many sockets the client holds open on its host (its connections); 0 once it has exited."""
        found = self.rundir.link.run(["sh", "-c", _CHILD_SOCKETS, str(self.pid)]).stdout.strip()
        return int(found) if found.isdigit() else 0

    def cpu_s(self) -> float | None:
        """The client's CPU so far, on its host (None when it cannot be read: it has exited)."""
        return stat_cpu_s(self.rundir.link.run(["sh", "-c", _CHILD_STAT, str(self.pid)]).stdout)

    def cpu_at_exit_s(self) -> float | None:
        """The client's whole CPU, from bash's `times` after it exited (None: killed, or not written)."""
        done = self.rundir.link.run(["cat", self.times])
        return times_cpu_s(done.stdout) if done.status == 0 else None

    def poll(self) -> int | None:
        return self._code if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise TimeoutError(f"{self.tool} on {self.rundir.link.name} still running after {timeout}s")
        assert self._code is not None
        return self._code

    def kill(self) -> None:
        if not self._done.is_set():
            with contextlib.suppress(HostLostError):
                self.rundir.kill(self.pid)
            self._done.wait(10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
