"""Checks of a PostgreSQL experiment against this machine, before anything starts
(preflight.py calls these for server = "postgresql").

    tools: postgres, initdb, psql and pgbench of postgresql-15       -> exit 3 (EnvironmentProblem)
    dataset: the snapshot and one cell's copy fit the tmpfs          -> exit 3
    server_options: names postgres knows (`postgres --describe-config`)     -> exit 2 (SpecError)
    (pgbench's options and script: workloads/pgbench_check.py)
"""

from __future__ import annotations

import difflib

from perflab.errors import Problem
from perflab.spec.matrix import Experiment

PG_TOOLS = ("postgres", "initdb", "psql", "pgbench")
# initdb's cluster with the WAL kept after the checkpoint (min_wal_size = 80 MB): about 130 MiB
# (pgbench's scale: workloads/pgbench.py)
CLUSTER_BYTES = 130 << 20


def tool_problems() -> list[Problem]:
    from perflab.errors import ToolMissingError
    from perflab.servers.postgresql.server import pg_binary
    from perflab.servers.postgresql.user import run_user

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


def dataset_estimate(exp: Experiment, own: int | None) -> int:
    """The workload's `own` estimate (pgbench's scale), else sysbench's rows at ~300 B each."""
    data = exp.file.dataset
    return (data.tables * data.table_size * 300 if own is None else own) + CLUSTER_BYTES


def spec_problems(exp: Experiment) -> list[Problem]:
    problems = _server_options(exp)
    return problems


def option_sets(exp: Experiment, attr: str, top: str) -> list[tuple[str, dict]]:
    """Where options of `attr` are given: [experiment]'s (`top`) and every variant's, with their values."""
    out = [(top, getattr(exp.file, attr) if attr == "server_options" else exp.file.workload.options)]
    for axis, entries in exp.file.variants.items():
        for label, variant in entries.items():
            out.append((f"variants.{axis}.{label}.{attr}", getattr(variant, attr)))
    return out


def _server_options(exp: Experiment) -> list[Problem]:
    from perflab.servers.postgresql.server import known_settings

    known = known_settings()
    problems = []
    for where, options in option_sets(exp, "server_options", "server_options"):
        for name in options:
            if name.lower() not in known:
                close = difflib.get_close_matches(name.lower(), list(known), n=3)
                hint = f"did you mean {', '.join(close)}?" if close else "see `postgres --describe-config`"
                if "innodb" in name.lower() or "-" in name:
                    hint = f"{name} is MariaDB's; PostgreSQL's settings: `postgres --describe-config`"
                problems.append(Problem(f"{where}.{name}", "a PostgreSQL setting", "unknown to postgres", hint))
    return problems
