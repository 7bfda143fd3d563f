"""pgbench's options and script checked against the server's own pgbench before anything starts
(preflight: exit 2 with the option's place): options it does not know or perflab sets, and a
script pgbench cannot parse (it reports a parse error before it would connect).
"""

from __future__ import annotations

import difflib
import subprocess

from perflab.errors import Problem
from perflab.servers.postgresql.preflight import option_sets
from perflab.servers.postgresql.server import pg_binary
from perflab.spec.matrix import Experiment
from perflab.workloads import pgbench_argv as pgbench


def pgbench_problems(exp: Experiment) -> list[Problem]:
    """pgbench's options (`pgbench --help`) and its script (Pgbench.spec_problems asks)."""
    binary = pg_binary("pgbench")
    help_text = subprocess.run([binary, "--help"], capture_output=True, text=True, check=False, timeout=60).stdout
    known = pgbench.long_options(help_text)
    problems = []
    for where, options in option_sets(exp, "workload_options", "workload.options"):
        for key in options:
            name = key.replace("-", "_")
            if name in pgbench.RESERVED:
                problems.append(
                    Problem(
                        f"{where}.{key}",
                        f"no {key} (perflab sets it)",
                        key,
                        "use workload.threads, [dataset] scale, experiment.duration",
                    )
                )
            elif name not in known:
                close = difflib.get_close_matches(name, list(known), n=3)
                hint = f"did you mean {', '.join(close)}?" if close else "see `pgbench --help`"
                problems.append(Problem(f"{where}.{key}", "an option of pgbench", "unknown option", hint))
    test = exp.file.workload.test
    if test not in pgbench.BUILTINS:
        problems += _script(binary, test)
    return problems


def _script(binary: str, test: str) -> list[Problem]:
    """The script, parsed by pgbench itself: run against a socket directory that does not exist,
    it reports a parse error first, or gets as far as connecting."""
    try:
        with open(test, "rb"):
            pass
    except OSError as exc:
        return [Problem("workload.test", "a readable pgbench script", f"{test}: {exc.strerror}", "check the path")]
    argv = [binary, "-h", "/nonexistent-perflab-check", "-n", "-t", "1", f"--file={test}", "x"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    why = pgbench.script_problem(done.stderr + done.stdout)
    if why is None:
        return []
    return [Problem("workload.test", "a pgbench script that parses", why, "fix the script (see `man pgbench`)")]
