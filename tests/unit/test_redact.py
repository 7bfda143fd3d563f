"""Passwords are never shown (issue 48): a URL's `user:PASSWORD@` and `?password=`, a command line's
`--mysql-password=X` or `--password X`, and SQL's `IDENTIFIED BY '...'` / `PASSWORD '...'` become
`***` wherever perflab prints, logs or stores such a string (perflab/redact.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from perflab.errors import PerflabError
from perflab.places.proc import call
from perflab.redact import redact, redact_argv

ROOT = Path(__file__).resolve().parents[2]
SECRET = "hunter2xyz"


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        (f"postgresql://perf@db/h?password={SECRET}", "postgresql://perf@db/h?password=***"),
        (
            f"postgresql://perf@db/h?sslmode=require&password={SECRET}&x=1",
            "postgresql://perf@db/h?sslmode=require&password=***&x=1",
        ),
        (f"postgres://perf:{SECRET}@db:5432/h", "postgres://perf:***@db:5432/h"),
        (f"https://me:{SECRET}@git.example/x.git", "https://me:***@git.example/x.git"),
        (f"host=db user=perf password={SECRET} dbname=h", "host=db user=perf password=*** dbname=h"),
        (f"sysbench --mysql-password={SECRET} run", "sysbench --mysql-password=*** run"),
        (f"--pgsql-password={SECRET}", "--pgsql-password=***"),
        (f"CREATE USER 'perflab'@'%' IDENTIFIED BY '{SECRET}'; GO", "CREATE USER 'perflab'@'%' IDENTIFIED BY '***'; GO"),
        (f"ALTER ROLE perflab PASSWORD '{SECRET}'", "ALTER ROLE perflab PASSWORD '***'"),
        ("postgresql://perf@db/h", "postgresql://perf@db/h"),  # nothing to hide
        ("/dev/shm/perflab-host-a1b2c3/cell-0001", "/dev/shm/perflab-host-a1b2c3/cell-0001"),
        ("user@10.0.0.5:2222", "user@10.0.0.5:2222"),
    ],
)
def test_passwords_are_starred(shown: str, expected: str) -> None:
    assert redact(shown) == expected


def test_an_argv_option_and_its_value_apart() -> None:
    argv = ["mariadb", "--password", SECRET, "-e", f"SET PASSWORD = PASSWORD('{SECRET}')", "--user=perflab"]
    assert SECRET not in " ".join(redact_argv(argv)) and redact_argv(argv)[2] == "***"
    assert redact_argv(argv)[-1] == "--user=perflab"


def test_a_failed_command_shows_no_password() -> None:
    with pytest.raises(PerflabError) as failed:
        call(["sh", "-c", "exit 3", f"--mysql-password={SECRET}"], what="a login")
    assert SECRET not in failed.value.message + str(failed.value.hint) and "***" in str(failed.value.hint)


def test_an_unreachable_history_url_is_printed_without_its_password(tmp_path: Path) -> None:
    url = f"postgresql://perf@127.0.0.1:1/h?password={SECRET}&connect_timeout=2"
    done = subprocess.run([sys.executable, "-m", "perflab", "history", "--history", url, "nonesuch"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert SECRET not in done.stdout + done.stderr and "password=***" in done.stderr
