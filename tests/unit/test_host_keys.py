"""hosts/hostkeys.py without a network: which known_hosts files check a host's key, as the ssh config
says for that host, and the refusal when nothing would (issue 48). The SSH side is
tests/integration/test_hosts_trust.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflab.hosts.hostkeys import HostKeyUncheckedError, known_hosts_for
from perflab.hosts.target import CONFIG_ENV, parse_target

ENTRY = "db1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPkb7z2Lr0S3Z4Ckd0rqbO9hUvHq1B0V6kqQ5m4VtJ1S\n"
TARGET = parse_target("root@db1")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    return tmp_path


def _config(home: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    (home / "config").write_text(text)
    monkeypatch.setenv(CONFIG_ENV, str(home / "config"))


def test_the_users_known_hosts_by_default(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (home / ".ssh" / "known_hosts").write_text(ENTRY)
    _config(home, monkeypatch, "Host db1\n  User root\n")
    assert str(home / ".ssh" / "known_hosts") in known_hosts_for("db", TARGET)


def test_none_and_none_is_refused(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (home / ".ssh" / "known_hosts").write_text(ENTRY)  # there, but the config turns it off
    _config(home, monkeypatch, "Host db1\n  UserKnownHostsFile none\n  GlobalKnownHostsFile none\n")
    with pytest.raises(HostKeyUncheckedError, match="UserKnownHostsFile none and GlobalKnownHostsFile none") as e:
        known_hosts_for("db", TARGET)
    assert e.value.exit_code == 3 and "ssh-keyscan -H db1 >> ~/.ssh/known_hosts" in str(e.value.hint)
    assert "remove `UserKnownHostsFile none`" in str(e.value.hint)


def test_the_global_file_checks_when_the_user_file_is_none(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (home / "global").write_text(ENTRY)
    _config(home, monkeypatch, f"Host db1\n  UserKnownHostsFile none\n  GlobalKnownHostsFile {home / 'global'}\n")
    assert known_hosts_for("db", TARGET) == [str(home / "global")]


@pytest.mark.parametrize("content", [None, "", "# only a comment\n\n"])
def test_a_missing_or_empty_file_checks_nothing(
    home: Path, monkeypatch: pytest.MonkeyPatch, content: str | None
) -> None:
    if content is not None:
        (home / "kh").write_text(content)
    _config(home, monkeypatch, f"Host *\n  UserKnownHostsFile {home / 'kh'}\n  GlobalKnownHostsFile none\n")
    with pytest.raises(HostKeyUncheckedError, match="missing, unreadable or empty"):
        known_hosts_for("db", parse_target("root@db1:2222"))
    with pytest.raises(HostKeyUncheckedError) as e:
        known_hosts_for("db", parse_target("root@db1:2222"))
    assert "ssh-keyscan -H -p 2222 db1" in str(e.value.hint)


@pytest.mark.parametrize("value", ["no", "off", "No"])
def test_strict_host_key_checking_no_is_refused(home: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    (home / ".ssh" / "known_hosts").write_text(ENTRY)
    _config(home, monkeypatch, f"Host db1\n  StrictHostKeyChecking={value}\n")
    with pytest.raises(HostKeyUncheckedError, match=f"StrictHostKeyChecking {value.lower()}.*accepts any key"):
        known_hosts_for("db", TARGET)


def test_only_the_hosts_own_blocks_apply(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (home / ".ssh" / "known_hosts").write_text(ENTRY)
    _config(home, monkeypatch, "Host other\n  StrictHostKeyChecking no\n  UserKnownHostsFile none\n")
    assert str(home / ".ssh" / "known_hosts") in known_hosts_for("db", TARGET)
    _config(home, monkeypatch, "Host db1\n  StrictHostKeyChecking accept-new\n")  # checked as yes: never a new key
    assert str(home / ".ssh" / "known_hosts") in known_hosts_for("db", TARGET)
