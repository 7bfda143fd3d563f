"""`perflab alloc`: what a variant asks of its allocator per transaction (needs [observe] alloc), or
the change from A to B; `perflab diff --alloc DIR A B` (deprecated) comes here too.

perflab alloc DIR alloc=glibc
perflab alloc DIR alloc=glibc alloc=jemalloc [--against DIR_B] [--format json]
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.markup import escape

from perflab.cli.console import err, out
from perflab.errors import UsageError
from perflab.store.results import Results


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.argument("selector", required=False)
@click.argument("b", required=False)
@click.option("--cell", "cell_id", type=int, default=None, help="one cell by id")
@click.option(
    "--against",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR_B",
    help="B from this other results directory, as in diff",
)
@click.option("--threads", type=int, default=None, help="thread count, when the run has several")
@click.option("--top", "limit", type=int, default=15, show_default=True, help="allocating functions shown")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def alloc(
    directory: Path,
    selector: str | None,
    b: str | None,
    cell_id: int | None,
    against: Path | None,
    threads: int | None,
    limit: int,
    fmt: str,
) -> None:
    """What a variant asks of its allocator per transaction: calls and bytes by size class, the
    allocator's own syscalls, and the functions that allocate most (needs [observe] alloc); with
    two selectors A B, as in diff, the change from A to B."""
    from perflab.analyze import alloc as allocs  # noqa: PLC0415
    from perflab.report import profile_text  # noqa: PLC0415

    if b is not None:
        if selector is None or cell_id is not None:
            raise UsageError("two selectors compare two variants, not cells", "perflab alloc DIR A B")
        return alloc_diff(directory, selector, b, threads, limit, fmt, against)
    if against is not None:
        raise UsageError("--against names where B comes from", "perflab alloc DIR A B --against DIR_B")
    with Results(directory) as results:
        sel = _alloc_selection(results, selector, cell_id, threads)
        rows = allocs.figures(sel.cells)
        functions = allocs.top_functions(results, sel, limit) if sel.profiles else []
    warnings = _alloc_warnings(sel.cells)
    if fmt == "json":
        doc = {"selection": sel.label, "repeats": len(sel.cells), "figures": rows, "functions": functions}
        click.echo(json.dumps(doc | {"warnings": warnings}, indent=1))
        return None
    title = f"{sel.label}: {len(sel.cells)} repeat(s); per transaction, mean over repeats"
    profile_text.alloc_table(out, escape(title), rows, functions)
    return None


def alloc_diff(
    directory: Path, a: str, b: str, threads: int | None, limit: int, fmt: str, against: Path | None = None
) -> None:
    from perflab.analyze import alloc as allocs
    from perflab.report import profile_text

    with Results(directory) as results, Results(against or directory) as results_b:
        sel_a = _alloc_selection(results, a, None, threads)
        sel_b = _alloc_selection(results_b, b, None, threads)
        rows = allocs.diff_figures(sel_a.cells, sel_b.cells)
        both = sel_a.profiles and sel_b.profiles
        functions = allocs.diff_functions(results, sel_a, sel_b, limit, results_b) if both else []
    warnings = _alloc_warnings(sel_a.cells + sel_b.cells)
    if fmt == "json":
        doc = {"a": sel_a.label, "b": sel_b.label, "figures": rows, "functions": functions, "warnings": warnings}
        click.echo(json.dumps(doc, indent=1))
        return
    title = (
        f"A = {sel_a.label} ({len(sel_a.cells)} repeats), B = {sel_b.label} ({len(sel_b.cells)} repeats): "
        "per transaction, differences beyond the noise floor first (~ = within it)"
    )
    profile_text.alloc_diff_table(out, escape(title), rows, functions)


def _alloc_warnings(cells: list[dict]) -> list[str]:
    """What to distrust in the selected cells' allocation figures, also printed on stderr."""
    from perflab.analyze import alloc as allocs  # noqa: PLC0415

    warnings = [w for w in (allocs.dropped_samples(cells), allocs.started_in_window(cells)) if w]
    for warning in warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    return warnings


def _alloc_selection(results: Results, selector: str | None, cell_id: int | None, threads: int | None):
    """The selected cells with `alloc` figures, and their allocation profiles if stacks were taken."""
    from perflab.analyze import profile_select  # noqa: PLC0415

    traced = [c for c in results.cells() if c["status"] == "ok" and c.get("alloc")]
    if not traced:
        raise UsageError(
            f"{results.dir}: no allocation figures stored", "add alloc = true under [observe] and run again"
        )
    has_stacks = any(p["source"] == "alloc" for p in results.profiles())
    if has_stacks:
        sel = profile_select.select(results, selector=selector, cell_id=cell_id, threads=threads, source="alloc")
    else:
        label, cells = profile_select.select_cells(results, selector=selector, cell_id=cell_id, threads=threads)
        sel = profile_select.Selection(label, cells, [], "alloc")
    if not any(c["status"] == "ok" and c.get("settled") not in (False, 0) and c.get("alloc") for c in sel.cells):
        _alloc_warnings(sel.cells)  # a full ring can itself unsettle a window: say so with the refusal
        raise UsageError(  # the figures, like the verdicts, come from settled repeats only
            f"{sel.label}: no settled repeat with allocation figures (every one is unsettled or failed)",
            "see `perflab report DIR` for why; a longer max_warmup or more repeats",
        )
    return sel
