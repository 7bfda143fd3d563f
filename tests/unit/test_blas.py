"""perflab's own process loads numpy's and scipy's OpenBLAS with one thread (perflab/cli/blas.py),
and what it starts does not inherit the setting."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

THREADS = "import os, {module}; print(open('/proc/self/status').read().split('Threads:')[1].split()[0], os.environ.get('OPENBLAS_NUM_THREADS'))"


def _threads_and_variable(module: str, **env: str) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    code = THREADS.format(module=module)
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, env={**base, **env}, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_cli_runs_one_thread_and_leaves_the_environment_as_it_was():
    assert _threads_and_variable("perflab.cli") == ["1", "None"]
    if len(os.sched_getaffinity(0)) > 1:  # what it saves: OpenBLAS's own threads, one per further CPU
        threads, _ = _threads_and_variable("numpy, scipy.special")
        assert int(threads) > 1


def test_a_users_setting_is_left_alone():
    threads, variable = _threads_and_variable("perflab.cli", OPENBLAS_NUM_THREADS="2")
    assert variable == "2" and (int(threads) > 1 or len(os.sched_getaffinity(0)) == 1)
