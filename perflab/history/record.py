"""A results directory as one run of the history: its name, workload, time, provenance, and per
variant x threads x metric the estimate `perflab report` and `compare` show.

Input: a results directory (store/results.py). Output: a RunRecord:

    RunRecord(name="nightly", workload_key="5d1c0e2a", started_at="2026-11-27T18:18:24+00:00",
              estimates=[Estimate(variant={"general_log": "OFF"}, threads=2, metric="qps",
                                  mean=41230.0, low=40910.0, high=41550.0, n=5, values=[...])], ...)

The estimate is the group's (analyze/summary.py): the mean of the settled repeats with its t
interval, the figure every report prints, and the values behind it (so a gate can compare the
newest run with earlier ones by the same ratio estimate `compare A B` uses). A results directory
that cannot be read raises CorruptResults with the reason; `perflab history import` skips it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from perflab.errors import PerflabError
from perflab.history import provenance

METRICS = ("qps", "p95")  # as `compare --metric`


class CorruptResults(PerflabError):
    """A results directory that cannot be recorded (unreadable, no run, no settled cell)."""


@dataclass(frozen=True)
class Estimate:
    variant: dict[str, str]
    threads: int
    metric: str  # qps | p95
    mean: float | None
    low: float | None  # the 95% t interval over the settled repeats; None below 3
    high: float | None
    n: int
    values: list[float] = field(default_factory=list)  # one per settled repeat


@dataclass(frozen=True)
class Ratio:
    """A variant's ratio to the run's baseline (an axis's first label), measured within the run:
    the comparison `perflab report` prints (analyze/compare.py; paired over rounds when it can
    be). `mean` is the ratio (named as Estimate's, so a series reads both alike); `se` and `df`
    are those of log(ratio), None without an interval."""

    variant: dict[str, str]
    baseline: dict[str, str]
    threads: int
    metric: str
    mean: float | None
    low: float | None
    high: float | None
    n: int  # pairs (paired) or the fewer repeats of the two sides (welch)
    method: str
    se: float | None
    df: float | None
    values: list[float] = field(default_factory=list)  # none: a ratio's uncertainty is its se


@dataclass(frozen=True)
class RunRecord:
    name: str
    workload_key: str  # one series per key: runs of one name with another workload are apart
    workload: dict[str, Any]  # what the key is made of
    started_at: str
    ended_at: str | None
    directory: str
    status: str | None
    provenance: dict[str, str]
    estimates: list[Estimate]
    ratios: list[Ratio] = field(default_factory=list)  # none when the run measured no baseline beside a variant

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def workload_of(experiment: dict[str, Any]) -> dict[str, Any]:
    """What makes two runs of one name comparable: the server, workload, dataset, duration and
    design. Variants may come and go (each is its own series)."""
    keys = ("server", "workload", "dataset", "duration", "design")
    return {k: experiment.get(k) for k in keys}


def workload_key(workload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(workload, sort_keys=True, default=str).encode()).hexdigest()[:8]


def describe(workload: dict[str, Any]) -> str:
    """One line a reader recognises: `mariadb oltp_read_only, 2x50000 rows, 8s`."""
    load, data = workload.get("workload") or {}, workload.get("dataset") or {}
    test = load.get("test") or load.get("tool") or "?"
    rows = f"{data.get('tables')}x{data.get('table_size')} rows" if data.get("tables") else f"scale {data.get('scale')}"
    options = ",".join(f"{k}={v}" for k, v in sorted((load.get("options") or {}).items()))
    return f"{workload.get('server') or 'mariadb'} {test}{' ' + options if options else ''}, {rows}, " + (
        f"{workload.get('duration'):g}s" if isinstance(workload.get("duration"), int | float) else "?"
    )


def read(directory: Path) -> RunRecord:
    """The run in `directory` (CorruptResults with the reason when it cannot be read)."""
    from perflab.store.results import Results

    try:
        with Results(directory) as results:
            return _record(directory, results)
    except CorruptResults:
        raise
    except PerflabError as exc:
        where = "" if str(directory) in exc.message else f"{directory}: "
        raise CorruptResults(f"{where}{exc.message}", exc.hint) from None
    except (sqlite3.Error, KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
        raise CorruptResults(f"{directory}: unreadable results ({type(exc).__name__}: {exc})") from None


def _record(directory: Path, results: Any) -> RunRecord:
    from perflab.analyze import compare, summary

    meta, cells = summary.load(results)
    experiment = meta.get("experiment") or {}
    if not experiment.get("name") or not meta.get("started_at"):
        raise CorruptResults(f"{directory}: no experiment name or start time in its meta")
    found = compare.verdicts(meta, cells)  # as every report groups and compares them
    groups = found.groups
    estimates = [e for g in groups for e in _estimates(g)]
    if not any(e.n for e in estimates):
        raise CorruptResults(f"{directory}: no settled cell to take an estimate from", "perflab report DIR says why")
    workload = workload_of(experiment)
    return RunRecord(
        name=experiment["name"],
        workload_key=workload_key(workload),
        workload=workload,
        started_at=meta["started_at"],
        ended_at=meta.get("ended_at"),
        directory=str(Path(directory).resolve()),
        status=meta.get("status"),
        provenance=provenance.of_run(meta, cells),
        estimates=estimates,
        ratios=[r for c in found.comparisons if (r := _ratio(c)) is not None],
    )


def _estimates(group: Any) -> list[Estimate]:
    out = []
    for metric, values, interval in (("qps", group.qps, group.qps_ci), ("p95", group.p95_ms, group.p95_ci)):
        if values:
            out.append(
                Estimate(
                    dict(group.variant),
                    group.threads,
                    metric,
                    interval.mean,
                    interval.low,
                    interval.high,
                    len(values),
                    [float(v) for v in values],
                )
            )
    return out


def _ratio(c: Any) -> Ratio | None:
    """A `variant` comparison as a Ratio (axis rows, the marginal effects, are not series)."""
    if c.kind != "variant" or c.ratio is None or c.across_hosts:
        return None
    se, df = c.estimate.se_df() if c.estimate is not None and c.estimate.has_interval else (None, None)
    n = c.pairs if c.method == "paired" else min(c.n_baseline, c.n_variant)
    return Ratio(
        dict(c.variant), dict(c.baseline), c.threads, c.metric, c.ratio, c.ci_low, c.ci_high, n, c.method, se, df
    )
