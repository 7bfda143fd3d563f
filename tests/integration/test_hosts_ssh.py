"""perflab/hosts against real sshd hosts in network namespaces (sshhosts.py): connections, run
directories, remote processes by process group, clocks, fingerprints, refused host keys, a host
that drops off, and `perflab doctor --clean` after a SIGKILLed perflab."""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perflab.errors import HostKeyError, HostLostError, HostUnreachableError, ToolMissingError
from perflab.hosts import rundir
from perflab.hosts.clock import MAX_ERROR_S
from perflab.hosts.session import Hosts
from perflab.hosts.target import CONFIG_ENV, parse_target
from perflab.hosts.transport import Connection
from tests.integration.sshhosts import SshLab

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def lab(ssh_lab: SshLab, monkeypatch: pytest.MonkeyPatch) -> SshLab:
    monkeypatch.setenv(CONFIG_ENV, str(ssh_lab.config))
    return ssh_lab


def _targets(lab: SshLab) -> dict:
    return {name: parse_target(h.ssh) for name, h in lab.hosts.items()}


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def _netns_of(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def test_a_run_on_two_hosts_leaves_nothing(lab: SshLab, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    with Hosts(_targets(lab), workdir) as hosts:
        assert {p.name for p in rundir.recorded(workdir)} == {"db", "load"}
        _, pid = hosts.rundir("load").start(["sleep", "300"])
        assert _alive(pid) and os.getpgid(pid) == pid  # its own process group
        assert _netns_of(pid) == _netns_of(lab.hosts["load"].sshd.pid) != _netns_of(os.getpid())
        child = hosts.rundir("db").start(["sh", "-c", "sleep 301 & echo started; wait"])[0]
        assert child.readline(timeout=30).strip() == "started"  # output streamed as it comes
        assert Path(hosts.rundir("db").path).is_dir()
        hosts.require("load", {"sleep": "coreutils"})
        with pytest.raises(ToolMissingError, match="host load has no no-such-tool-here") as missing:
            hosts.require("load", {"no-such-tool-here": "sysbench-nonesuch"})
        assert missing.value.exit_code == 3 and "apt-get install sysbench-nonesuch" in str(missing.value.hint)
        hosts.measure_end()
        meta = hosts.meta()
        dirs = [hosts.rundir(n).path for n in ("db", "load")]
    assert not _alive(pid) and not any(Path(d).exists() for d in dirs)
    assert not (workdir / rundir.RECORD).exists()
    assert subprocess.run(["pgrep", "-f", "sleep 301"], capture_output=True, check=False).returncode == 1
    load = meta["hosts"]["load"]
    assert load["ssh"] == lab.hosts["load"].ssh and meta["version"] == 1
    for reading in (load["clock"]["start"], load["clock"]["end"]):
        # the same kernel clock on both sides: the offset is within the error NTP's rule gives
        assert abs(reading["offset_s"]) <= reading["error_s"] + 0.002 and reading["error_s"] < MAX_ERROR_S
    aligned = load["clock"]  # the run's alignment (align()): a shift within its error, not refused
    assert aligned["refused"] is None and abs(aligned["shift_s"]) <= aligned["error_s"] + 0.002
    assert load["fingerprint"]["kernel"] == platform.release()
    assert load["fingerprint"]["packages"]["libc6"] and load["fingerprint"]["mitigations"]
    assert meta["differences"] == {}  # one machine: nothing differs


def test_unknown_or_changed_host_keys_are_refused(lab: SshLab) -> None:
    db = lab.hosts["db"]
    lab.known_hosts.write_text("", encoding="ascii")  # an unknown host: never accepted as new
    with pytest.raises(HostKeyError) as unknown:
        Connection.open("db", parse_target(db.ssh))
    assert unknown.value.exit_code == 3 and "host db" in unknown.value.message
    other = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(lab.dir / "other")], check=True)
    assert other.returncode == 0
    wrong = " ".join((lab.dir / "other.pub").read_text(encoding="ascii").split()[:2])
    lab.known_hosts.write_text(f"{db.address} {wrong}\n", encoding="ascii")
    with pytest.raises(HostKeyError, match="not the one known_hosts has"):
        Connection.open("db", parse_target(db.ssh))


def test_an_unreachable_host_is_named(lab: SshLab) -> None:
    lab.hosts["db"].drop()
    with pytest.raises(HostUnreachableError) as exc:
        Connection.open("db", parse_target(lab.hosts["db"].ssh))
    assert exc.value.exit_code == 3 and "host db" in exc.value.message and lab.hosts["db"].address in exc.value.message


def test_a_host_that_drops_off_stays_recorded(lab: SshLab, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    with Hosts(_targets(lab), workdir) as hosts:
        _, pid = hosts.rundir("db").start(["sleep", "302"])
        lab.hosts["db"].drop()  # kills every sshd of the namespace, and so the session's connection
        with pytest.raises(HostLostError, match="host db"):
            hosts.link("db").run(["true"])
        assert hosts.link("load").run(["true"]).status == 0  # the other host goes on
    assert [p.name for p in rundir.recorded(workdir)] == ["db"]  # for doctor --clean
    assert hosts.hosts["db"].lost and "db" in hosts.hosts["db"].lost
    # the test's own cleanup: db has no sshd left to clean through (its namespace shares this filesystem)
    os.kill(pid, signal.SIGKILL)
    shutil.rmtree(hosts.hosts["db"].rundir.path)


_KILLED_RUN = """
import sys, time
from pathlib import Path
from perflab.hosts.session import Hosts
from perflab.hosts.target import parse_target
from perflab.run.workdir import work_dir
held = work_dir(Path(sys.argv[1]))  # a run's work directory, as the run makes it
work = held.__enter__()
hosts = Hosts({"load": parse_target(sys.argv[2])}, work).__enter__()
_, pid = hosts.rundir("load").start(["sleep", "303"])
print(pid, hosts.rundir("load").path, work, flush=True)
time.sleep(600)
"""


def test_doctor_clean_stops_what_a_killed_run_left_on_its_hosts(lab: SshLab, tmp_path: Path) -> None:
    tmpfs = tmp_path / "tmpfs"
    tmpfs.mkdir()
    env = {**lab.env(), "PERFLAB_TMPFS": str(tmpfs), "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(
        [sys.executable, "-c", _KILLED_RUN, str(tmpfs), lab.hosts["load"].ssh],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert run.stdout is not None
    pid_text, path, work = run.stdout.readline().split()
    pid = int(pid_text)
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=30)
    run.stdout.close()
    time.sleep(0.2)
    assert _alive(pid) and Path(path).is_dir()  # what a SIGKILL leaves behind on the host
    facts = subprocess.run([sys.executable, "-m", "perflab", "doctor", "--format", "json"], capture_output=True,
                           text=True, env=env, cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert json.loads(facts.stdout)["machine"]["leftovers"] == {"workdirs": 1, "processes": 0, "remote": 1}
    done = subprocess.run(
        [sys.executable, "-m", "perflab", "doctor", "--clean"],
        capture_output=True,
        check=False,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"removed load:{path}" in done.stdout and str(pid) in done.stdout
    assert not _alive(pid) and not Path(path).exists() and not Path(work).exists()
