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
    kept = [line for line in lab.config.read_text().splitlines() if "KnownHostsFile" not in line and "Strict" not in line]
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
