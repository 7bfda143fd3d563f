"""perflab's own CPU on a host over the whole run (hosts/own_cpu.py): the session's sshd (its own CPU and
what it reaped) less the measured processes, whose CPU their outer bash writes once they have ended, a
SIGKILL to their group included (the wrapper run here, as on a host)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from perflab.hosts.own_cpu import _MEASURED as MEASURED_FILES
from perflab.hosts.own_cpu import figures, mark, measured_s, parse_snapshot, session_ticks
from perflab.hosts.rundir import _MEASURED, _WRAPPER


def stat_line(pid: int, comm: str, ppid: int, pgid: int, own: int, reaped: int) -> str:
    # /proc/PID/stat: fields after the comm start at state (index 0); utime 11, stime 12, cutime 13, cstime 14
    rest = ["S", ppid, pgid, 0, 0, 0, 0, 0, 0, 0, 0, own, 0, reaped, 0, 20, 0, 1, 0]
    return f"{pid} ({comm}) " + " ".join(str(x) for x in rest)


def test_the_sessions_cpu_is_its_sshds_own_and_what_it_reaped() -> None:
    text = "\n".join(["102", "100", stat_line(100, "sshd", 90, 90, 40, 960), stat_line(102, "sh", 100, 100, 0, 0)])
    assert session_ticks(parse_snapshot(text)) == 1000
    assert session_ticks(parse_snapshot("102\n100\n" + stat_line(102, "sh", 1, 1, 0, 0))) is None  # no sshd above


def test_perflabs_own_cpu_over_the_run_is_the_session_less_the_measured_processes() -> None:
    got = figures(session_s=62.0, measured=61.59, wall_s=100.0)
    assert got == {"cpu_s": 0.41, "measured_cpu_s": 61.59, "session_cpu_s": 62.0, "wall_s": 100.0, "cores": 0.0041}
    assert measured_s("0m1.250s 0m0.250s\n1m0.000s 0m0.090s\n") == pytest.approx(61.59)


def test_a_measured_process_killed_with_its_group_still_has_its_cpu_written(tmp_path: Path) -> None:
    """The outer bash is outside the measured session: the group's SIGKILL leaves it, and it writes the
    `times` of everything below it (the busy loop's CPU), and passes setsid's status on."""
    burn = ["sh", "-c", "while :; do :; done"]
    argv = ["bash", "-c", _MEASURED, str(tmp_path), "setsid", "--wait", "sh", "-c", _WRAPPER, str(tmp_path), *burn]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    group = int(proc.stdout.readline())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _cpu_s(group) < 0.2:  # busy for 0.2 s of CPU, however long that takes
        time.sleep(0.05)
    used = _cpu_s(group)
    os.killpg(group, signal.SIGKILL)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == signal.SIGKILL and "did not exit normally" in err  # setsid's, passed on
    (written,) = tmp_path.glob("measured-*")
    done = subprocess.run(["sh", "-c", MEASURED_FILES, str(tmp_path)], capture_output=True, text=True, check=True)
    text = done.stdout
    assert text.count("\n") == 1 and measured_s(text) >= used - 0.011, (written.read_text(), used)


def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Host:
    """A host's answers to the reading command: its processes' stat lines, then its measured files."""

    name = "db"

    def __init__(self) -> None:
        self.sshd, self.measured, self.ran = (40, 960), "", []

    def run(self, argv: list[str], timeout: float = 60) -> SimpleNamespace:
        self.ran.append(argv)
        own, reaped = self.sshd
        stats = [stat_line(100, "sshd", 90, 90, own, reaped), stat_line(102, "sh", 100, 100, 0, 0)]
        return SimpleNamespace(status=0, stdout="\n".join(["102", "100", *stats, "--", self.measured]), stderr="")


def test_a_cells_figure_is_the_session_less_the_servers_that_ended_in_it() -> None:
    host = Host()
    start = mark(host, "/dev/shm/perflab-host-x")  # type: ignore[arg-type]
    assert start.ticks == 1000 and start.measured_s == 0.0 and host.ran[0][-1] == "/dev/shm/perflab-host-x"
    host.sshd, host.measured = (45, 1950), "0m9.000s 0m0.500s\n"  # the server ended: 9.5 s, reaped by the session
    got = start.until(mark(host, "/dev/shm/perflab-host-x"))  # type: ignore[arg-type]
    assert got is not None and got["session_cpu_s"] == 9.95 and got["measured_cpu_s"] == 9.5 and got["cpu_s"] == 0.45


def test_a_host_that_does_not_answer_gives_no_figure() -> None:
    host = Host()
    start = mark(host, "/dev/shm/perflab-host-x")  # type: ignore[arg-type]
    host.run = lambda argv, timeout=60: SimpleNamespace(status=None, stdout="", stderr="")  # type: ignore[method-assign]
    assert start.until(mark(host, "/dev/shm/perflab-host-x")) is None  # type: ignore[arg-type]
