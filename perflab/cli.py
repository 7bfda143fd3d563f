"""perflab command line: run, report, export, doctor.

    spec.load -> preflight.check -> Scheduler(results).run -> report.text / report.export
PerflabError is caught here only and mapped to its exit code; anything else is a bug.
"""

from __future__ import annotations

import datetime as dt
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from perflab import __version__, hostinfo, preflight, spec
from perflab.errors import EXIT_INTERRUPTED, PerflabError, UsageError
from perflab.store.results import Results
from perflab.units import format_duration

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
@click.argument("experiment", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), help="results directory "
              "(default results/<name>-<timestamp>)")  # fmt: skip
@click.option("--check", is_flag=True, help="validate the experiment file and exit")
def run(experiment: Path, output: Path | None, check: bool) -> None:
    """Run every cell of EXPERIMENT and store the results."""
    exp = spec.load(experiment)
    preflight.check(exp)
    from perflab.run.scheduler import Scheduler, estimate_seconds  # noqa: PLC0415 - keeps `report` light

    cells = exp.cells()
    file = exp.file
    axes = " x ".join(f"{len(v)} {a}" for a, v in file.variants.items()) or "1 variant"
    out.print(
        f"[bold]{exp.name}[/]: {axes} x {len(file.workload.threads)} thread counts x {file.experiment.repeats} "
        f"repeats = [bold]{len(cells)} cells[/], estimated {format_duration(estimate_seconds(exp))}"
    )
    if check:
        return
    if output is None:
        output = Path("results") / f"{exp.name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    if (output / "results.db").exists():
        raise UsageError(f"{output} already holds results", "choose another -o; perflab never overwrites results")
    with Results(output, create=True) as results:
        results.set_meta(
            experiment={**file.model_dump(mode="json")["experiment"], "workload": file.workload.model_dump(mode="json"),
                        "dataset": file.dataset.model_dump(mode="json"), "axes": {a: list(v) for a, v in file.variants.items()}},
            spec_text=Path(experiment).read_text(encoding="utf-8"), host=hostinfo.collect(),
            started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            perflab_version=__version__, cell_count=len(cells), status="running",
        )  # fmt: skip
        out.print(f"results: {output}")
        status = "interrupted"
        try:
            with _progress() as progress:
                Scheduler(exp, results, progress).run()
            status = "complete"
        finally:
            results.set_meta(status=status, ended_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
        from perflab.report import text  # noqa: PLC0415

        text.render(out, results.meta(), results.cells())
        failed = sum(1 for c in results.cells() if c["status"] != "ok")
    out.print(f"\nresults: {output}   (perflab report {output} | perflab export {output} --format json)")
    if failed:
        err.print(f"[red]{failed} of {len(cells)} cells failed[/]; see the table above and {output}/logs/")
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


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def report(directory: Path) -> None:
    """Print the table of a results DIRECTORY: variants x threads, QPS, ratio, p95, RSS."""
    from perflab.report import text  # noqa: PLC0415

    with Results(directory) as results:
        text.render(out, results.meta(), results.cells())


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True)
def export(directory: Path, fmt: str) -> None:
    """Print the results of DIRECTORY in the documented interchange format."""
    from perflab.report import export as exporter  # noqa: PLC0415

    with Results(directory) as results:
        click.echo(exporter.to_json(results) if fmt == "json" else exporter.to_csv(results), nl=fmt == "json")


@main.command()
def doctor() -> None:
    """Which tools and allocators are present, which are missing and how to get them."""
    from perflab import doctor as doc  # noqa: PLC0415

    if not doc.render(out):
        sys.exit(1)


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
