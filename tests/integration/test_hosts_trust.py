"""A shared lab's hosts (issue 48) against real sshd hosts in network namespaces (sshhosts.py): a host
whose key nothing would check is refused (`UserKnownHostsFile none`, `StrictHostKeyChecking no`, a
missing known_hosts), a changed key is refused, and what a dead run of this machine left on a host
is found and removed from the host's side when perflab next connects there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from perflab.errors import HostKeyError
from perflab.hosts.target import CONFIG_ENV, parse_target
from perflab.hosts.transport import Connection
from tests.integration.sshhosts import SshLab, ssh_hosts

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def module_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshLab]:
    """One host for the whole module: each test writes the ssh config it needs (read on every connect)."""
    with ssh_hosts(tmp_path_factory.mktemp("trust"), ["db"]) as lab:
        yield lab


@pytest.fixture
def lab(module_lab: SshLab, monkeypatch: pytest.MonkeyPatch) -> Iterator[SshLab]:
    monkeypatch.setenv(CONFIG_ENV, str(module_lab.config))
    config, known = module_lab.config.read_text(), module_lab.known_hosts.read_text()
    yield module_lab
    module_lab.config.write_text(config)
    module_lab.known_hosts.write_text(known)


def _config(lab: SshLab, *lines: str) -> None:
    """The lab's config for db, its known_hosts lines replaced by `lines`."""
    db = lab.hosts["db"]
    old = lab.config.read_text().splitlines()
    kept = [line for line in old if "KnownHostsFile" not in line and "Strict" not in line]
    assert kept[0].startswith("Host db ")
    lab.config.write_text("\n".join([*kept, *(f"  {line}" for line in lines)]) + "\n")
    assert db.address in lab.config.read_text()


def _open(lab: SshLab) -> Connection:
    return Connection.open("db", parse_target(lab.hosts["db"].ssh))


def test_user_known_hosts_none_is_refused_not_unchecked(lab: SshLab) -> None:
    # asyncssh checks nothing when the config says none: perflab, root on the host, would talk to
    # whatever answers at that address
    _config(lab, "UserKnownHostsFile none", "GlobalKnownHostsFile none")
    with pytest.raises(HostKeyError) as refused:
        _open(lab).close()
    assert refused.value.exit_code == 3 and "host db" in refused.value.message
    assert "UserKnownHostsFile none" in refused.value.message
    assert "ssh-keyscan -H" in str(refused.value.hint) and lab.hosts["db"].address in str(refused.value.hint)


def test_a_global_known_hosts_file_checks_the_key_when_the_user_has_none(lab: SshLab) -> None:
    _config(lab, "UserKnownHostsFile none", f"GlobalKnownHostsFile {lab.known_hosts}")
    link = _open(lab)
    assert link.run(["true"]).status == 0
    link.close()


def test_strict_host_key_checking_no_is_refused(lab: SshLab) -> None:
    _config(lab, f"UserKnownHostsFile {lab.known_hosts}", "StrictHostKeyChecking no")
    with pytest.raises(HostKeyError) as refused:
        _open(lab).close()
    assert "StrictHostKeyChecking no" in refused.value.message and "refused" in refused.value.message


def test_a_missing_known_hosts_file_is_refused_with_the_way_to_add_the_key(lab: SshLab) -> None:
    _config(lab, f"UserKnownHostsFile {lab.dir / 'nonesuch'}", "GlobalKnownHostsFile none")
    with pytest.raises(HostKeyError) as refused:
        _open(lab).close()
    assert str(lab.dir / "nonesuch") in refused.value.message
    assert "ssh-keyscan -H" in str(refused.value.hint) and "fingerprint" in str(refused.value.hint)


def test_an_unknown_and_a_changed_key_are_told_apart_and_both_refused(lab: SshLab) -> None:
    db = lab.hosts["db"]
    lab.known_hosts.write_text("10.255.255.1 " + lab.known_hosts.read_text().split(" ", 1)[1])  # another host's
    with pytest.raises(HostKeyError) as unknown:
        _open(lab).close()
    assert "not in" in unknown.value.message and "ssh-keyscan -H" in str(unknown.value.hint)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(lab.dir / "other")], check=True)
    wrong = " ".join((lab.dir / "other.pub").read_text(encoding="ascii").split()[:2])
    lab.known_hosts.write_text(f"{db.address} {wrong}\n")
    with pytest.raises(HostKeyError, match="not the one known_hosts has") as changed:
        _open(lab).close()
    assert "ssh-keygen -R" in str(changed.value.hint)


def test_run_check_refuses_an_unchecked_host(lab: SshLab, tmp_path: Path) -> None:
    _config(lab, "UserKnownHostsFile /dev/null", "StrictHostKeyChecking no")
    exp = tmp_path / "exp.toml"
    exp.write_text(
        f'[hosts.load]\nssh = "{lab.hosts["db"].ssh}"\n[experiment]\nname = "t"\nduration = "2s"\n'
        'client_host = "load"\n[workload]\ntest = "oltp_point_select"\nthreads = [1]\n'
    )
    done = subprocess.run([sys.executable, "-m", "perflab", "run", str(exp), "--check"], capture_output=True,
                          text=True, env=lab.env(), cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "StrictHostKeyChecking no" in done.stdout + done.stderr


_KILLED_RUN = """
import sys, time
from pathlib import Path
from perflab.hosts.session import Hosts
from perflab.hosts.target import parse_target
work = Path(sys.argv[1]); work.mkdir()
hosts = Hosts({"db": parse_target(sys.argv[2])}, work).__enter__()
_, pid = hosts.rundir("db").start(["sleep", "304"])
disk = hosts.rundir("db").on_disk(sys.argv[3]) if len(sys.argv) > 3 else ""
print(pid, hosts.rundir("db").path, disk, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def _killed_run(lab: SshLab, tmp_path: Path, *storage: str) -> tuple[int, str, str]:
    """A run on db killed with SIGKILL, its local work directory gone too (this machine rebooted):
    (the pid of what it started there, its run directory there, its directory in `storage` there)."""
    run = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, str(tmp_path / "work"), lab.hosts["db"].ssh, *storage],
                           stdout=subprocess.PIPE, text=True, env=lab.env(), cwd=ROOT)  # fmt: skip
    assert run.stdout is not None
    pid_text, path, *disk = run.stdout.readline().split()
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=30)
    run.stdout.close()
    subprocess.run(["rm", "-rf", str(tmp_path / "work")], check=True)
    return int(pid_text), path, "".join(disk)


def _planted(name: str, controller: str, uid: int) -> tuple[Path, subprocess.Popen[bytes]]:
    """A directory named as a run directory, naming `controller`, owned by `uid`, with a process of
    that uid tagged with it: what another account, or another controller, has on the host."""
    planted = Path(f"/dev/shm/perflab-host-{name}{os.getpid()}")
    planted.mkdir(mode=0o700)
    (planted / "controller").write_text(controller + "\n")
    os.chown(planted / "controller", uid, uid)
    os.chown(planted, uid, uid)
    proc = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "305"],
                            env={"PATH": os.environ["PATH"], "PERFLAB_RUN": str(planted)})  # fmt: skip
    return planted, proc


def test_a_dead_runs_leftovers_are_swept_from_the_hosts_side_on_connect(
    lab: SshLab, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from perflab.hosts import rundir
    from perflab.hosts.session import Hosts

    pid, path, _ = _killed_run(lab, tmp_path)
    assert _alive(pid) and Path(path).is_dir()  # a reboot here would leave these running there
    mine = rundir.controller()
    theirs, theirs_proc = _planted("other", "0123456789abcdef0123456789abcdef /dev/shm", 0)
    foreign, foreign_proc = _planted("nobody", mine, 65534)  # an account naming this controller
    live = tmp_path / "live"
    live.mkdir()
    try:
        with Hosts({"db": parse_target(lab.hosts["db"].ssh)}, live) as other:  # a live run beside
            _, live_pid = other.rundir("db").start(["sleep", "306"])
            keeper = int(str(other.rundir("db").keeper))
            assert _lock_held(other.rundir("db").path) and "tail" in Path(f"/proc/{keeper}/cmdline").read_text()
            deadline = time.monotonic() + 10  # the killed run's connection ends on the host
            while time.monotonic() < deadline and _alive(int(pid)) and _lock_held(path):
                time.sleep(0.1)
            with Hosts({"db": parse_target(lab.hosts["db"].ssh)}, tmp_path) as hosts:
                assert not _alive(pid) and not Path(path).exists()
                assert _alive(live_pid) and Path(other.rundir("db").path).is_dir()
                assert Path(hosts.rundir("db").path).is_dir()
            said = capfd.readouterr().err
            assert f"host db: removed {path}" in said and str(pid) in said and "dead run of this machine" in said
        time.sleep(0.1)
        assert not _alive(keeper)  # the run's end stops its keeper
        assert theirs.is_dir() and theirs_proc.poll() is None  # another controller's: left alone
        assert foreign.is_dir() and foreign_proc.poll() is None  # not this controller's account's: left alone
    finally:
        for proc, planted in ((theirs_proc, theirs), (foreign_proc, foreign)):
            proc.kill()
            proc.wait()
            subprocess.run(["rm", "-rf", str(planted)], check=True)
        if _alive(pid):  # a failed sweep: the test's own cleanup
            os.kill(pid, signal.SIGKILL)
        subprocess.run(["rm", "-rf", path], check=True)


def _lock_held(path: str) -> bool:
    return subprocess.run(["flock", "-n", f"{path}/lock", "true"], check=False).returncode != 0


def test_a_dead_runs_datadirs_on_a_hosts_disk_are_swept_when_that_storage_is_next_used(
    lab: SshLab, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from perflab.hosts.session import Hosts

    storage = tmp_path / "disk"
    storage.mkdir()
    pid, path, disk = _killed_run(lab, tmp_path, str(storage))
    assert Path(disk).is_dir() and Path(disk).parent == storage
    os.kill(pid, signal.SIGKILL)  # the host rebooted: its tmpfs (the run directory) is gone, the disk is not
    subprocess.run(["rm", "-rf", path], check=True)
    with Hosts({"db": parse_target(lab.hosts["db"].ssh)}, tmp_path) as hosts:
        mine = hosts.rundir("db").on_disk(str(storage))
        assert not Path(disk).exists() and Path(mine).is_dir()
        assert f"host db: removed {disk}" in capfd.readouterr().err
    assert not Path(mine).exists() and list(storage.iterdir()) == []


def test_doctor_clean_sweeps_the_storage_runs_used_on_hosts(lab: SshLab, tmp_path: Path) -> None:
    storage = tmp_path / "disk2"
    storage.mkdir()
    pid, path, disk = _killed_run(lab, tmp_path, str(storage))
    os.kill(pid, signal.SIGKILL)  # both machines rebooted: the host's tmpfs and this one's are empty
    subprocess.run(["rm", "-rf", path], check=True)
    # this controller's doctor (the same PERFLAB_TMPFS, and so the same record of storage directories)
    done = subprocess.run([sys.executable, "-m", "perflab", "doctor", "--clean"], capture_output=True, text=True,
                          env=lab.env(), cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"removed {lab.hosts['db'].ssh}:{disk}" in done.stdout, done.stdout
    assert not Path(disk).exists()
