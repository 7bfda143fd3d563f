"""The workload seam (issue 34 item 1, issue 35 item 4): everything that differs between the
workload tools lives in its module under perflab/workloads/, reached through
`workloads.get(name)` / `workloads.of(spec)`. Outside it, no code compares a value with a tool's
name. Adding a tool is then adding a module there (go-tpc was the third).

Found by reading the AST of every module, so a comment or a docstring that names a tool does
not count, and a new branch anywhere fails here with its file and line."""

from __future__ import annotations

import ast
from pathlib import Path

from perflab import workloads
from perflab.workloads import Workload, pgbench_argv
from perflab.spec.fields import TEST_CHECKS

PACKAGE = Path(workloads.__file__).resolve().parents[1]
TOOL_NAMES = set(workloads.NAMES)
# Branches still to move behind Workload (file: count); the list may only shrink.
ALLOWED: dict[str, int] = {
    # report/ never imports run/: whether a stored run's tool could have run interleaved
    "report/findings.py": 1,
}


def _branches(tree: ast.AST) -> list[int]:
    """Lines of comparisons with a workload tool's name."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                values = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                if any(isinstance(v, ast.Constant) and v.value in TOOL_NAMES for v in values):
                    lines.append(node.lineno)
                    break
    return sorted(set(lines))


def _outside() -> dict[str, list[int]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("workloads/"):
            continue
        lines = _branches(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[relative] = lines
    return found


def test_no_branch_on_the_workload_tool_outside_its_package():
    found = _outside()
    new = {f: lines for f, lines in found.items() if len(lines) > ALLOWED.get(f, 0)}
    assert not new, f"branches on the workload tool outside perflab/workloads/ (move them behind Workload): {new}"
    stale = {f: n for f, n in ALLOWED.items() if len(found.get(f, [])) < n}
    assert not stale, f"lower ALLOWED to what is left: {stale} (found {found})"


def test_the_rule_finds_a_branch():
    code = 'if spec.workload.tool == "go-tpc":\n    pass\nx = tool in ("pgbench", "x")\ny = "sysbench"\n'
    assert _branches(ast.parse(code)) == [1, 3]


def test_every_tool_implements_the_interface():
    assert set(TEST_CHECKS) == set(workloads.NAMES)  # [workload] test checked as each tool names its tests
    required = ("run_argv", "prepare_argv")
    for name in workloads.NAMES:
        found = workloads.get(name)
        assert found.name == name and found.database and found.throughput
        # a client that resets its statistics reads its output; one that logs every transaction
        # runs past the window (tail_s), is ended at its end mark and cut at perflab's marks
        own = ("window_output", "end_now") if found.tail_s else ("read_output",)
        missing = [attr for attr in required + own if getattr(type(found), attr) is getattr(Workload, attr)]
        assert not missing, f"{name} does not implement {missing}"
    assert workloads.get("pgbench").tail_s > 0 and not workloads.get("sysbench").tail_s
    assert workloads.get("go-tpc").interleaved_refusal and not workloads.get("sysbench").interleaved_refusal
    assert workloads.get("go-tpc").stamps_lines
    # the warm-up and the window count from the client's start where a tool tells it (run/window.py)
    watched = {n for n in workloads.NAMES if type(workloads.get(n)).start_watch is not Workload.start_watch}
    assert watched == {"sysbench", "pgbench"}


def test_training_and_prepare_commands_are_the_tools_own(monkeypatch, tmp_path):
    """Moved behind Workload, the PGO training and dataset commands are what the servers ran before."""
    from types import SimpleNamespace

    from perflab import spec
    from perflab.workloads import sysbench

    monkeypatch.setattr(sysbench, "sysbench_binary", lambda: "sysbench")
    server = SimpleNamespace(socket=tmp_path / "s.sock", rundir=tmp_path, bindir=None, port=5432,
                             client_target=(tmp_path, 5432, "postgres"))
    maria = spec.parse('[experiment]\nname = "t"\n[workload]\ntest = "oltp_read_only"\nthreads = [1, 4]\n').file
    assert workloads.of(maria).training_argv(maria, server, 30) == sysbench.argv(
        "oltp_read_only", "run", socket=server.socket, tables=4, table_size=10000, threads=4, seconds=30, options={}
    )
    assert "--db-driver=mysql" in workloads.of(maria).prepare_argv(maria, server)
    pg = spec.parse('[experiment]\nname = "t"\nserver = "postgresql"\n[workload]\ntest = "oltp_read_only"\n').file
    assert "--db-driver=pgsql" in workloads.of(pg).training_argv(pg, server, 30)
    bench = spec.parse(
        '[experiment]\nname = "t"\nserver = "postgresql"\n[dataset]\nscale = 3\n'
        '[workload]\ntool = "pgbench"\ntest = "tpcb-like"\nthreads = [2]\n'
    ).file
    monkeypatch.setattr("perflab.servers.postgresql.server.pg_binary", lambda name, bindir=None: name)
    assert workloads.of(bench).prepare_argv(bench, server) == pgbench_argv.init_argv(
        3, socket_dir=tmp_path, port=5432, user="postgres", binary="pgbench"
    )
    training = workloads.of(bench).training_argv(bench, server, 30)
    assert "--client=2" in training and "--time=30" in training and "--log" not in training
