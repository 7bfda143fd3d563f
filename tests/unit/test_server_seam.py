"""The server seam (issue 34): everything that differs between servers lives in its package
under perflab/servers/, reached through `servers.kind(name)`. Outside it, no code compares a
value with a server kind's name, no isinstance() picks a server class, and no module is a
`pg*` or `mysql*` sibling of a generic one. Inside it, every package is a kind registered in
`servers.KINDS`, and every kind has its package, which imports no other kind's package (a
MySQL server is no object of the mariadb package: what the kinds share is a module beside
them, as mysqld.py's server process). Adding a server is then adding a package.

Found by reading the AST of every module, so a comment or a docstring that names a server does
not count, and a new branch anywhere fails here with its file and line."""

from __future__ import annotations

import ast
from pathlib import Path

from perflab import servers
from perflab.servers import identity, kind
from perflab.servers.kind import Kind

PACKAGE = Path(servers.__file__).resolve().parents[1]
REGISTRIES = {"__init__.py", "mysql_dialects.py"}  # the modules that may name every kind's package
KIND_NAMES = {"mariadb", "mysql", "percona", "postgresql", "postgres"}
SERVER_CLASSES = {"Mysqld", "MariaDB", "PostgreSQL"}
# Branches still to move behind Kind (file: count); the list may only shrink. Empty since
# 2026-11-27: a new entry needs a reason that no Kind method can carry.
ALLOWED: dict[str, int] = {}


def _branches(tree: ast.AST) -> list[int]:
    """Lines of comparisons with a kind's name and of isinstance() on a server class."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for operand in operands:
                values = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                if any(isinstance(v, ast.Constant) and v.value in KIND_NAMES for v in values):
                    lines.append(node.lineno)
                    break
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)} if len(node.args) > 1 else set()
            if names & SERVER_CLASSES:
                lines.append(node.lineno)
    return sorted(set(lines))


def _outside() -> dict[str, list[int]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("servers/"):
            continue
        lines = _branches(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[relative] = lines
    return found


def test_no_branch_on_the_server_kind_outside_its_package():
    found = _outside()
    new = {f: lines for f, lines in found.items() if len(lines) > ALLOWED.get(f, 0)}
    assert not new, f"branches on the server kind outside perflab/servers/ (move them behind Kind): {new}"
    # the list shrinks as branches move: an entry with fewer branches than allowed is lowered
    stale = {f: n for f, n in ALLOWED.items() if len(found.get(f, [])) < n}
    assert not stale, f"lower ALLOWED to what is left: {stale} (found {found})"


def test_the_rule_finds_a_branch():
    code = 'if spec.experiment.server == "postgresql":\n    pass\nif isinstance(server, PostgreSQL):\n    pass\n'
    assert _branches(ast.parse(code)) == [1, 3]
    assert _branches(ast.parse('x = "postgresql"  # a value, not a branch\n')) == []
    assert _branches(ast.parse('if server in ("mysql", "percona"):\n    pass\n')) == [1]


def test_no_pg_or_mysql_sibling_modules():
    siblings = [
        p.relative_to(PACKAGE).as_posix()
        for pattern in ("pg*", "mysql*", "maria*", "percona*")
        for p in PACKAGE.rglob(pattern)
        if not p.relative_to(PACKAGE).as_posix().startswith(("servers/", "workloads/"))  # pgbench: a workload
        and p.name != "pgo.py"  # profile-guided optimisation, of every kind
        and "__pycache__" not in p.parts
    ]
    assert not siblings, f"server-specific modules outside perflab/servers/: {siblings}"


def test_every_package_in_servers_is_a_registered_kind_and_back():
    """perflab/servers/<kind>/ holds one kind each; what kinds share is a module beside them
    (mysql_protocol.py, mysqld.py, managed.py), not a package of no kind."""
    packages = {p.parent.name for p in (PACKAGE / "servers").glob("*/__init__.py")}
    assert packages == set(servers.KINDS) == set(servers.NAMES)
    for name, found in servers.KINDS.items():
        assert type(found).__module__ == f"perflab.servers.{name}", f"{name} is defined outside its package"
    flavors = [f for k in servers.every() for f in k.flavors]
    assert len(flavors) == len(set(flavors)), f"a flavor claimed by two kinds: {flavors}"
    assert sorted(flavors) == sorted(identity.FLAVORS)  # every flavor a version line can name has its kind


def test_every_kind_is_a_package_that_implements_the_interface():
    for name in servers.NAMES:
        found = kind(name)
        assert found.name == name and (PACKAGE / "servers" / name / "__init__.py").is_file()
        missing = [
            attr
            for attr, value in vars(Kind).items()
            if callable(value)
            and not attr.startswith("_")
            and getattr(type(found), attr) is value
            and attr
            not in ("cell_options", "window_checks", "spec_problems", "connection_problems", "short_version", "format",
                    "clients_connected", "storage_problems", "opens", "facts", "status", "remote_init",
                    "remote_server")  # fmt: skip
        ]
        assert not missing, f"{name} does not implement {missing}"
    assert kind("postgresql").memory_figure == "PSS" and kind("mariadb").sysbench_driver == "mysql"
    assert kind("mysql").sysbench_driver == "mysql" and kind("mysql").title == "MySQL"


def _kind_imports(tree: ast.AST, package: str) -> list[tuple[int, str]]:
    """(line, kind) of each import of a kind's package (perflab.servers.<kind>[.module]) by a
    module of `package` (relative imports resolved against it)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - max(node.level - 1, 0)] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            modules = [module] if module != "perflab.servers" else [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[:2] == ["perflab", "servers"] and len(parts) > 2 and parts[2] in servers.NAMES:
                found.append((node.lineno, parts[2]))
    return sorted(found)


def test_no_kind_package_imports_another_nor_a_shared_module_any():
    """servers/mysql/ imports nothing of servers/mariadb/ (and no kind's package another's), and
    what the kinds share (mysql_protocol.py, mysqld.py, managed.py ...) imports no kind's package:
    only the registries name them: servers/__init__.py every kind, mysql_dialects.py the MySQL
    family's dialects and datadir plans (by a binary's flavor, below the kinds: no import cycle)."""
    crossing = []
    for path in sorted((PACKAGE / "servers").rglob("*.py")):
        relative = path.relative_to(PACKAGE / "servers")
        if relative.as_posix() in REGISTRIES:
            continue
        own = relative.parts[0] if len(relative.parts) > 1 else None
        package = ".".join(["perflab", "servers", *relative.parts[:-1]])
        for line, name in _kind_imports(ast.parse(path.read_text(encoding="utf-8")), package):
            if name != own:
                crossing.append(f"servers/{relative.as_posix()}:{line} imports servers/{name}/")
    assert not crossing, f"move what two kinds share into a module beside their packages: {crossing}"


def test_the_rule_finds_an_import_of_another_kind():
    code = (
        "from perflab.servers.mariadb.server import X\n"
        "from perflab.servers import mariadb, mysqld\n"
        "import perflab.servers.postgresql.io\n"
        "from ..mariadb import flavor\n"
        "from . import datadir\n"
        "from perflab.servers.mysql_protocol import Flavor\n"
    )
    found = _kind_imports(ast.parse(code), "perflab.servers.mysql")
    assert found == [(1, "mariadb"), (2, "mariadb"), (3, "postgresql"), (4, "mariadb"), (5, "mysql")]


def test_every_mysql_protocol_kind_runs_the_shared_server_process(tmp_path: Path):
    """MySQL's server is a Mysqld (servers/mysqld.py), as MariaDB's is: a class of no kind's package."""
    kinds = [k for k in servers.every() if k.mysql_protocol]
    assert len(kinds) >= 2
    for found in kinds:
        server = found.server(tmp_path, tmp_path / "data", {})
        assert type(server).__module__ == "perflab.servers.mysqld", f"{found.name}: {type(server)}"
