"""`perflab calibrate`: A/A runs of one configuration -> variance components -> what a time
budget can resolve on this machine; stored per host for `repeats = "auto"` to plan with.

perflab calibrate examples/quick.toml [--rounds 6] [--budget 10m] [-o DIR] [--seed N] [--format json]

The A/A experiment (spec/aa.py) runs through the same Scheduler and cell runner as `perflab
run`, into a results directory (reports and exports work on it). Then: the variance
components (analyze/variance.py), the per-cell overhead measured in the run (a cell's wall
time minus its window), the smallest effect the budget detects at 95% confidence and 80% power
with the window and rounds that reach it (analyze/power.py); saved to the calibration file of
this host and workload (store/calibration.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import secrets
import statistics
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from perflab import hostinfo, preflight, spec
from perflab.analyze import host_slope, host_speed, power, summary, variance
from perflab.cli.console import err, out
from perflab.cli.progress import ProgressBar
from perflab.cli.run import _record_start, order_line, parse_seed
from perflab.errors import PerflabError, UsageError
from perflab.spec.aa import aa_experiment, first_configuration
from perflab.store import calibration
from perflab.store.results import Results
from perflab.units import parse_duration, utc_now

MAX_ROUNDS = 100
MIN_BUDGET, MAX_BUDGET = 60.0, 7 * 86400.0


def parse_rounds(ctx: Any, param: Any, value: str) -> int:
    hint = f"--rounds takes a whole number of rounds from {power.MIN_ROUNDS} to {MAX_ROUNDS}, such as 6"
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()):
        raise click.BadParameter(f"{value!r} is not a whole number; {hint}")
    if not power.MIN_ROUNDS <= int(text) <= MAX_ROUNDS:
        raise click.BadParameter(f"{text[:20]} is out of range; {hint}")
    return int(text)


def parse_budget(ctx: Any, param: Any, value: str) -> float:
    hint = "--budget takes the time an experiment may take, such as 10m, 1h or 600s (at least 1m, at most 7 days)"
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(f"{exc}; {hint}") from None
    if not MIN_BUDGET <= seconds <= MAX_BUDGET:
        raise click.BadParameter(f"{value!r} is out of range; {hint}")
    return seconds


@click.command()
@click.argument("workload_file", metavar="WORKLOAD-FILE", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--rounds", default="6", show_default=True, callback=parse_rounds, metavar="N", help="A/A rounds to run")
@click.option(
    "--budget",
    default="10m",
    show_default=True,
    callback=parse_budget,
    metavar="DURATION",
    help="the experiment time to plan for",
)
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), help="results directory")
@click.option("--seed", callback=lambda ctx, param, value: parse_seed(value), metavar="N", help="order in rounds")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--chase",
    is_flag=True,
    help="weigh the canary's pointer chase in beside its spin when it explains QPS (opt-in: it can move "
    "with a variant's use of the caches; `perflab docs methodology#host-speed`)",
)
@click.option(
    "--allow-concurrent",
    is_flag=True,
    envvar="PERFLAB_ALLOW_CONCURRENT",
    help="run even while another perflab run uses this machine (its noise is then measured too)",
)
def calibrate(
    workload_file: Path,
    rounds: int,
    budget: float,
    output: Path | None,
    seed: int | None,
    fmt: str,
    chase: bool,
    allow_concurrent: bool,
) -> None:
    """Measure this machine's noise for WORKLOAD-FILE's first configuration (A/A runs) and
    say the smallest effect a --budget can detect (95% confidence, 80% power), with the
    window and repeats to use. Stored per host; `repeats = "auto"` plans with it."""
    exp = spec.load(workload_file)
    seed = secrets.randbelow(spec.MAX_SEED + 1) if seed is None else seed
    aa = dataclasses.replace(aa_experiment(exp, rounds), seed=seed)
    from perflab.builds.resolve import available

    preflight.check(aa, available)  # server option names against the binaries here too
    output = output or Path("results") / f"{aa.name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    if (output / "results.db").exists():
        raise UsageError(f"{output} already holds results", "choose another -o")
    from perflab.cache import cache_root

    err.print(f"calibrating {workload_file}: {len(aa.cells())} cells, results in {output}; {order_line(seed, False)}")
    doc = run_aa(exp, aa, output, budget, allow_concurrent, chase)
    where = calibration.path_for(cache_root() / "calibration", doc["host"], doc["workload_hash"], doc["design"])
    path = calibration.save(where, doc)
    doc["file"] = str(path)
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2))
    else:
        show(doc)


def run_aa(
    exp: spec.Experiment, aa: spec.Experiment, output: Path, budget: float, concurrent: bool, chase: bool = False
) -> dict:
    """Run the A/A experiment into `output` as `perflab run` would (lock, meta, progress,
    Scheduler), then measure it."""
    from perflab.builds import resolve as builds
    from perflab.run.lock import MachineLock
    from perflab.run.scheduler import Scheduler
    from perflab.store.writer_lock import WriterLock

    with contextlib.ExitStack() as stack:
        if not concurrent:
            stack.enter_context(MachineLock(output))
        stack.enter_context(WriterLock(output))  # one writer per results directory (store/writer_lock.py)
        results = stack.enter_context(Results(output, create=True))
        _record_start(results, aa, aa.text, len(aa.cells()), concurrent, False)
        status = "interrupted"
        try:
            with ProgressBar() as progress:
                Scheduler(aa, results, progress).run()
            status = "complete"
        finally:
            results.set_meta(status=status, ended_at=utc_now())
        doc = measure(exp, results, budget, chase)
        doc["server_sha256"] = _server_sha(results) or builds.installed(exp.file.experiment.server).sha256
    return doc


def measure(exp: spec.Experiment, results: Results, budget: float, chase: bool = False) -> dict[str, Any]:
    """The calibration document of a finished A/A run (store/calibration.py's format); `chase`:
    weigh the canary's chase in (`_host_speed`)."""
    meta, cells = summary.load(results)
    dec = variance.load(results, cells)
    window, restarts = (dec.component(n).variance for n in (variance.WINDOW, variance.RESTARTS))
    if window is None or restarts is None or dec.per_second is None:
        raise PerflabError(
            f"{results.dir}: too few settled cells to calibrate: {dec.advice}",
            "run more --rounds, or a longer warmup if cells did not settle (perflab report DIR says why)",
        )
    noise = power.Noise(dec.per_second, restarts, overhead_s(cells, exp.file.experiment.duration))
    duration = exp.file.experiment.duration
    margin = exp.file.experiment.equivalence_margin
    own = power.rounds_in(budget, noise, duration)
    return {
        "format": calibration.FORMAT,
        "created_at": utc_now(),
        "host": calibration.host_identity(meta.get("host") or hostinfo.collect()),
        "workload_hash": calibration.workload_hash(
            exp.file.dataset.model_dump(mode="json"), exp.file.workload.model_dump(mode="json")
        ),
        "experiment": str(exp.source),
        "design": exp.file.experiment.design,  # a run of another design does not use it (store/calibration.py)
        "configuration": first_configuration(exp),
        "rounds": max((c["repeat"] for c in cells), default=0),
        "results": str(results.dir),
        "noise": dataclasses.asdict(noise),
        "variance": dec.to_dict(),
        "plan": power.best_plan(noise, budget, also=duration).to_dict(),
        "at_file_duration": {
            "duration": duration,
            "rounds": own,
            "effect": power.detectable(noise, duration, own),
            "rounds_for_margin": power.rounds_for(noise, duration, margin),
            "margin": margin,
        },
        "alpha": power.ALPHA,
        "power": power.POWER,
        **_host_speed(results, cells, noise, budget, duration, chase),
    }


def _host_speed(
    results: Results,
    cells: list[dict[str, Any]],
    noise: power.Noise,
    budget: float,
    duration: float,
    chase: bool = False,
) -> dict[str, Any]:
    """{host_speed, host_speed_missing}. With the canary: the within-round slope of log QPS on the
    canary's log speed (its spin; with `chase`, its pointer chase weighed in when the chase's own slope is resolved:
    `chase_weight`; and the host's steal time weighed in when its own slope is resolved:
    `steal_weight`, analyze/host_slope.steal_weight), which runs of this host and workload then use as a fixed slope
    (cli/calibrated.py); and the noise left
    once the cells are adjusted with it (`adjusted_noise`), with the plan it gives (what a run
    with the canary and this calibration can detect); without a slope, host_speed None and
    host_speed_missing why (None too without the canary)."""
    if not any(c.get("host_speed") for c in cells):
        return {"host_speed": None, "host_speed_missing": None}
    found = host_slope.calibrate(cells, chase)
    if isinstance(found, str):
        return {"host_speed": None, "host_speed_missing": found}
    out = {**found, "restart": None, "per_second": None, "plan": None}
    fitted = host_speed.fit(cells, "qps", out) if host_slope.usable_slope(out) is None else None
    if fitted is None:
        return {"host_speed": out, "host_speed_missing": None}
    scaled = []
    for cell in cells:
        factor = fitted.factor(cell)
        qps = (cell.get("summary") or {}).get("qps")
        scaled.append({**cell, "summary": {**cell["summary"], "qps": qps * factor}} if factor and qps else cell)
    dec = variance.load(results, scaled)
    window, restart = (dec.component(n).variance for n in (variance.WINDOW, variance.RESTARTS))
    if window is not None and restart is not None and window + noise.restart > 0:
        adjusted = adjusted_noise(noise, (window + restart) / (window + noise.restart))
        out.update(
            restart=adjusted.restart,
            per_second=adjusted.per_second,
            plan=power.best_plan(adjusted, budget, also=duration).to_dict(),
        )
    return {"host_speed": out, "host_speed_missing": None}


def adjusted_noise(noise: power.Noise, share: float) -> power.Noise:
    """The noise a run adjusted with the slope plans on: both components scaled by the share of
    a cell's variance that the adjustment leaves (at most 1). Not the adjusted cells' restart
    component beside the unadjusted window one: the canary also takes out the host's
    second-to-second swings, which the window component (from unadjusted seconds) holds, so that
    split said 0.15% restart noise was left and planned 24 s windows; on real runs (2026-11-25,
    bench/fidelity.py --duration 24 and 10 in the same hour) 24 s windows left 5.0-7.2% of
    per-round noise against 6.7-8.2% at 10 s, and 10 rounds of 24 s resolve less than 19 of 10."""
    share = min(max(share, 0.0), 1.0)
    return dataclasses.replace(noise, per_second=noise.per_second * share, restart=noise.restart * share)


def overhead_s(cells: list[dict[str, Any]], duration: float) -> float:
    """Seconds a cell costs beyond its window (restore, start, warm-up, stop): the median of
    the ok cells' wall time minus the window. An interleaved cell's span is its whole group's
    (design.group: the cells that ran at once), so its share is the span over the group's size."""
    walls = [
        (dt.datetime.fromisoformat(c["ended_at"]) - dt.datetime.fromisoformat(c["started_at"])).total_seconds()
        / len((c.get("design") or {}).get("group") or [c])
        for c in cells
        if c["status"] == "ok" and c.get("ended_at") and c.get("started_at")
    ]
    return max(0.0, statistics.median(walls) - duration) if walls else 0.0


def _server_sha(results: Results) -> str | None:
    return next((c["build"]["sha256"] for c in results.cells() if (c.get("build") or {}).get("sha256")), None)


def show(doc: dict[str, Any]) -> None:
    """The calibration as a table: the components, then what the budget resolves."""
    dec, plan, own = doc["variance"], doc["plan"], doc["at_file_duration"]
    table = Table(title=f"Noise on {doc['host']['hostname']} ({doc['rounds']} A/A rounds)", title_justify="left")
    for name in ("component", "sd of log QPS", "share, paired ratio", "share, unpaired ratio"):
        table.add_column(name, justify="left" if name == "component" else "right")
    for c in dec["components"]:
        table.add_row(c["name"], *(_pct(c[k]) for k in ("sd", "fraction", "fraction_unpaired")))
    out.print(table)
    out.print(f"[dim]{dec['advice']}; per-cell overhead {doc['noise']['overhead']:.1f} s[/]", highlight=False)
    budget = f"{plan['budget'] / 60:.0f} min"
    plans = Table(title=f"What {budget} of two variants can detect (95% confidence, 80% power)", title_justify="left")
    for name in ("window", "rounds", "smallest effect"):
        plans.add_column(name, justify="right")
    plans.add_row(f"{plan['duration']} s (best)", str(plan["rounds"]), _pct(plan["effect"]))
    plans.add_row(f"{own['duration']:.0f} s (the file's)", str(own["rounds"]), _pct(own["effect"]))
    out.print(plans)
    show_host_speed(doc, budget)
    need = own["rounds_for_margin"]
    out.print(
        f'recommended: duration = "{plan["duration"]}s", repeats = {plan["rounds"]}; '
        f"a {own['margin']:.0%} effect at the file's duration needs {need if need else 'more than 1000'} rounds "
        f'(repeats = "auto" plans with it)\nsaved: {doc["file"]}',
        highlight=False,
    )


def show_host_speed(doc: dict[str, Any], budget: str) -> None:
    """The canary's slope and whether runs use it, or why there is none."""
    slope = doc.get("host_speed")
    if doc.get("host_speed_missing"):
        out.print(f"[dim]host speed: no slope measured: {doc['host_speed_missing']}[/]", highlight=False)
    if not slope:
        return
    unused = host_slope.usable_slope(slope)
    use = (
        f"not used by runs: {unused}"
        if unused
        else "runs use it, fixed, with the canary on (unless their file says host_speed = false)"
    )
    adjusted = slope.get("plan")
    if adjusted:
        use += (
            f"; adjusted with it, {budget} detect {_pct(adjusted['effect'])} "
            f"({adjusted['duration']} s windows, {adjusted['rounds']} rounds)"
        )
    out.print(
        f"host speed: log QPS follows the canary's log speed{_weighed(slope)} within rounds with slope "
        f"{slope['slope']:.2f} ± {slope['se']:.2f} (r = {slope['r']:.2f}, {slope['cells']} cells); {use}",
        highlight=False,
    )


def _weighed(found: dict[str, Any]) -> str:
    chase, steal = host_speed.weights(found)
    parts = [f"its chase with weight {chase:.2f}"] if chase else []
    parts += [f"the host's steal time with weight {steal:.2f} a core"] if steal else []
    return f" (its spin, {' and '.join(parts)})" if parts else ""


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"
