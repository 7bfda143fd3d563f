"""`perflab report`, `compare` and `export`: read a results directory, print what it found.

perflab report DIR [--html | --format markdown|json] [-o FILE]
perflab compare DIR | DIR_A DIR_B [--metric qps|p95|p99] [--format json] [--fail-on slower[:THRESHOLD]]
perflab export DIR [--format json|csv|seconds-csv|comparisons-csv]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from perflab.cli.console import err, out
from perflab.errors import RegressionError, UsageError
from perflab.store.results import Results

BASELINE = click.option(
    "--baseline",
    "baselines",
    multiple=True,
    metavar="AXIS=LABEL",
    help="baseline label of an axis (repeatable; default: each axis's first label)",
)


def format_option(choices: list[str], help_text: str) -> Any:
    """`--format`, its first choice the default: one definition for every verb that has one."""
    return click.option(
        "--format", "fmt", type=click.Choice(choices), default=choices[0], show_default=True, help=help_text
    )


DIRECTORY = click.argument("directory", type=click.Path(file_okay=False, path_type=Path))


@click.command()
@DIRECTORY
@BASELINE
@format_option(
    ["text", "markdown", "html", "json"],
    "markdown: GitHub tables, charts as SVG files beside -o; html: one self-contained file; "
    "json: the tables and warnings as data",
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
    from perflab.analyze import summary, variance  # noqa: PLC0415
    from perflab.report import text  # noqa: PLC0415

    if html_flag and fmt not in ("text", "html"):
        raise UsageError(f"--html and --format {fmt} contradict each other", "pass one of them")
    fmt = "html" if html_flag else fmt
    if fmt in ("text", "json") and output is not None:
        raise UsageError("-o applies to --html and --format markdown", "perflab report DIR --html -o report.html")
    with Results(directory) as results:
        if fmt == "json":
            from perflab.report import export  # noqa: PLC0415

            click.echo(json.dumps(export.report_document(*summary.load(results), list(baselines)), indent=2))
            return
        if fmt == "text":
            from perflab.analyze import phase_explain  # noqa: PLC0415

            meta, cells = summary.load(results)
            text.render(
                out, meta, cells, list(baselines), variance.load(results, cells), phase_explain.explain(results)
            )
            return
        from perflab.report import publish  # noqa: PLC0415

        written = publish.write(results, fmt, output, list(baselines))
    if written is not None:
        out.print(f"report: {written}", highlight=False, soft_wrap=True)


@click.command(name="compare")
@click.argument("directories", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path))
@BASELINE
@click.option(
    "--metric",
    type=click.Choice(["qps", "p95", "p99"]),
    help="the verdicts' metric [default: qps; p99 from the intended start for a run at a fixed rate]",
)
@click.option(
    "--confidence",
    type=click.FloatRange(50, 99.99),
    default=95.0,
    show_default=True,
    help="confidence level of the intervals, in percent",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--fail-on",
    "fail_on",
    metavar="slower[:THRESHOLD]",
    help="exit 4 when a comparison is `slower` by more than THRESHOLD (e.g. slower:5%), for CI",
)
def compare_cmd(
    directories: tuple[Path, ...],
    baselines: tuple[str, ...],
    metric: str | None,
    confidence: float,
    fmt: str,
    fail_on: str | None,
) -> None:
    """Verdicts: with one DIR, each variant against the baseline per thread count (ratio, its
    CI, faster / slower / equivalent / inconclusive, Holm-corrected over the comparisons),
    plus each axis's own effect; with DIR_A DIR_B, the cells of B against the same cells of
    A (before/after)."""
    from perflab.analyze import gate  # noqa: PLC0415
    from perflab.report import text  # noqa: PLC0415

    threshold = gate.parse(fail_on) if fail_on is not None else None
    if len(directories) > 2:
        raise UsageError("compare takes one results directory, or two (A B)", "perflab compare DIR | DIR_A DIR_B")
    rows, notes, metric = _comparisons(directories, list(baselines), metric, confidence / 100)
    if fmt == "json":
        click.echo(json.dumps([row.to_dict() for row in rows], indent=2))
    else:
        title = f"{metric} ({confidence:g}% intervals)" + (
            "" if len(directories) == 1 else f": B = {directories[1]} vs A = {directories[0]}"
        )
        from perflab.report.phrases import method_line  # noqa: PLC0415

        text.print_comparisons(out, escape(title), rows, runs=len(directories) == 2)
        out.print(f"[dim]{escape(method_line(rows))}[/]", highlight=False)
    for note in notes:
        err.print(f"[yellow]note:[/] {escape(note)}")
    if not rows:
        raise UsageError("nothing to compare", "the results need two variants, or two directories with the same cells")
    if threshold is not None:
        _gate(threshold, rows)


def _comparisons(
    directories: tuple[Path, ...], baselines: list[str], metric: str | None, level: float
) -> tuple[list, list[str], str]:
    """(comparisons, notes, metric): every variant against the baseline in one directory, or the cells
    of B against A's in two (warning on stderr when their host or settings differ); `metric` None:
    the first run's own (analyze/rate.py: p99 at a fixed rate, else qps)."""
    from perflab.analyze import compare, rate, summary  # noqa: PLC0415

    loaded = []
    for directory in directories:
        with Results(directory) as results:
            loaded.append(summary.load(results))
    metric = metric or rate.primary_metric(loaded[0][0])
    if len(loaded) == 1:
        meta, cells = loaded[0]  # as every report judges them (host speed, sequential looks)
        return compare.verdicts(meta, cells, baselines, (metric,), level).comparisons, [], metric
    if baselines:
        raise UsageError("--baseline applies to one directory", "with two, A is the baseline of B")
    (meta_a, cells_a), (meta_b, cells_b) = loaded
    differences = compare.metadata_differences(meta_a, meta_b)
    if differences:
        err.print(
            "[bold red]WARNING: the two runs differ in host or settings; their comparison may "
            "measure that, not your change:[/]\n  " + escape("\n  ".join(differences))
        )
    margin = compare.margin_of(meta_a)  # A is the reference: its margin
    axes_b = (meta_b.get("experiment") or {}).get("axes") or {}
    axes_a, fixed = (meta_a.get("experiment") or {}).get("axes") or {}, rate.fixed_rate(meta_a)
    groups_a = summary.groups(cells_a, axes=axes_a, fixed_rate=fixed)
    groups_b = summary.groups(cells_b, axes=axes_b, fixed_rate=rate.fixed_rate(meta_b))
    return (*compare.across(groups_a, groups_b, metric, level, margin), metric)


def _gate(threshold: Any, rows: list) -> None:
    """`--fail-on`: RegressionError (exit 4) naming every comparison slower beyond the threshold."""
    from perflab.analyze import gate  # noqa: PLC0415

    unjudged = gate.unjudged(rows)
    if unjudged:
        needed = [c.rounds_needed for c in rows if c.rounds_needed is not None]
        more = f"; about {max(needed)} more round(s) would resolve them" if needed else ""
        err.print(
            f"[yellow]note:[/] --fail-on cannot judge {unjudged} inconclusive comparison(s) "
            f"(too few repeats, or an interval too wide to tell){more}"
        )
    failed = threshold.failures(rows)
    if failed:
        hint = "exit code 4; see `perflab docs methodology#failing-a-ci-job-on-a-regression`"
        raise RegressionError(gate.message(threshold, failed), hint)


@click.command()
@DIRECTORY
@format_option(
    ["json", "csv", "seconds-csv", "comparisons-csv"],
    "csv: a row per cell; seconds-csv: per second; comparisons-csv: verdicts",
)
def export(directory: Path, fmt: str) -> None:
    """Print the results of DIRECTORY in a documented interchange format (docs/results-format.md):
    JSON, or CSV with one column per axis."""
    from perflab.report import csv_export  # noqa: PLC0415
    from perflab.report import export as exporter  # noqa: PLC0415

    with Results(directory) as results:
        click.echo(exporter.to_json(results) if fmt == "json" else csv_export.FORMATS[fmt](results), nl=fmt == "json")
