"""`perflab run`: an experiment file -> checked -> cells -> Scheduler -> results directory.

perflab run examples/quick.toml [-o DIR] [--seed N] [--check [--format json]] [--allow-concurrent]
perflab run --resume DIR          # an interrupted run: only the cells it has not stored

Each round runs every (variant, threads) once in a random order drawn from the seed (spec/
matrix.py); without --seed a random one, stored in the results (meta `seed`) and printed, so
`--seed N` runs the same order again and `--resume` keeps it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import secrets
import sqlite3
import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from perflab import __version__, hostinfo, preflight, servers, spec
from perflab.cli.console import err, out
from perflab.cli.progress import ProgressBar
from perflab.errors import UsageError
from perflab.store.results import Results
from perflab.units import utc_now
from perflab.workloads import rate


@click.command()
@click.argument("experiment", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    help="results directory (default results/<name>-<timestamp>)",
)
@click.option(
    "--resume",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="continue the interrupted run in DIR: only the cells it has not stored, on the same dataset",
)
@click.option("--check", is_flag=True, help="validate the experiment file and exit")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="with --check: the matrix and estimate as JSON",
)
@click.option(
    "--seed",
    callback=lambda ctx, param, value: parse_seed(value),
    metavar="N",
    help=f"the order inside each round (0 to {spec.MAX_SEED}; default: a random seed, stored and printed)",
)
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="plan with this calibration file (default: this host's and workload's, if one matches)",
)
@click.option(
    "--history",
    "history",
    metavar="PATH|postgresql://...|off",
    envvar="PERFLAB_HISTORY",
    default=None,
    help="record the finished run in this history index (default ~/.local/share/perflab/history.sqlite)",
)
@click.option(
    "--allow-concurrent",
    is_flag=True,
    envvar="PERFLAB_ALLOW_CONCURRENT",
    help="run even while another perflab run uses this machine (both will be disturbed)",
)
def run(
    experiment: Path | None,
    output: Path | None,
    resume: Path | None,
    check: bool,
    fmt: str,
    seed: int | None,
    calibration: Path | None,
    history: str | None,
    allow_concurrent: bool,
) -> None:
    """Run every cell of EXPERIMENT and store the results (or finish an interrupted run)."""
    if fmt == "json" and not check:
        raise UsageError("--format json describes a --check only", "perflab run FILE.toml --check --format json")
    from perflab.history.index import check_location

    check_location(history)  # a mistyped --history is refused before the run, not after it
    exp, done = _experiment(experiment, output, resume, seed)
    if resume is None and output is not None:
        _refuse_output(output)  # before the checks: --check refuses it as the run does
    output = resume if resume is not None else output
    from perflab.builds.resolve import available

    preflight.check(exp, available)  # server option names against the binaries here too
    exp = preflight.fit_design(exp) if resume is None else exp
    _warn_durability(exp)
    from perflab.cli import calibrated

    exp, planned = calibrated.plan(exp, calibration) if resume is None else (exp, {})
    from perflab.run.adaptive import max_rounds
    from perflab.run.scheduler import Scheduler, estimate_seconds

    cells = exp.cells()
    from perflab.report import plan

    matrix = plan.plan(exp, len(cells), estimate_seconds, _build_status(exp), max_rounds(exp))
    if check and fmt == "json":
        click.echo(json.dumps({**matrix, "calibration": planned or None}, indent=2))
        return
    out.print(plan.line(matrix))
    if planned and not calibrated.said_before(planned):
        out.print(escape(planned["note"]), highlight=False)
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
            _refuse_output(output)
    from perflab.run.lock import MachineLock
    from perflab.store.writer_lock import WriterLock

    assert output is not None  # --resume's directory, -o's, or the default above
    with contextlib.ExitStack() as stack:
        if not allow_concurrent:
            stack.enter_context(MachineLock(output))
        stack.enter_context(WriterLock(output))  # one writer per results directory, --allow-concurrent or not
        if resume is None:
            _refuse_output(output)  # a run into the same -o that ended while this one started
        _run(exp, exp.text, output, cells, Scheduler, allow_concurrent, resume is not None, planned, history)


def _refuse_output(output: Path) -> None:
    """A results directory is never written over (a file there is click's to refuse: -o is a dir_okay path)."""
    if (output / "results.db").exists():
        raise UsageError(f"{output} already holds results", "choose another -o, or --resume it if it was interrupted")


def _warn_durability(exp: spec.Experiment) -> None:
    """A durability variant on a memory filesystem measures nothing of a disk: say so, with the remedy."""
    from perflab.report import io_findings
    from perflab.run import storage
    from perflab.spec.hosts import server_here

    e = exp.file.experiment
    if e.storage != "tmpfs" and not server_here(exp.file):
        return  # a directory on the server hosts: described there as the run starts (hosts/server.py)
    where = storage.of_experiment(e.storage, exp.source)
    durability = list(servers.kind(e.server).durability_options())
    names = io_findings.durability_names(durability, [c.server_options for c in exp.cells()])
    if names and not where.on_disk:
        err.print(f"[yellow]warning:[/] {escape(io_findings.durability_text(names, where.fstype))}")


def _experiment(
    experiment: Path | None, output: Path | None, resume: Path | None, seed: int | None
) -> tuple[spec.Experiment, int]:
    """(the experiment with its seed, cells already stored): a file's, with --seed or a drawn
    seed; or an interrupted run's (--resume), with its stored seed."""
    if resume is not None:
        if experiment is not None or output is not None:
            raise UsageError("--resume DIR takes neither an EXPERIMENT file nor -o", "perflab run --resume DIR")
        return _resumable(resume, seed)
    if experiment is None:
        raise UsageError("no EXPERIMENT file given", "perflab run FILE.toml, or perflab run --resume DIR")
    seed = secrets.randbelow(spec.MAX_SEED + 1) if seed is None else seed
    return dataclasses.replace(spec.load(experiment), seed=seed), 0


def _build_status(exp: spec.Experiment) -> dict[str, str]:
    """Each build a variant uses: cached, or what making it will take (`run --check`)."""
    if not exp.file.builds:
        return {}
    from perflab.builds import resolve
    from perflab.cache import cache_root

    used = {cell.build for cell in exp.cells()}
    return {
        n: resolve.status(n, b, cache_root(), resolve.training_id(exp.file, b), exp.file.experiment.server)
        for n, b in exp.file.builds.items()
        if n in used
    }


def parse_seed(value: str | None) -> int | None:
    """--seed: a whole number from 0 to MAX_SEED (exit 2 otherwise, naming the option)."""
    if value is None:
        return None
    hint = f"--seed takes a whole number from 0 to {spec.MAX_SEED}, such as the seed a run printed"
    text = value.strip()
    if text.startswith("-") and text[1:].isascii() and text[1:].isdigit():
        raise click.BadParameter(f"{value} is negative; {hint}")
    if not (text.isascii() and text.isdigit()):
        raise click.BadParameter(f"{value!r} is not a whole number; {hint}")
    if len(text) > len(str(spec.MAX_SEED)) or int(text) > spec.MAX_SEED:
        raise click.BadParameter(f"{text[:30]}{'...' if len(text) > 30 else ''} is too large; {hint}")
    return int(text)


def _resumable(directory: Path, seed: int | None) -> tuple[spec.Experiment, int]:
    """The experiment of an interrupted results directory (from its stored file, with its
    stored seed: the same order) and how many cells it has stored."""
    with Results(directory) as results:
        meta = results.meta()
        stored = len(results.cells())
    from perflab.store.writer_lock import WriterLock

    with WriterLock(directory):  # refused at once, naming it, while a run writes there
        pass
    text = meta.get("spec_text")
    if not text:
        raise UsageError(f"{directory}: the results hold no experiment file to resume", "run the experiment anew")
    if meta.get("perflab_version") != __version__:
        err.print(
            f"[yellow]warning:[/] {directory} was written by perflab {meta.get('perflab_version')}, "
            f"this is {__version__}"
        )
    stored_seed = meta.get("seed")  # None: an older perflab ran the file's order
    if seed is not None and seed != stored_seed:
        raise UsageError(
            f"--seed {seed}: {directory} was run with seed {stored_seed}",
            "--resume keeps the stored order: drop --seed",
        )
    exp = spec.parse(text, f"{directory}/results.db (its stored experiment file)")
    if meta.get("design") and meta["design"] != exp.file.experiment.design:  # preflight chose another
        from perflab.spec.design import with_design

        exp = with_design(exp, meta["design"], meta.get("design_reason") or "")
    from perflab.cli.calibrated import resumed

    return resumed(dataclasses.replace(exp, seed=stored_seed), meta), stored


def _run(
    exp: spec.Experiment,
    spec_text: str,
    output: Path,
    cells: list,
    scheduler: Any,
    concurrent: bool,
    resume: bool,
    planned: dict[str, Any] | None = None,
    history: str | None = None,
) -> None:
    with Results(output, create=not resume) as results:
        _record_start(results, exp, spec_text, len(cells), concurrent, resume)
        if planned:
            results.set_meta(calibration=planned)
        out.print(f"results: {output}")
        out.print(order_line(exp.seed, resume))
        status = "interrupted"
        try:
            with ProgressBar() as progress:
                scheduler(exp, results, progress).run(resume=resume)
            status = "complete"
        finally:
            try:
                results.set_meta(status=status, ended_at=utc_now())
            except sqlite3.OperationalError:  # a full disk: the error being raised says so already
                pass
        from perflab.analyze import summary, variance
        from perflab.report import text

        meta, loaded = summary.load(results)
        text.render(out, meta, loaded, noise=variance.load(results, loaded))
        stored = results.cells()
        # a failure measured again, and well, is made up for: the analysis uses the retry
        made_up = {c["retry_of"] for c in stored if c.get("retry_of") is not None and c["status"] == "ok"}
        failed = sum(1 for c in stored if c["status"] != "ok" and c["id"] not in made_up)
        again = sum(1 for c in stored if c["status"] != "ok" and c["id"] in made_up)
    out.print(f"\nresults: {output}   (perflab report {output} | perflab export {output} --format json)")
    from perflab.cli.history import record_run

    record_run(output, history)
    if again:
        err.print(f"{again} failed cell(s) measured again, and well (retry_of): see {output}/logs/ for the failure")
    if failed:
        err.print(f"[red]{failed} of {len(stored)} cells failed[/]; see the table above and {output}/logs/")
        sys.exit(1)


def order_line(seed: int | None, resume: bool) -> str:
    """How the rounds are ordered, with the seed that reproduces it."""
    if seed is None:
        return "order: every round in the file's order (results of an older perflab)"
    again = "the stored seed" if resume else f"perflab run --seed {seed} runs this order again"
    return f"order: randomized within each round, seed {seed} ({again})"


def _record_start(
    results: Results, exp: spec.Experiment, spec_text: str, cells: int, concurrent: bool, resume: bool
) -> None:
    """The run's metadata: what is run, on which host, by which perflab (a resume: when)."""
    now, file = utc_now(), exp.file
    if resume:
        results.set_meta(status="running", resumed_at=[*results.meta().get("resumed_at", []), now])
        return
    host = hostinfo.collect()
    results.set_meta(
        server_facts=servers.kind(file.experiment.server).facts(host),
        experiment={
            **file.model_dump(mode="json")["experiment"],
            "workload": file.workload.model_dump(mode="json"),
            "dataset": file.dataset.model_dump(mode="json"),
            "axes": {a: list(v) for a, v in file.variants.items()},
            "rates": rate.rates(file),  # fixed arrival rates ([] a closed loop): analyze/rate.py
        },
        spec_text=spec_text,
        host=host,
        git=_git(exp),
        started_at=now,
        perflab_version=__version__,
        seed=exp.seed,
        design=file.experiment.design,
        design_reason=exp.design_reason,
        throughput=_throughput(file),
        cell_count=cells,
        status="running",
        concurrent_allowed=concurrent,
    )


def _throughput(file: spec.ExperimentFile) -> dict[str, str]:
    """What the summaries' `qps` counts for this workload, and its name in the tables."""
    from perflab import workloads

    workload = workloads.of(file)
    return {"metric": workload.metric, "means": workload.throughput}


def _git(exp: spec.Experiment) -> dict[str, str]:
    """The git commits the history names at a change point: the experiment file's repository, and
    each [builds] source tree's (history/provenance.py)."""
    from perflab.history import provenance

    trees = {n: b.source for n, b in exp.file.builds.items() if b.source and b.source.startswith("/")}
    here = Path(exp.source)
    return provenance.git_of(here if here.is_file() else None, trees)
