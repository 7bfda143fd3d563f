"""One perflab run per machine: a second run refuses (exit 3) unless --allow-concurrent."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT
from tests.integration.helpers import write_experiment

# beside the other modules (paced, as theirs): only this test's runs take the machine's lock, since every
# other test runs with PERFLAB_ALLOW_CONCURRENT (tests/conftest.py), which takes none; it measures nothing

SPEC = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "{name}"
duration = "{duration}"
warmup = "1s"
repeats = 1

[dataset]
tables = 1
table_size = 1000
"""


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "perflab", *args]


def test_second_run_refuses_while_the_first_holds_the_machine(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "PERFLAB_ALLOW_CONCURRENT"}
    first_spec = write_experiment(tmp_path / "first.toml", SPEC.format(name="first", duration="20s"))
    second_spec = write_experiment(tmp_path / "second.toml", SPEC.format(name="second", duration="2s"))
    first = subprocess.Popen(
        cli("run", str(first_spec), "-o", str(tmp_path / "first")),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "first" / "results.db").exists():
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.1)
        second = subprocess.run(
            cli("run", str(second_spec), "-o", str(tmp_path / "second")),
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 3, second.stderr
        assert "another perflab run is using this machine" in second.stderr
        assert f"pid {first.pid}" in second.stderr and str(tmp_path / "first") in second.stderr
        assert "--allow-concurrent" in second.stderr and "Traceback" not in second.stderr
        assert not (tmp_path / "second").exists()
        # --check needs no lock; --allow-concurrent runs anyway
        assert (
            subprocess.run(
                cli("run", str(second_spec), "--check"), cwd=ROOT, env=env, capture_output=True, text=True
            ).returncode
            == 0
        )
        forced = subprocess.run(
            cli("run", str(second_spec), "-o", str(tmp_path / "forced"), "--allow-concurrent"),
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert forced.returncode == 0, forced.stderr
    finally:
        first.kill()  # SIGKILL: the kernel drops its lock
        first.communicate()
    after = subprocess.run(
        cli("run", str(second_spec), "-o", str(tmp_path / "after")),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert after.returncode == 0, after.stderr
