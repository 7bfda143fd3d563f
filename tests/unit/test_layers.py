"""perflab's layers (issue 47, docs/development.md "Layout"): the import graph of perflab/, imports
inside functions counted, read from the AST of every module.

The base modules, places/ and store/ import nothing above them; builds/, workloads/ and observers/
never import run/ or a verb; and no module is in an import cycle, imports inside functions and
under TYPE_CHECKING counted (a local import stays only for an optional heavy dependency from outside
perflab, or to keep start-up light: it is an edge all the same).

An import `from perflab.a import b` counts as an import of the module perflab.a.b when there is one,
else of perflab.a (its __init__.py).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "perflab"
BASE = {
    *("errors", "units", "variants", "elf", "allocators", "debuginfo", "cbuild", "lockfile", "redact", "cache", "dpkg"),
}
# package (or base module) -> the top-level names it may not import, imports inside functions counted
FORBIDDEN = {
    **{base: {"*"} for base in BASE},  # "*": any package or module but the base's
    "places": {"spec", "servers", "run", "builds", "workloads", "observers", "analyze", "report", "history", "cli"},
    "store": {"spec", "servers", "run", "builds", "workloads", "observers", "analyze", "report", "history", "cli"},
    "builds": {"run", "report", "history", "cli"},
    "workloads": {"run", "report", "history", "cli"},
    "observers": {"run", "report", "history", "cli"},
    # what they need of the server is in the results (meta.server_facts)
    "analyze": {"run", "servers", "builds", "workloads", "observers", "places", "hosts", "cli"},
    "report": {"run", "servers", "builds", "workloads", "observers", "places", "hosts", "cli"},
    "history": {"run", "servers", "builds", "workloads", "observers", "places", "hosts"},
}


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _targets(module: str, node: ast.AST, is_package: bool, known: dict[str, Path]) -> list[str]:
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            here = module.split(".") if is_package else module.split(".")[:-1]
            here = here[: len(here) - (node.level - 1)]
            base = ".".join(here + ([node.module] if node.module else []))
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    out = []
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.append(name)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges[name].update(_targets(name, node, path.name == "__init__.py", known))
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(set(edges) | {t for ts in edges.values() for t in ts}):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "perflab"


def test_no_layer_imports_what_is_above_it():
    wrong = []
    for module, targets in graph().items():
        rule = FORBIDDEN.get(layer(module), set())
        for target in targets:
            if target == "perflab" or layer(target) == layer(module):
                continue
            if layer(target) in rule or ("*" in rule and layer(target) not in BASE):
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports against the layers (docs/development.md, Layout):\n" + "\n".join(sorted(wrong))


def test_no_module_is_in_an_import_cycle():
    """None since 2026-11-29 (73 modules on 2026-11-28, 35 on the 29th's morning): builds/ reads a
    binary's server from servers/identity.py, the kinds take `Kind` from servers/kind.py and the
    workload tool from run/ (servers.kind.Tool), the tools take `Workload` from workloads/base.py,
    and the MySQL family's dialects are dispatched below the kinds (servers/mysql_dialects.py)."""
    found = cycles(graph())
    assert not found, f"import cycles (imports inside functions count; docs/development.md, Layout): {found}"


def test_the_cycle_finder_finds_a_cycle_and_its_members_only():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": {"e"}}
    assert sorted(cycles(edges)) == [["a", "b", "c"], ["e", "e2"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_an_import_inside_a_function_counts():
    edges = graph()
    # perflab/cli/__init__.py imports its verbs inside functions or at the top: either way an edge
    assert any(target.startswith("perflab.cli.") for target in edges["perflab.cli"])
    tree = ast.parse("def f():\n    from perflab.places import proc\n")
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))
    assert _targets("perflab.run.cell", node, False, modules()) == ["perflab.places.proc"]
