"""`perflab report`, `compare` and `export`: read a results directory, print what it found.

perflab report DIR [--html | --format markdown] [-o FILE]
perflab compare DIR | DIR_A DIR_B [--metric qps|p95] [--format json]
perflab export DIR [--format json|csv]
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.markup import escape

from perflab.cli.console import err, out
from perflab.errors import UsageError
from perflab.store.results import Results

BASELINE = click.option(
    "--baseline",
    "baselines",
    multiple=True,
    metavar="AXIS=LABEL",
    help="baseline label of an axis (repeatable; default: each axis's first label)",
)


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@BASELINE
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "html"]),
    default="text",
    show_default=True,
    help="markdown: GitHub tables, charts as SVG files beside -o; html: one self-contained file",
)
@click.option("--html", "html_flag", is_flag=True, help="same as --format html")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="write the report to this file (html: default DIR/report.html; markdown: stdout, without charts)",
)
def report(directory: Path, baselines: tuple[str, ...], fmt: str, html_flag: bool, output: Path | None) -> None:
    """Print the tables of a results DIRECTORY: per thread count, each variant's steady-state
    QPS with its 95% CI, the ratio to the baseline with a verdict, p95, RSS; then warnings.
    With --html or --format markdown, the same findings as a report to publish, with charts."""
    from perflab.analyze import summary  # noqa: PLC0415
    from perflab.report import text  # noqa: PLC0415

    if html_flag and fmt not in ("text", "html"):
        raise UsageError(f"--html and --format {fmt} contradict each other", "pass one of them")
    fmt = "html" if html_flag else fmt
    if fmt == "text" and output is not None:
        raise UsageError("-o applies to --html and --format markdown", "perflab report DIR --html -o report.html")
    with Results(directory) as results:
        if fmt == "text":
            meta, cells = summary.load(results)
            text.render(out, meta, cells, list(baselines))
            return
        from perflab.report import publish  # noqa: PLC0415

        written = publish.write(results, fmt, output, list(baselines))
    if written is not None:
        out.print(f"report: {written}", highlight=False, soft_wrap=True)


@click.command(name="compare")
@click.argument("directories", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path))
@BASELINE
@click.option("--metric", type=click.Choice(["qps", "p95"]), default="qps", show_default=True)
@click.option(
    "--confidence",
    type=click.FloatRange(50, 99.99),
    default=95.0,
    show_default=True,
    help="confidence level of the intervals, in percent",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def compare_cmd(
    directories: tuple[Path, ...], baselines: tuple[str, ...], metric: str, confidence: float, fmt: str
) -> None:
    """Verdicts: with one DIR, each variant against the baseline per thread count (ratio, its
    CI, faster / slower / no significant difference), plus each axis's own effect; with
    DIR_A DIR_B, the cells of B against the same cells of A (before/after)."""
    from perflab.analyze import compare, summary  # noqa: PLC0415
    from perflab.report import text  # noqa: PLC0415

    level = confidence / 100
    if len(directories) > 2:
        raise UsageError("compare takes one results directory, or two (A B)", "perflab compare DIR | DIR_A DIR_B")
    loaded = []
    for directory in directories:
        with Results(directory) as results:
            loaded.append(summary.load(results))
    if len(loaded) == 1:
        meta, cells = loaded[0]
        axes = (meta.get("experiment") or {}).get("axes") or {}
        base = compare.baseline_variant(axes, list(baselines))
        rows = compare.within(summary.groups(cells, base), axes, base, metric, level)
        notes: list[str] = []
    else:
        if baselines:
            raise UsageError("--baseline applies to one directory", "with two, A is the baseline of B")
        (meta_a, cells_a), (meta_b, cells_b) = loaded
        rows, notes = compare.across(summary.groups(cells_a), summary.groups(cells_b), metric, level)
        differences = compare.metadata_differences(meta_a, meta_b)
        if differences:
            err.print(
                "[bold red]WARNING: the two runs differ in host or settings; their comparison may "
                "measure that, not your change:[/]\n  " + escape("\n  ".join(differences))
            )
    if fmt == "json":
        click.echo(json.dumps([row.to_dict() for row in rows], indent=2))
    else:
        title = f"{metric} ({confidence:g}% intervals)" + (
            "" if len(loaded) == 1 else f": B = {directories[1]} vs A = {directories[0]}"
        )
        out.print(text.comparison_table(escape(title), rows, runs=len(loaded) == 2))
    for note in notes:
        err.print(f"[yellow]note:[/] {escape(note)}")
    if not rows:
        raise UsageError("nothing to compare", "the results need two variants, or two directories with the same cells")


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True)
def export(directory: Path, fmt: str) -> None:
    """Print the results of DIRECTORY in the documented interchange format."""
    from perflab.report import export as exporter  # noqa: PLC0415

    with Results(directory) as results:
        click.echo(exporter.to_json(results) if fmt == "json" else exporter.to_csv(results), nl=fmt == "json")
