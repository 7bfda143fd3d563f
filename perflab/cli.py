"""perflab command line: run, report, compare, export, doctor.

    spec.load -> preflight.check -> Scheduler(results).run -> report.text / report.export
PerflabError is caught here only and mapped to its exit code; anything else is a bug.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from perflab import __version__, hostinfo, preflight, spec
from perflab.errors import EXIT_ENVIRONMENT, EXIT_INTERRUPTED, PerflabError, UsageError
from perflab.store.results import Results

# Wide tables when piped (CI logs, files); the terminal's own width otherwise.
out = Console(width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 150)


def _fail(exc: PerflabError) -> NoReturn:
    # messages quote user input (names, values, server log lines): never read them as markup
    err.print(f"[bold red]error:[/] {escape(exc.message)}", highlight=False, soft_wrap=True)
    if exc.hint:
        err.print(f"[cyan]hint:[/] {escape(exc.hint)}", highlight=False, soft_wrap=True)
    sys.exit(exc.exit_code)


def _terminate_as_interrupt(signum: int, frame: Any) -> NoReturn:
    raise KeyboardInterrupt


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        signal.signal(signal.SIGTERM, _terminate_as_interrupt)
        signal.signal(signal.SIGHUP, _terminate_as_interrupt)
        try:
            return super().invoke(ctx)
        except PerflabError as exc:
            _fail(exc)
        except KeyboardInterrupt:
            err.print("[yellow]interrupted:[/] every server and client perflab started has been stopped")
            sys.exit(EXIT_INTERRUPTED)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perflab")
def main() -> None:
    """Run database benchmark experiments and explain the results."""


@main.command()
@click.argument("experiment", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), help="results directory "
              "(default results/<name>-<timestamp>)")  # fmt: skip
@click.option("--resume", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="continue the interrupted run in DIR: only the cells it has not stored, on the same dataset")  # fmt: skip
@click.option("--check", is_flag=True, help="validate the experiment file and exit")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="with --check: the matrix and estimate as JSON")  # fmt: skip
@click.option("--allow-concurrent", is_flag=True, envvar="PERFLAB_ALLOW_CONCURRENT",
              help="run even while another perflab run uses this machine (both will be disturbed)")  # fmt: skip
def run(experiment: Path | None, output: Path | None, resume: Path | None, check: bool, fmt: str,
        allow_concurrent: bool) -> None:  # fmt: skip
    """Run every cell of EXPERIMENT and store the results (or finish an interrupted run)."""
    if fmt == "json" and not check:
        raise UsageError("--format json describes a --check only", "perflab run FILE.toml --check --format json")
    if resume is not None:
        if experiment is not None or output is not None:
            raise UsageError("--resume DIR takes neither an EXPERIMENT file nor -o", "perflab run --resume DIR")
        exp, done = _resumable(resume)
        output = resume
    elif experiment is None:
        raise UsageError("no EXPERIMENT file given", "perflab run FILE.toml, or perflab run --resume DIR")
    else:
        exp, done = spec.load(experiment), 0
    preflight.check(exp)
    from perflab.run.scheduler import Scheduler, estimate_seconds  # noqa: PLC0415 - keeps `report` light

    cells = exp.cells()
    from perflab.report import plan  # noqa: PLC0415

    matrix = plan.plan(exp, len(cells), estimate_seconds)
    if check and fmt == "json":
        click.echo(json.dumps(matrix, indent=2))
        return
    out.print(plan.line(matrix))
    if check:
        return
    if resume is not None:
        if done >= len(cells) and not exp.file.experiment.adaptive:
            out.print(f"{resume}: every cell is already stored; nothing to resume")
            return
        out.print(f"resuming {resume}: {done} cells stored, running the rest in their original order")
    else:
        if output is None:
            output = Path("results") / f"{exp.name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
        if (output / "results.db").exists():
            raise UsageError(f"{output} already holds results", "choose another -o, or --resume it if it was interrupted")
    from perflab.run.lock import MachineLock  # noqa: PLC0415

    with contextlib.ExitStack() as stack:
        if not allow_concurrent:
            stack.enter_context(MachineLock(output))
        _run(exp, exp.text, output, cells, Scheduler, allow_concurrent, resume is not None)


def _resumable(directory: Path) -> tuple[spec.Experiment, int]:
    """The experiment of an interrupted results directory (from its stored file) and how
    many cells it has stored."""
    with Results(directory) as results:
        meta = results.meta()
        stored = len(results.cells())
    owner = Path(str(meta.get("workdir") or "/nonexistent")) / "owner.pid"
    if meta.get("status") == "running" and owner.is_file():
        pid = owner.read_text(encoding="ascii").strip()
        if pid.isdigit() and Path(f"/proc/{pid}").exists():
            raise UsageError(f"{directory} is being written by a running perflab (pid {pid})", "wait for it, or stop it first")
    text = meta.get("spec_text")
    if not text:
        raise UsageError(f"{directory}: the results hold no experiment file to resume", "run the experiment anew")
    if meta.get("perflab_version") != __version__:
        err.print(f"[yellow]warning:[/] {directory} was written by perflab {meta.get('perflab_version')}, this is {__version__}")
    exp = spec.parse(text, f"{directory}/results.db (its stored experiment file)")
    return exp, stored


def _run(exp: spec.Experiment, spec_text: str, output: Path, cells: list, scheduler: Any, concurrent: bool,
         resume: bool) -> None:  # fmt: skip
    file = exp.file
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    with Results(output, create=not resume) as results:
        if resume:
            results.set_meta(status="running", resumed_at=[*results.meta().get("resumed_at", []), now])
        else:
            results.set_meta(
                experiment={**file.model_dump(mode="json")["experiment"], "workload": file.workload.model_dump(mode="json"),
                            "dataset": file.dataset.model_dump(mode="json"), "axes": {a: list(v) for a, v in file.variants.items()}},
                spec_text=spec_text, host=hostinfo.collect(), started_at=now, perflab_version=__version__,
                cell_count=len(cells), status="running", concurrent_allowed=concurrent,
            )  # fmt: skip
        out.print(f"results: {output}")
        status = "interrupted"
        try:
            with _progress() as progress:
                scheduler(exp, results, progress).run(resume=resume)
            status = "complete"
        finally:
            try:
                results.set_meta(status=status, ended_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
            except sqlite3.OperationalError:  # a full disk: the error being raised says so already
                pass
        from perflab.analyze import summary  # noqa: PLC0415
        from perflab.report import text  # noqa: PLC0415

        text.render(out, *summary.load(results))
        stored = results.cells()
        failed = sum(1 for c in stored if c["status"] != "ok")
    out.print(f"\nresults: {output}   (perflab report {output} | perflab export {output} --format json)")
    if failed:
        err.print(f"[red]{failed} of {len(stored)} cells failed[/]; see the table above and {output}/logs/")
        sys.exit(1)


class _progress:
    """Progress bar listener: current cell, done/total, elapsed, remaining. Refreshes once a
    second so the harness takes almost no CPU from the measurement."""

    def __init__(self) -> None:
        self.bar = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("left"), TimeRemainingColumn(), console=err, refresh_per_second=1, transient=False,
        )  # fmt: skip
        self.task = self.bar.add_task("preparing dataset", total=None)

    def __enter__(self) -> _progress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        if event == "prepare_end":
            snap = data["snapshot"]
            self.bar.console.print(f"dataset prepared in {snap.prepare_s:.1f}s ({snap.data_bytes / 2**20:.0f} MiB)")
        elif event == "cell_start":
            cell = data["cell"]
            self.bar.update(self.task, total=data["total"], description=escape(f"cell {cell.order + 1}: {cell.key}"))
        elif event == "cell_end":
            row = data["row"]
            if row["status"] != "ok":
                first = (row["error"] or "?").splitlines()[0]
                self.bar.console.print(f"[red]cell {row['id']} failed:[/] {escape(first)}", highlight=False)
            self.bar.advance(self.task)


BASELINE = click.option(
    "--baseline", "baselines", multiple=True, metavar="AXIS=LABEL",
    help="baseline label of an axis (repeatable; default: each axis's first label)",
)  # fmt: skip


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@BASELINE
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "html", "json"]), default="text",
              show_default=True, help="markdown: GitHub tables, charts as SVG files beside -o; html: one "
              "self-contained file; json: the tables and warnings as data")  # fmt: skip
@click.option("--html", "html_flag", is_flag=True, help="same as --format html")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="write the report to this file (html: default DIR/report.html; markdown: stdout, without charts)")  # fmt: skip
def report(directory: Path, baselines: tuple[str, ...], fmt: str, html_flag: bool, output: Path | None) -> None:
    """Print the tables of a results DIRECTORY: per thread count, each variant's steady-state
    QPS with its 95% CI, the ratio to the baseline with a verdict, p95, RSS; then warnings.
    With --html or --format markdown, the same findings as a report to publish, with charts."""
    from perflab.analyze import summary  # noqa: PLC0415
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
            meta, cells = summary.load(results)
            text.render(out, meta, cells, list(baselines))
            return
        from perflab.report import publish  # noqa: PLC0415

        written = publish.write(results, fmt, output, list(baselines))
    if written is not None:
        out.print(f"report: {written}", highlight=False, soft_wrap=True)


@main.command(name="compare")
@click.argument("directories", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path))
@BASELINE
@click.option("--metric", type=click.Choice(["qps", "p95"]), default="qps", show_default=True)
@click.option("--confidence", type=click.FloatRange(50, 99.99), default=95.0, show_default=True,
              help="confidence level of the intervals, in percent")  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--fail-on", "fail_on", metavar="slower[:THRESHOLD]",
              help="exit 4 when a comparison is `slower` by more than THRESHOLD (e.g. slower:5%), for CI")  # fmt: skip
def compare_cmd(directories: tuple[Path, ...], baselines: tuple[str, ...], metric: str, confidence: float, fmt: str,
                fail_on: str | None) -> None:  # fmt: skip
    """Verdicts: with one DIR, each variant against the baseline per thread count (ratio, its
    CI, faster / slower / no significant difference), plus each axis's own effect; with
    DIR_A DIR_B, the cells of B against the same cells of A (before/after)."""
    from perflab.analyze import compare, gate, summary  # noqa: PLC0415
    from perflab.report import text  # noqa: PLC0415

    threshold = gate.parse(fail_on) if fail_on is not None else None
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
            err.print(f"[bold red]WARNING: the two runs differ in host or settings; their comparison may "
                      f"measure that, not your change:[/]\n  " + escape("\n  ".join(differences)))  # fmt: skip
    if fmt == "json":
        click.echo(json.dumps([row.to_dict() for row in rows], indent=2))
    else:
        title = f"{metric} ({confidence:g}% intervals)" + ("" if len(loaded) == 1 else f": B = {directories[1]} vs A = {directories[0]}")
        out.print(text.comparison_table(escape(title), rows, runs=len(loaded) == 2))
    for note in notes:
        err.print(f"[yellow]note:[/] {escape(note)}")
    if not rows:
        raise UsageError("nothing to compare", "the results need two variants, or two directories with the same cells")
    if threshold is not None:
        _gate(threshold, rows)


def _gate(threshold: Any, rows: list) -> None:
    """`--fail-on`: RegressionError (exit 4) naming every comparison slower beyond the threshold."""
    from perflab.analyze import gate  # noqa: PLC0415
    from perflab.errors import RegressionError  # noqa: PLC0415

    unjudged = gate.unjudged(rows)
    if unjudged:
        err.print(f"[yellow]note:[/] --fail-on cannot judge {unjudged} comparison(s) without a verdict "
                  "(too few repeats, or unsettled cells)")
    failed = threshold.failures(rows)
    if failed:
        hint = "exit code 4; see docs/methodology.md#failing-a-ci-job-on-a-regression"
        raise RegressionError(gate.message(threshold, failed), hint)


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["json", "csv", "seconds-csv", "comparisons-csv"]), default="json",
              show_default=True, help="csv: a row per cell; seconds-csv: per second; comparisons-csv: verdicts")
def export(directory: Path, fmt: str) -> None:
    """Print the results of DIRECTORY in a documented interchange format (docs/results-format.md):
    JSON, or CSV with one column per axis."""
    from perflab.report import csv_export  # noqa: PLC0415
    from perflab.report import export as exporter  # noqa: PLC0415

    with Results(directory) as results:
        click.echo(exporter.to_json(results) if fmt == "json" else csv_export.FORMATS[fmt](results), nl=fmt == "json")


@main.command()
@click.option("--clean", is_flag=True, help="stop and remove what killed perflab runs left behind")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def doctor(clean: bool, fmt: str) -> None:
    """Which tools and allocators are present, which are missing and how to get them; what
    killed runs left behind (--clean removes it)."""
    from perflab import doctor as doc  # noqa: PLC0415

    if clean:
        doc.clean(out)
        return
    facts = doc.collect()
    if fmt == "json":
        click.echo(json.dumps(facts, indent=2))
    else:
        doc.render(out, facts)
    if not facts["ok"]:
        sys.exit(EXIT_ENVIRONMENT)


if __name__ == "__main__":
    main()


# ---------------------------------------------------------------------------- profiles (issue 4)
# perflab profile / diff / flame: read folded profiles through store/, analyze per transaction.

_SOURCE = click.option("--source", type=click.Choice(["perf", "pmp"]), default=None,
                       help="which profiler's stacks (default: perf if stored)")  # fmt: skip
_THREADS = click.option("--threads", type=int, default=None, help="thread count, when the run has several")
_START = click.option("--start", type=float, default=None, help="pmp: only samples from this second of the window")
_END = click.option("--end", type=float, default=None, help="pmp: only samples before this second of the window")


def _profile_unit(source: str) -> str:
    return "cpu-us" if source == "perf" else "wall-us"


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--cell", "cell_id", type=int, default=None, help="one cell by id")
@click.option("--variant", "selector", default=None, help="axis=label[,axis=label][/tN]; repeats are merged")
@_THREADS
@_SOURCE
@_START
@_END
@click.option("--by", type=click.Choice(["self", "total"]), default="self", show_default=True)
@click.option("--top", "limit", type=int, default=25, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def profile(directory: Path, cell_id: int | None, selector: str | None, threads: int | None, source: str | None,
            start: float | None, end: float | None, by: str, limit: int, fmt: str) -> None:  # fmt: skip
    """Top functions of a variant's profile, self and total, per transaction, merged over repeats."""
    import json as _json  # noqa: PLC0415

    from perflab.analyze import profile_select  # noqa: PLC0415
    from perflab.analyze.profile import round_row  # noqa: PLC0415
    from perflab.report import profile_text  # noqa: PLC0415

    with Results(directory) as results:
        sel = profile_select.select(results, selector=selector, cell_id=cell_id, threads=threads, source=source)
        merged, _, txn = profile_select.load(results, sel, start, end)
    rows = merged.rows(limit=limit, by=by)
    if fmt == "json":
        click.echo(_json.dumps([round_row(r) for r in rows], indent=1))
        return
    title = (f"{sel.label} ({sel.source}): {len(sel.profiles)} repeat(s), {merged.samples:,} samples, "
             f"{txn:,.0f} transactions; per transaction, by {by}")  # fmt: skip
    profile_text.profile_table(out, escape(title), rows, _profile_unit(sel.source))
    profile_text.quality_notes(err, [p["quality"] for p in sel.profiles])


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.argument("a")
@click.argument("b")
@_THREADS
@_SOURCE
@click.option("--by", type=click.Choice(["self", "total"]), default="self", show_default=True,
              help="rank by the change in self or in total (inclusive) samples per transaction")  # fmt: skip
@click.option("--top", "limit", type=int, default=25, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def diff(directory: Path, a: str, b: str, threads: int | None, source: str | None, by: str, limit: int,
         fmt: str) -> None:  # fmt: skip
    """Function by function, the change per transaction from variant A to variant B."""
    import json as _json  # noqa: PLC0415

    from perflab.analyze import profile_diff, profile_select  # noqa: PLC0415
    from perflab.analyze.profile import round_row  # noqa: PLC0415
    from perflab.report import profile_text  # noqa: PLC0415

    with Results(directory) as results:
        sel_a = profile_select.select(results, selector=a, threads=threads, source=source)
        sel_b = profile_select.select(results, selector=b, threads=threads, source=sel_a.source)
        if sel_a.threads != sel_b.threads:
            raise UsageError(f"{a} runs {sorted(sel_a.threads)} threads, {b} {sorted(sel_b.threads)}",
                             "compare at one thread count: --threads N")  # fmt: skip
        merged_a, _, _ = profile_select.load(results, sel_a)
        merged_b, _, _ = profile_select.load(results, sel_b)
    rows = profile_diff.diff(merged_a, merged_b).rows(limit=limit, by=by)
    if fmt == "json":
        click.echo(_json.dumps([round_row(r) for r in rows], indent=1))
        return
    title = (f"A = {sel_a.label} ({len(sel_a.profiles)} repeats), B = {sel_b.label} ({len(sel_b.profiles)} repeats), "
             f"{sel_a.source}: change in {by} samples per transaction, largest first (~ = within the noise floor)")
    profile_text.diff_table(out, escape(title), rows, by, _profile_unit(sel_a.source))
    profile_text.quality_notes(err, [p["quality"] for p in sel_a.profiles + sel_b.profiles])


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.argument("selector")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--diff", "other", default=None, help="differential graph: SELECTOR is B, OTHER is A (the baseline)")
@_THREADS
@_SOURCE
@_START
@_END
@click.option("--format", "fmt", type=click.Choice(["svg", "speedscope", "folded"]), default="svg", show_default=True)
def flame(directory: Path, selector: str, output: Path, other: str | None, threads: int | None, source: str | None,
          start: float | None, end: float | None, fmt: str) -> None:  # fmt: skip
    """Flame graph of a variant per transaction (SVG via inferno, speedscope JSON or folded)."""
    from perflab.analyze import profile_select  # noqa: PLC0415
    from perflab.report import flame as fl  # noqa: PLC0415

    with Results(directory) as results:
        sel = profile_select.select(results, selector=selector, threads=threads, source=source)
        _, stacks, txn = profile_select.load(results, sel, start, end)
        scaled = fl.per_million_txn(stacks, txn)
        if other is not None:
            base_sel = profile_select.select(results, selector=other, threads=threads, source=sel.source)
            _, base_stacks, base_txn = profile_select.load(results, base_sel, start, end)
            base_scaled = fl.per_million_txn(base_stacks, base_txn)
    if other is None:
        if fmt == "svg":
            text = fl.svg(fl.folded_text(scaled), f"{sel.label} ({sel.source})",
                          f"{len(sel.profiles)} repeat(s), {txn:,.0f} transactions; widths per transaction")  # fmt: skip
        else:
            text = fl.speedscope(scaled, sel.label) if fmt == "speedscope" else fl.folded_text(scaled)
    else:
        if fmt != "svg" and fmt != "folded":
            raise UsageError("--diff draws an SVG (or --format folded: `stack a b` lines)", "drop --format speedscope")
        text = fl.diff_text(base_scaled, scaled)
        if fmt == "svg":
            text = fl.svg(text, f"{base_sel.label} -> {sel.label} ({sel.source})",
                          "red: more per transaction in B, blue: less; shape of B", differential=True)  # fmt: skip
    fl.write(output, text)
    out.print(f"wrote {output}")
