"""`perflab history`: every recorded run of an experiment, its change points and their causes, a gate.

perflab history NAME [--metric qps|p95] [--format text|json|html] [-o FILE] [--fail-on slower[:T]]
perflab history import DIR...        add existing results directories (a corrupt one: skipped, with why)
Both take --history PATH|postgresql://... (default $PERFLAB_HISTORY, else
~/.local/share/perflab/history.sqlite); `perflab run` records every run there itself.
"""

from __future__ import annotations

import itertools
import json
import shlex
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from perflab.cli.console import err, out
from perflab.errors import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, PerflabError, RegressionError, UsageError
from perflab.store.results import Results

HISTORY = click.option(
    "--history",
    "location",
    metavar="PATH|postgresql://...",
    default=None,
    help="the history index (default: $PERFLAB_HISTORY, else ~/.local/share/perflab/history.sqlite)",
)


@click.command(name="history")
@click.argument("args", nargs=-1, required=True, metavar="NAME | import DIR...")
@HISTORY
@click.option("--metric", type=click.Choice(["qps", "p95"]), default="qps", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="html: the page's file")
@click.option(
    "--fail-on",
    "fail_on",
    metavar="slower[:THRESHOLD]",
    help="the gate: exit 4 when the newest run starts a regression beyond THRESHOLD (on the ratio series "
    "where the runs measured a baseline beside their variants); 0 when it does not, and when it is "
    "inconclusive (said on stderr, with the rounds that would settle it) or the first run; 2 when there is "
    "no data (an unknown NAME, or no series of --metric in the newest run); 3 an unreachable index",
)
@click.option(
    "--max-pvalue",
    "alpha",
    type=click.FloatRange(1e-4, 0.2),
    default=None,
    help="change points kept at p <= this (Otava's name)",
)
@click.option("--min-size", type=click.IntRange(2, 100), default=None, help="runs in a segment, at least")
@click.option("--window", type=click.IntRange(10, 1000), default=None, help="runs one test looks at, at most")
def history(
    args: tuple[str, ...],
    location: str | None,
    metric: str,
    fmt: str,
    output: Path | None,
    fail_on: str | None,
    alpha: float | None,
    min_size: int | None,
    window: int | None,
) -> None:
    """The runs of experiment NAME over time, per variant and thread count, with their intervals,
    change points (what changed in provenance, and the profile diff across), and a gate for CI.
    Where the runs measured a baseline beside their variants, each variant's ratio to it is a
    series of its own, and the gate judges it. `perflab history import DIR...` adds results
    directories to the index.

    \b
    Exit codes with --fail-on: 0 passed (also inconclusive, said on stderr, and a first run);
    4 a regression; 2 no data (unknown NAME, no series of the metric in the newest run) or bad
    input; 3 an unreachable index. docs/history.md#the-gate"""
    from perflab.history.index import Index

    if args[0] == "import":
        return _import(Index.open(location), [Path(a) for a in args[1:]])
    if len(args) != 1:
        raise UsageError(
            f"history takes one NAME, got {len(args)}", "perflab history NAME, or perflab history import DIR..."
        )
    if fmt != "html" and output is not None:
        raise UsageError("-o applies to --format html", "perflab history NAME --format html -o history.html")
    from perflab.analyze import gate as gates
    from perflab.history import changes, series, view

    threshold = gates.parse(fail_on) if fail_on is not None else None
    params = (alpha or changes.ALPHA, min_size or changes.MIN_SIZE, window or changes.WINDOW)
    with Index.open(location) as index:
        found = series.load(index, args[0], metric, *params)
        where = index.location
    verdict = _gate(found, threshold) if threshold is not None else None
    doc = view.document(found, where, verdict and verdict[0])
    _show(doc, fmt, output)
    if verdict is not None:
        _exit_on(*verdict)


def record_run(output: Path, location: str | None) -> None:
    """A complete run goes into the history index (docs/history.md); an index that cannot take it
    costs the run nothing: one line says so, and how to add it later."""
    from perflab.history import index, record

    if (location or "").lower() == index.OFF:
        return
    try:
        with Results(output) as results:
            if results.meta().get("status") != "complete":
                return
        run = record.read(output)
        with index.Index.open(location) as where:
            where.record(run)
            out.print(escape(f"history: recorded in {where.location} (perflab history {run.name})"), highlight=False)
    except PerflabError as exc:
        err.print(
            f"[yellow]history: not recorded:[/] {escape(exc.message)}; later: perflab history import {escape(str(output))}",
            highlight=False,
            soft_wrap=True,
        )


def _import(index: Any, directories: list[Path]) -> None:
    from perflab.history import record

    if not directories:
        raise UsageError("history import takes results directories", "perflab history import results/*")
    added = skipped = 0
    with index:
        for directory in directories:
            try:
                run = record.read(directory)
            except record.CorruptResults as exc:
                err.print(f"[yellow]skipped:[/] {escape(exc.message)}", highlight=False, soft_wrap=True)
                skipped += 1
                continue
            index.record(run)
            added += 1
            out.print(escape(f"recorded {run.name} of {run.started_at}: {directory}"), highlight=False, soft_wrap=True)
        where = index.location
    out.print(escape(f"{added} run(s) recorded in {where}, {skipped} skipped"), highlight=False, soft_wrap=True)


def _gate(found: Any, threshold: Any) -> tuple[dict[str, Any], list[str]]:
    """(the gate's section of the document, the lines of its failures)."""
    from perflab.history import gate

    findings = gate.check(found.series, threshold)
    failed = [gate.failure_line(f, threshold) for f in findings if gate.fails(f, threshold)]
    unsettled = [gate.unsettled_line(f) for f in gate.inconclusive(findings)]
    section = {
        "fail_on": threshold.describe(),
        "failed": failed,
        "inconclusive": unsettled,
        "verdicts": [{**f.comparison.to_dict(), "label": f.series.label} for f in findings],
        "passed": not failed and bool(findings),
        "exit_code": EXIT_REGRESSION if failed else EXIT_OK if findings else EXIT_USAGE,
    }
    return section, failed


def _exit_on(section: dict[str, Any], failed: list[str]) -> None:
    for line in section["inconclusive"]:
        err.print(f"[yellow]inconclusive:[/] {escape(line)}", highlight=False, soft_wrap=True)
    if section["exit_code"] == EXIT_USAGE:
        raise UsageError(
            "the gate has no data: the newest run has no series of this metric",
            "perflab history NAME --metric qps|p95 shows the series there are; exit code 2",
        )
    if failed:
        raise RegressionError(
            f"{len(failed)} series {section['fail_on']}:\n  " + "\n  ".join(failed),
            "exit code 4; see `perflab docs history#the-gate`",
        )


def _show(doc: dict[str, Any], fmt: str, output: Path | None) -> None:
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2))
    elif fmt == "html":
        from perflab.history import html

        path = output or Path(f"history-{doc['name']}.html")
        path.write_text(html.render(doc), encoding="utf-8")
        out.print(escape(f"history page: {path}"), highlight=False, soft_wrap=True)
    else:
        for line in text_lines(doc):
            out.print(escape(line), highlight=False, soft_wrap=True)


def text_lines(doc: dict[str, Any], last: int = 12) -> list[str]:
    """The terminal's view: per series its segments, change points with causes, the latest runs."""
    lines = [f"{doc['name']}: {doc['metric']}, index {doc['index']}", *(f"note: {n}" for n in doc["notes"])]
    lines += provenance_lines(doc["provenance_changes"])
    workload = None
    for s in doc["series"]:
        if s["workload"] != workload:
            workload = s["workload"]
            lines += ["", workload]
        label = ", ".join(f"{k}={v}" for k, v in s["variant"].items()) or "default"
        if s["kind"] == "ratio":
            label = f"ratio {label} / {', '.join(f'{k}={v}' for k, v in s['baseline'].items())}"
        tau = f", run-to-run variation {s['tau']:.1%}" if s["tau"] is not None else ""
        gated = "" if s["gated"] else " (not gated: the ratio series judges these runs)"
        lines.append(
            f"  {label} at {s['threads']} threads: {len(s['runs'])} runs, {len(s['segments'])} segment(s){tau}{gated}"
        )
        for g in s["segments"]:
            lines.append(
                f"    runs {g['first_run']}-{g['last_run']}: {_num(g['level'])} [{_num(g['low'])}-{_num(g['high'])}]"
            )
        for c in s["change_points"]:
            lines += _change_lines(c)
        lines.append(f"    {'run':>4}  {'started':29} {doc['metric']} [95% interval]          n")
        for r in s["runs"][-last:]:
            ci = f"[{_num(r['low'])}-{_num(r['high'])}]" if r["low"] is not None else "[n<3]"
            mark = " <" if any(c["run"] == r["run"] for c in s["change_points"]) else ""
            lines.append(f"    {r['run']:>4}  {r['started_at']:29} {_num(r['mean']):>10} {ci:24} {r['n']}{mark}")
    return lines


def provenance_lines(changes: list[dict[str, Any]]) -> list[str]:
    """Every provenance change at the run where it happened: `configuration changed at run 4:
    server_options.general_log OFF -> ON` (the field without its kind's prefix)."""
    lines = []
    for c in changes:
        what = "; ".join(f"{_field(p['field'])} {_value(p['before'])} -> {_value(p['after'])}" for p in c["changes"])
        lines.append(f"{c['kind']} changed at run {c['run']} ({c['started_at']}): {what}")
    return lines


def _value(value: str | None) -> str:
    return "(unset)" if value is None else value


def _field(name: str) -> str:
    for prefix in ("config.variants.", "config."):  # config.variants.A.L.server_options.X: A.L.server_options.X
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _change_lines(c: dict[str, Any]) -> list[str]:
    step = f"ratio {c['ratio']:.3f} [{c['low']:.3f}-{c['high']:.3f}], p = {c['p']:.2g}"
    lines = [f"    change at run {c['run']} ({c['started_at']}): {c['direction']}, {step}"]
    changed = "; ".join(f"{p['field']}: {p['before']} -> {p['after']}" for p in c["provenance"])
    lines.append(f"      what changed: {changed or 'nothing perflab records (provenance identical)'}")
    for offset, group in itertools.groupby(c.get("provenance_nearby") or [], key=lambda p: p["offset"]):
        where = f"{abs(offset)} run{'s' if abs(offset) > 1 else ''} {'after' if offset > 0 else 'before'} it"
        what = "; ".join(f"{p['field']}: {p['before']} -> {p['after']}" for p in group)
        lines.append(f"      changed {where}: {what} (the change point's place is uncertain by a few runs)")
    lines.append(f"      diff: {shlex.join(c['diff'])}")
    for row in c["diff_top"] or []:
        lines.append(f"        {row['function']}: {row['delta_self_per_txn']:+.3g} self samples/txn")
    beyond = [r for r in c.get("alloc_diff") or [] if r["beyond_noise"]]
    if beyond:
        lines.append(
            "      allocations: " + "; ".join(f"{r['metric']} {r['delta']:+.4g} {r['unit']}" for r in beyond[:4])
        )
    if c.get("status_diff"):
        what = "; ".join(f"{r['counter']} {r['baseline']:.4g} -> {r['variant']:.4g}" for r in c["status_diff"][:4])
        lines.append(f"      server counters per transaction: {what}")
    return lines


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"
