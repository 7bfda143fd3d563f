"""`perflab run --check -o DIR` refuses a DIR that holds results exactly as the run itself does
(the same message, exit 2), before any check of the machine: nothing here needs a server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def perflab(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "perflab", *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_check_refuses_an_output_that_holds_results_as_the_run_does(tmp_path: Path):
    (tmp_path / "results.db").write_bytes(b"")
    checked = perflab("run", "examples/quick.toml", "--check", "-o", str(tmp_path))
    ran = perflab("run", "examples/quick.toml", "-o", str(tmp_path))
    assert checked.returncode == ran.returncode == 2
    assert checked.stderr == ran.stderr
    assert f"{tmp_path} already holds results" in checked.stderr and "--resume" in checked.stderr
    assert checked.stdout == ""  # refused before the plan is printed
