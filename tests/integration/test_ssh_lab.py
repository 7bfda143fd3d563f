"""The test hosts themselves (sshhosts.py): reachable by OpenSSH with the test's own config and
known_hosts, each in its namespace, and nothing of them left afterwards."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.integration.sshhosts import ssh_hosts


def _ssh(config: Path, host: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", "-F", str(config), "-o", "BatchMode=yes", host, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_hosts_answer_over_ssh_and_vanish_afterwards(tmp_path: Path) -> None:
    with ssh_hosts(tmp_path, ["db", "load"]) as lab:
        db, load = lab.hosts["db"], lab.hosts["load"]
        assert db.address != load.address and db.address.startswith("10.77.")
        done = _ssh(lab.config, "db", "ip", "-4", "-o", "addr", "show", "eth0")
        assert done.returncode == 0, done.stderr
        assert f"{db.address}/30" in done.stdout  # the command ran inside db's namespace
        assert _ssh(lab.config, load.ssh, "true").returncode == 0  # user@address, as perflab's TOML names it
        namespaces = (db.namespace, load.namespace)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert not any(ns in listed for ns in namespaces)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert db.link not in links and load.link not in links
    assert db.sshd.poll() is not None and load.sshd.poll() is not None


def test_a_changed_host_key_is_refused_by_the_known_hosts(tmp_path: Path) -> None:
    with ssh_hosts(tmp_path, ["db"]) as lab:
        db = lab.hosts["db"]
        text = lab.known_hosts.read_text(encoding="ascii")
        other = subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True
        )
        assert other.returncode == 0
        wrong = (tmp_path / "other.pub").read_text(encoding="ascii").split()[:2]
        lab.known_hosts.write_text(f"{db.address} {' '.join(wrong)}\n", encoding="ascii")
        done = _ssh(lab.config, "db", "true")
        assert done.returncode == 255 and "HOST IDENTIFICATION HAS CHANGED" in done.stderr
        lab.known_hosts.write_text(text, encoding="ascii")
        assert _ssh(lab.config, "db", "true").returncode == 0
