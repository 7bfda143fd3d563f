"""Checks of a PostgreSQL experiment against this machine, before anything starts
(preflight.py calls these for server = "postgresql").

    tools: postgres, initdb, psql and pgbench of postgresql-15       -> exit 3 (EnvironmentProblem)
    dataset: the snapshot and one cell's copy fit the tmpfs          -> exit 3
    server_options: names postgres knows (`postgres --describe-config`)     -> exit 2 (SpecError)
    workload: pgbench options (`pgbench --help`) and its script (parsed by pgbench itself)
"""

from __future__ import annotations

import difflib
import subprocess

from perflab.errors import Problem
from perflab.spec.matrix import Experiment

PG_TOOLS = ("postgres", "initdb", "psql", "pgbench")
# initdb's cluster with the WAL kept after the checkpoint (min_wal_size = 80 MB): about 130 MiB
# (pgbench's scale: workloads/pgbench.py)
CLUSTER_BYTES = 130 << 20


def tool_problems() -> list[Problem]:
    from perflab.errors import ToolMissingError
    from perflab.servers.postgresql.server import pg_binary, run_user

    problems = []
    for name in PG_TOOLS:
        try:
            pg_binary(name)
        except ToolMissingError as exc:
            problems.append(Problem(f"(tool) {name}", "installed", "missing", exc.hint))
    try:
        run_user()
    except ToolMissingError as exc:
        problems.append(Problem("(machine) user", "a postgres user to run the server as", "none", exc.hint))
    return problems


def dataset_estimate(exp: Experiment) -> int:
    """The workload's own estimate (pgbench's scale), else sysbench's rows at ~300 B each."""
    from perflab import workloads

    own = workloads.of(exp.file).dataset_estimate(exp)
    data = exp.file.dataset
    return (data.tables * data.table_size * 300 if own is None else own) + CLUSTER_BYTES


def spec_problems(exp: Experiment) -> list[Problem]:
    problems = _server_options(exp)
    return problems


def _places(exp: Experiment, attr: str, top: str) -> list[tuple[str, dict]]:
    out = [(top, getattr(exp.file, attr) if attr == "server_options" else exp.file.workload.options)]
    for axis, entries in exp.file.variants.items():
        for label, variant in entries.items():
            out.append((f"variants.{axis}.{label}.{attr}", getattr(variant, attr)))
    return out


def _server_options(exp: Experiment) -> list[Problem]:
    from perflab.servers.postgresql.server import known_settings

    known = known_settings()
    problems = []
    for where, options in _places(exp, "server_options", "server_options"):
        for name in options:
            if name.lower() not in known:
                close = difflib.get_close_matches(name.lower(), list(known), n=3)
                hint = f"did you mean {', '.join(close)}?" if close else "see `postgres --describe-config`"
                if "innodb" in name.lower() or "-" in name:
                    hint = f"{name} is MariaDB's; PostgreSQL's settings: `postgres --describe-config`"
                problems.append(Problem(f"{where}.{name}", "a PostgreSQL setting", "unknown to postgres", hint))
    return problems


def pgbench_problems(exp: Experiment) -> list[Problem]:
    """pgbench's options (`pgbench --help`) and its script (workloads/pgbench.py asks)."""
    from perflab.workloads import pgbench
    from perflab.servers.postgresql.server import pg_binary

    binary = pg_binary("pgbench")
    help_text = subprocess.run([binary, "--help"], capture_output=True, text=True, check=False, timeout=60).stdout
    known = pgbench.long_options(help_text)
    problems = []
    for where, options in _places(exp, "workload_options", "workload.options"):
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
    from perflab.workloads import pgbench

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
