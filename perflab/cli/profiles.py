"""`perflab profile`, `diff` and `flame`: the stored profiles of a results directory, per transaction.

perflab profile DIR --variant alloc=jemalloc [--by total] [--top 25] [--target client] [--phase warmup]
perflab diff DIR alloc=glibc alloc=jemalloc [--target client] [--phase stall]
perflab diff DIR --cell 3 --phase measured --phase-b stall      (within one cell: stall vs steady, per second)
perflab flame DIR alloc=jemalloc -o flame.svg [--diff alloc=glibc]
`perflab alloc` (and the deprecated `diff --alloc`): cli/alloc.py.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import click
from rich.markup import escape

from perflab.cli.console import err, out
from perflab.errors import UsageError
from perflab.store.results import Results

_SOURCE = click.option(
    "--source",
    type=click.Choice(["perf", "pmp", "alloc"]),
    default=None,
    help="which profiler's stacks (default: perf if stored); alloc: allocation stacks, in bytes",
)
THREADS = click.option("--threads", type=int, default=None, help="thread count, when the run has several")
_TARGET = click.option(
    "--target",
    type=click.Choice(["server", "client"]),
    default="server",
    show_default=True,
    help="whose stacks: the server (mariadbd) or the client (sysbench); [observe] perf/pmp targets",
)
_PHASE = click.option(
    "--phase",
    type=click.Choice(["measured", "warmup", "stall", "connect"]),
    default="measured",
    show_default=True,
    help="the measured window, the warm-up (sysbench's threads started to the window), the seconds of "
    "detected stalls, or connect (sysbench's start until its threads have all connected)",
)
_PER = click.option(
    "--per",
    type=click.Choice(["transaction", "second"]),
    default=None,
    help="divide by transactions or by seconds (default: second for stalls, they have few transactions)",
)
_START = click.option("--start", type=float, default=None, help="pmp: only samples from this second of the window")
_END = click.option("--end", type=float, default=None, help="pmp: only samples before this second of the window")


def _deprecated(old: str, new: str) -> None:
    """One line on stderr: the old spelling still works, the new one is the way (issue 38)."""
    err.print(f"[yellow]deprecated:[/] {escape(old)}; write {escape(new)}", highlight=False, soft_wrap=True)


def _echo_json(rows: list[dict]) -> None:
    from perflab.analyze.profile import round_row  # noqa: PLC0415

    click.echo(json.dumps([round_row(r) for r in rows], indent=1))


def _profile_unit(source: str) -> str:
    return {"perf": "cpu-us", "pmp": "wall-us"}.get(source, "bytes")


def _short(per: str) -> str:
    return "s" if per == "second" else "txn"


def _per(per: str | None, *phases: str) -> str:
    return per or ("second" if "stall" in phases else "transaction")


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.argument("selector", required=False)
@click.option("--cell", "cell_id", type=int, default=None, help="one cell by id")
@click.option("--variant", "old_selector", default=None, hidden=True)  # before 2026-11-27: SELECTOR
@THREADS
@_SOURCE
@_TARGET
@_PHASE
@_PER
@_START
@_END
@click.option("--by", type=click.Choice(["self", "total"]), default="self", show_default=True)
@click.option("--top", "limit", type=int, default=25, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def profile(
    directory: Path,
    selector: str | None,
    cell_id: int | None,
    old_selector: str | None,
    threads: int | None,
    source: str | None,
    target: str,
    phase: str,
    per: str | None,
    start: float | None,
    end: float | None,
    by: str,
    limit: int,
    fmt: str,
) -> None:
    """Top functions of a variant's profile, self and total, per transaction (or second), merged over
    repeats. SELECTOR: axis=label[,axis=label][/tN], as in diff, flame and alloc (or --cell N)."""
    from perflab.analyze import profile_select  # noqa: PLC0415
    from perflab.report import profile_text  # noqa: PLC0415

    if old_selector is not None:
        _deprecated("--variant SELECTOR", f"perflab profile DIR {old_selector}")
        if selector is not None and selector != old_selector:
            raise UsageError(f"two selectors: {selector} and --variant {old_selector}", "name one, after DIR")
        selector = old_selector
    per = _per(per, phase)
    with Results(directory) as results:
        sel = profile_select.select(
            results, selector=selector, cell_id=cell_id, threads=threads, source=source, target=target, phase=phase
        )
        merged, _, txn = profile_select.load(results, sel, start, end, per)
    rows = merged.rows(limit=limit, by=by)
    if fmt == "json":
        return _echo_json([{**r, "per": per} for r in rows])
    basis = f"{txn:,.1f} s" if per == "second" else f"{txn:,.0f} transactions"
    title = (
        f"{sel.label} ({sel.what}): {len(sel.profiles)} repeat(s), {merged.samples:,} samples, "
        f"{basis}; per {per}, by {by}"
    )
    profile_text.profile_table(out, escape(title), rows, _profile_unit(sel.source), _short(per))
    profile_text.quality_notes(err, [p["quality"] for p in sel.profiles])


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.argument("a", required=False)
@click.argument("b", required=False)
@click.option("--cell", "cell_id", type=int, default=None, help="one cell for both sides (with --phase-b/--target-b)")
@THREADS
@_SOURCE
@_TARGET
@_PHASE
@click.option(
    "--target-b", type=click.Choice(["server", "client"]), default=None, help="B's target (default: --target)"
)
@click.option(
    "--phase-b",
    type=click.Choice(["measured", "warmup", "stall", "connect"]),
    default=None,
    help="B's phase (default: --phase): --phase measured --phase-b stall compares a stall with the window",
)
@_PER
@click.option(
    "--by",
    type=click.Choice(["self", "total"]),
    default="self",
    show_default=True,
    help="rank by the change in self or in total (inclusive) samples per transaction (or second)",
)
@click.option("--top", "limit", type=int, default=25, show_default=True)
@click.option("--alloc", "allocations", is_flag=True, hidden=True)  # before 2026-11-27: perflab alloc DIR A B
@click.option(
    "--against",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR_B",
    help="B from this other results directory (two runs of one experiment: `perflab history` names them)",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def diff(
    directory: Path,
    a: str | None,
    b: str | None,
    cell_id: int | None,
    threads: int | None,
    source: str | None,
    target: str,
    phase: str,
    target_b: str | None,
    phase_b: str | None,
    per: str | None,
    by: str,
    limit: int,
    allocations: bool,
    against: Path | None,
    fmt: str,
) -> None:
    """Function by function, the change per transaction (or second) from A to B: two variants, or
    two phases or targets of one (B defaults to A: `diff DIR X --phase-b stall`, `diff DIR --cell 3 ...`),
    or one variant in two runs (`diff DIR_A X X --against DIR_B`)."""
    from perflab.analyze import profile_diff, profile_select  # noqa: PLC0415
    from perflab.report import profile_text  # noqa: PLC0415

    if allocations:
        if a is None or b is None:
            raise UsageError("allocations compare two variants", "perflab alloc DIR A B")
        _deprecated("perflab diff --alloc DIR A B", f"perflab alloc DIR {a} {b}")
        from perflab.cli.alloc import alloc_diff  # noqa: PLC0415  (the old spelling of `perflab alloc DIR A B`)

        return alloc_diff(directory, a, b, threads, limit, fmt, against)
    if a is None and cell_id is None:
        raise UsageError("name the variants to compare (A B) or one cell (--cell N)", "perflab diff DIR A B")
    b, target_b, phase_b = b or a, target_b or target, phase_b or phase
    if (a, target, phase) == (b, target_b, phase_b) and against is None:
        raise UsageError("A and B are the same profile", "name another variant, or --phase-b / --target-b")
    per = _per(per, phase, phase_b)
    with Results(directory) as results, Results(against or directory) as results_b:
        sel_a = profile_select.select(
            results, selector=a, cell_id=cell_id, threads=threads, source=source, target=target, phase=phase
        )
        sel_b = profile_select.select(
            results_b, selector=b, cell_id=cell_id, threads=threads, source=sel_a.source, target=target_b, phase=phase_b
        )
        if sel_a.threads != sel_b.threads:
            raise UsageError(
                f"{a} runs {sorted(sel_a.threads)} threads, {b} {sorted(sel_b.threads)}",
                "compare at one thread count: --threads N",
            )
        merged_a, _, _ = profile_select.load(results, sel_a, per=per)
        merged_b, _, _ = profile_select.load(results_b, sel_b, per=per)
    rows = profile_diff.diff(merged_a, merged_b).rows(limit=limit, by=by)
    if fmt == "json":
        return _echo_json([{**r, "per": per} for r in rows])
    title = (
        f"A = {sel_a.label} ({sel_a.what}, {len(sel_a.profiles)} repeats), B = {sel_b.label} ({sel_b.what}, "
        f"{len(sel_b.profiles)} repeats): change in {by} samples per {per}, largest first (~ = within the noise floor)"
    )
    profile_text.diff_table(out, escape(title), rows, by, _profile_unit(sel_a.source), _short(per))
    profile_text.quality_notes(err, [p["quality"] for p in sel_a.profiles + sel_b.profiles])


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.argument("selector", required=False)
@click.argument("b", required=False)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--cell", "cell_id", type=int, default=None, help="one cell by id")
@click.option("--diff", "other", default=None, hidden=True)  # before 2026-11-27: DIR B --diff A
@THREADS
@_SOURCE
@_TARGET
@_PHASE
@_PER
@_START
@_END
@click.option("--format", "fmt", type=click.Choice(["svg", "speedscope", "folded"]), default="svg", show_default=True)
def flame(
    directory: Path,
    selector: str | None,
    b: str | None,
    output: Path,
    cell_id: int | None,
    other: str | None,
    threads: int | None,
    source: str | None,
    target: str,
    phase: str,
    per: str | None,
    start: float | None,
    end: float | None,
    fmt: str,
) -> None:
    """Flame graph of a variant per transaction or second (SVG via inferno, speedscope JSON or
    folded); with two selectors A B, as in diff, the differential graph from A (the baseline) to B."""
    from perflab.analyze import profile_select  # noqa: PLC0415
    from perflab.report import flame as fl  # noqa: PLC0415

    if other is not None:  # the old spelling: SELECTOR was B, --diff named A
        _deprecated(f"--diff {other}", f"perflab flame DIR {other} {selector} (A, then B, as in diff)")
        if b is not None:
            raise UsageError("two selectors and --diff", "perflab flame DIR A B")
    elif b is not None:
        other, selector = selector, b
    if selector is None and cell_id is None:
        raise UsageError("name a variant (SELECTOR) or one cell (--cell N)", "perflab flame DIR SELECTOR -o out.svg")
    per = _per(per, phase)
    with Results(directory) as results:
        pick = functools.partial(
            profile_select.select, results, threads=threads, target=target, phase=phase, cell_id=cell_id
        )
        sel = pick(selector=selector, source=source)
        _, stacks, txn = profile_select.load(results, sel, start, end, per)
        scaled = fl.per_million_txn(stacks, txn)
        if other is not None:
            base_sel = pick(selector=other, source=sel.source)
            _, base_stacks, base_txn = profile_select.load(results, base_sel, start, end, per)
            base_scaled = fl.per_million_txn(base_stacks, base_txn)
    if other is None:
        if fmt == "svg":
            basis = f"{txn:,.1f} s" if per == "second" else f"{txn:,.0f} transactions"
            text = fl.svg(
                fl.folded_text(scaled),
                f"{sel.label} ({sel.what})",
                f"{len(sel.profiles)} repeat(s), {basis}; widths per {per}",
            )
        else:
            text = fl.speedscope(scaled, sel.label) if fmt == "speedscope" else fl.folded_text(scaled)
    else:
        if fmt != "svg" and fmt != "folded":
            raise UsageError(
                "a differential graph is an SVG (or --format folded: `stack a b` lines)", "drop --format speedscope"
            )
        text = fl.diff_text(base_scaled, scaled)
        if fmt == "svg":
            text = fl.svg(
                text,
                f"{base_sel.label} -> {sel.label} ({sel.what})",
                f"red: more per {per} in B, blue: less; shape of B",
                differential=True,
            )
    fl.write(output, text)
    out.print(f"wrote {output}")
