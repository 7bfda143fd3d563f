"""perflab/hosts without a network: ssh targets, the clock estimate and its refusal, the fingerprint's
parsers over a recorded machine, and the local record doctor --clean reads."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from perflab import hostinfo
from perflab.errors import ClockAlignmentError
from perflab.hosts import rundir
from perflab.hosts.clock import MAX_ERROR_S, ClockReading, align, best_exchange
from perflab.hosts.target import SshTarget, parse_target


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("root@db1", SshTarget("root", "db1", None)),
        ("bench@10.77.3.2:2222", SshTarget("bench", "10.77.3.2", 2222)),
        ("u@[fd00::2]:22", SshTarget("u", "fd00::2", 22)),
    ],
)
def test_targets_parse(text: str, target: SshTarget) -> None:
    assert parse_target(text) == target


@pytest.mark.parametrize(
    "text", ["db1", "root@", "@db1", "root@db1:0", "root@db1:70000", "root@db 1", "-oProxyCommand=x@h"]
)
def test_bad_targets_say_the_form(text: str) -> None:
    with pytest.raises(ValueError, match="user@address"):
        parse_target(text)


def test_the_shortest_round_trip_is_kept() -> None:
    # remote 5 s ahead; the slow exchange (0.3 s) would put the offset 0.1 s off
    exchanges = [(100.0, 105.25, 100.3), (101.0, 106.0005, 101.001), (102.0, 107.02, 102.01)]
    reading = best_exchange(exchanges)
    assert reading.rtt_s == pytest.approx(0.001) and reading.error_s == pytest.approx(0.0005)
    assert reading.offset_s == pytest.approx(5.0, abs=1e-9)


def test_alignment_is_refused_past_50_ms() -> None:
    near = ClockReading(offset_s=2.0, rtt_s=0.002, error_s=0.001, at=0)
    aligned = align("db", near, ClockReading(2.004, 0.002, 0.001, at=60))
    assert aligned.shift_s == pytest.approx(-2.002) and aligned.error_s == pytest.approx(0.003)
    assert aligned.wall(1002.002) == pytest.approx(1000.0)
    assert aligned.monotonic(1002.002) == pytest.approx(1000.0 - aligned.wall_minus_monotonic)
    far = ClockReading(offset_s=2.0, rtt_s=2 * (MAX_ERROR_S + 0.01), error_s=MAX_ERROR_S + 0.01, at=60)
    with pytest.raises(ClockAlignmentError, match="host db: its clock is known only within 60 ms"):
        align("db", near, far)
    drifting = ClockReading(offset_s=2.2, rtt_s=0.002, error_s=0.001, at=60)  # 200 ms of drift over the run
    with pytest.raises(ClockAlignmentError, match="drift 200 ms"):
        align("db", near, drifting)


class RecordedMachine:
    """A Probe answering from recorded files and commands."""

    files: ClassVar[dict[str, str]] = {
        "/proc/cpuinfo": "processor\t: 0\nmodel name\t: Ampere Altra\nmicrocode\t: 0xd\n\nprocessor\t: 1\n",
        "/proc/sys/kernel/osrelease": "6.1.0-26-arm64\n",
        "/proc/sys/kernel/hostname": "db2\n",
        "/sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
        "/sys/devices/system/cpu/smt/control": "on\n",
    }
    commands: ClassVar[dict[str, str]] = {
        "uname": "aarch64\n",
        "getconf": "glibc 2.36\n",
        "grep": "/sys/devices/system/cpu/vulnerabilities/spectre_v2:Mitigation: CSV2, BHB\n"
        "/sys/devices/system/cpu/vulnerabilities/meltdown:Not affected\n",
        "sh": "libc6=2.36-9+deb12u7\nsysbench=1.0.20+ds-5\n",
    }

    def read(self, path: str) -> str | None:
        return self.files.get(path)

    def run(self, argv: list[str]) -> str | None:
        return self.commands.get(argv[0])


def test_the_fingerprint_of_a_recorded_machine() -> None:
    got = hostinfo.fingerprint(RecordedMachine())
    assert got == {
        "hostname": "db2",
        "kernel": "6.1.0-26-arm64",
        "machine": "aarch64",
        "cpu_model": "Ampere Altra",
        "microcode": "0xd",
        "cores": 2,
        "governor": None,  # no cpufreq on this machine
        "smt": "on",
        "thp": "madvise",
        "mitigations": {"meltdown": "Not affected", "spectre_v2": "Mitigation: CSV2, BHB"},
        "glibc": "glibc 2.36",
        "packages": {"libc6": "2.36-9+deb12u7", "sysbench": "1.0.20+ds-5"},
    }


def test_differences_name_only_what_differs() -> None:
    a = {"hostname": "a", "kernel": "6.1", "thp": "madvise", "packages": {"libc6": "2.36"}}
    b = {"hostname": "b", "kernel": "6.1", "thp": "always", "packages": {"libc6": "2.36"}}
    assert hostinfo.differences({"local": a, "db": b}) == {"thp": {"local": "madvise", "db": "always"}}


def test_the_local_record_round_trips_and_ignores_junk(tmp_path: Path) -> None:
    places = [rundir.Placement("db", "root@10.77.1.2", "/dev/shm/perflab-host-abc123")]
    rundir.record(tmp_path, places)
    assert rundir.recorded(tmp_path) == places
    (tmp_path / rundir.RECORD).write_text('[{"name": "db"}, 3, {"name": "x", "ssh": "a@b", "path": "/p"}]')
    assert rundir.recorded(tmp_path) == [rundir.Placement("x", "a@b", "/p")]
    (tmp_path / rundir.RECORD).write_text("not json")
    assert rundir.recorded(tmp_path) == []


def test_the_report_line_of_a_client_host() -> None:
    from perflab.report.phrases import host_lines

    meta = {
        "hosts": {
            "version": 1,
            "hosts": {"load": {"ssh": "root@10.77.1.2", "clock": {"start": {"rtt_s": 0.00042}}, "lost": None}},
            "differences": {"thp": {"local": "madvise", "load": "always"}},
        }
    }
    cells = [{"client": {"host": "load", "bytes_per_txn": 300.0}}, {"client": {"host": "load", "bytes_per_txn": 310.0}}]
    line = "client on host load (root@10.77.1.2): 0.42 ms round trip, 305 bytes per transaction; "
    assert host_lines(meta, cells) == [line + "differs from this machine in thp"]
    assert host_lines({}, cells) == []


def test_the_remote_clients_cpu_readings() -> None:
    from perflab.hosts.child import stat_cpu_s, times_cpu_s

    stat = "4711 (sysbench) S 4700 4700 4700 0 -1 4194560 900 0 0 0 250 75 0 0 20 0 3 0 1234 0 0\n100\n"
    assert stat_cpu_s(stat) == pytest.approx(3.25)  # (250 + 75) ticks at 100 a second
    assert stat_cpu_s("cat: /proc/4711/stat: No such file or directory\n") is None
    assert times_cpu_s("0m0.004s 0m0.001s\n1m2.500s 0m0.750s\n") == pytest.approx(63.25)  # the children's line
    assert times_cpu_s("") is None


def test_the_report_says_how_a_host_axis_ran() -> None:
    from perflab.report.phrases import host_lines

    lanes = {"db1": ["db1", "load1"], "db2": ["db2", "load2"]}
    at_once = {"concurrent": True, "why": "every server host has client hosts of its own", "lanes": lanes}
    assert host_lines({"host_schedule": at_once}, []) == [
        "hosts db1, db2 ran each round at once: every server host has client hosts of its own"
    ]
    why = "host db1: its client runs on this machine, beside the others"
    apart = {"concurrent": False, "why": why, "lanes": lanes}
    assert host_lines({"host_schedule": apart}, []) == [f"hosts db1, db2 ran one at a time: {why}"]
