"""`perflab build`: make (or fetch) the builds an experiment names, without running its cells.

perflab build examples/pgo.toml            # builds in the cache, PGO trained; then `perflab run`
perflab build examples/pgo.toml --format json

`perflab run` does the same before its first cell; building first lets a long build run
unattended (and niced) while the machine is not measuring. A PGO build's training needs the
experiment's dataset: it is prepared here in a work directory on tmpfs and thrown away.
Exit 1 when a build failed (its step and log are printed), 0 when all are in the cache.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path

import click

from perflab import preflight, spec
from perflab.cli.console import err, out
from perflab.cli.progress import ProgressBar
from perflab.errors import UsageError


@click.command()
@click.argument("experiment", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--allow-concurrent",
    is_flag=True,
    envvar="PERFLAB_ALLOW_CONCURRENT",
    help="build even while a perflab run measures on this machine (the build will disturb it)",
)
def build(experiment: Path, fmt: str, allow_concurrent: bool) -> None:
    """Make every build EXPERIMENT's variants name (cached ones are only checked)."""
    from perflab.builds import Build
    from perflab.cache import cache_root, writable_cache
    from perflab.run.cell import CellRunner
    from perflab.run.datasets import Datasets
    from perflab.run.lock import MachineLock
    from perflab.run.workdir import work_dir
    from perflab.store.results import Results

    exp = spec.load(experiment)
    if not exp.file.builds:
        raise UsageError(f"{experiment} names no [builds]", "add a [builds.NAME] table and a variant with build = NAME")
    from perflab.builds.resolve import available

    preflight.check(exp, available)  # server option names against the binaries here too
    cache = writable_cache(cache_root())
    with tempfile.TemporaryDirectory(prefix="perflab-build-") as scratch, contextlib.ExitStack() as stack:
        if not allow_concurrent:  # a build on 2 CPUs would disturb a run's measurement
            stack.enter_context(MachineLock(Path(scratch)))
        results = stack.enter_context(Results(Path(scratch) / "results", create=True))
        workdir = stack.enter_context(work_dir())
        with ProgressBar() as progress:
            runner = CellRunner(exp, results, progress)
            datasets = Datasets(runner, results, workdir, progress, keep=False)  # a PGO training's, made on demand
            runner.prepare_builds(datasets.get, workdir, cache)
    records = {
        name: b.record() if isinstance(b, Build) else {"name": name, "error": b.message}
        for name, b in runner.builds.items()
        if name is not None
    }
    if fmt == "json":
        click.echo(json.dumps({"cache": str(cache), "builds": records}, indent=2))
    else:
        out.print(f"cache: {cache}")
        for name, record in records.items():
            if "error" in record:
                err.print(f"[red]build {name}: failed[/]\n{record['error']}", highlight=False)
            else:
                out.print(f"build {name}: {record['version']}  {record['binary']}  sha256 {record['sha256'][:16]}")
    if any("error" in r for r in records.values()):
        sys.exit(1)
