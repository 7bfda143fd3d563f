"""One experiment's recorded runs as series: per workload, variant, thread count and metric.

Input: the index's runs of one name (history/index.py). Output: Series, oldest run first, each
point a run's estimate with its interval and n, and the change points of the series
(history/changes.py) with what changed in provenance between the runs either side:

    Series(workload="mariadb oltp_read_only, 2x50000 rows, 8s", variant={"log": "OFF"}, threads=2,
           metric="qps", runs=[...], analysis=Analysis(change_points=[...], ...))

Runs of one name whose workload differs (another test, dataset, duration, server or design) are
never put in one series: each workload is its own, and `notes` says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perflab.errors import UsageError
from perflab.history import changes, provenance, record
from perflab.history.index import Index, StoredRun
from perflab.variants import variant_key, variant_label


@dataclass
class Series:
    workload_key: str
    workload: str
    variant: dict[str, str]
    threads: int
    metric: str
    runs: list[StoredRun] = field(default_factory=list)
    estimates: list[record.Estimate] = field(default_factory=list)  # one per run, in order
    analysis: changes.Analysis | None = None
    params: tuple[float, int, int] = (changes.ALPHA, changes.MIN_SIZE, changes.WINDOW)  # alpha, min_size, window

    @property
    def label(self) -> str:
        return f"{variant_label(self.variant)} at {self.threads} threads"

    def points(self) -> list[changes.Point]:
        return [changes.Point(e.mean, e.values, e.low, e.high, e.n) for e in self.estimates]


@dataclass
class History:
    name: str
    metric: str
    series: list[Series]
    notes: list[str]


def load(
    index: Index,
    name: str,
    metric: str,
    alpha: float = changes.ALPHA,
    min_size: int = changes.MIN_SIZE,
    window: int = changes.WINDOW,
) -> History:
    """The series of `name` for `metric`, analysed; UsageError naming the known names if none."""
    runs = index.runs(name)
    if not runs:
        known = index.names()
        raise UsageError(
            f"no runs of {name!r} in the history index {index.location}",
            f"names it has: {', '.join(known)}"
            if known
            else "perflab run records each run; or perflab history import DIR",
        )
    by_key: dict[tuple, Series] = {}
    for run in runs:
        for e in run.record.estimates:
            if e.metric != metric:
                continue
            key = (run.record.workload_key, variant_key(e.variant), e.threads)
            s = by_key.setdefault(
                key, Series(key[0], record.describe(run.record.workload), e.variant, e.threads, metric)
            )
            s.runs.append(run)
            s.estimates.append(e)
    for s in by_key.values():
        s.params = (alpha, min_size, window)
        s.analysis = changes.detect(s.points(), *s.params)
    ordered = sorted(
        by_key.values(),
        key=lambda s: (s.workload_key != runs[-1].record.workload_key, s.workload, s.threads, variant_key(s.variant)),
    )
    return History(name, metric, ordered, _notes(runs))


def _notes(runs: list[StoredRun]) -> list[str]:
    workloads: dict[str, list[StoredRun]] = {}
    for run in runs:
        workloads.setdefault(run.record.workload_key, []).append(run)
    if len(workloads) < 2:
        return []
    lines = [f"{len(workloads)} different workloads were run under this name: each is its own series"]
    for key, members in workloads.items():
        first, last = members[0].record.started_at, members[-1].record.started_at
        lines.append(f"  {key}: {record.describe(members[0].record.workload)} ({len(members)} runs, {first} to {last})")
    return lines


# How far from a change point its cause may lie: on noisy runs the split is placed a few runs off
# the true step (bench/history_detection.py counts a change point within 3 runs of its step as
# found; a real step in a noisy hour was placed 2 runs early: docs/history.md#measured).
NEARBY = 3


def cause(s: Series, change: changes.ChangePoint) -> dict[str, Any]:
    """What a change point says beyond its step: the provenance that differs between the run
    before it and the first run after, and the `perflab diff` of those two runs. Where nothing
    differs there, `provenance_nearby` holds what changed between consecutive runs within NEARBY
    runs of it, each with its `offset` (runs after the change point; negative: before it)."""
    before, after = s.runs[change.index - 1].record, s.runs[change.index].record
    across = provenance.differences(before.provenance, after.provenance)
    return {
        "before_run": before.directory,
        "after_run": after.directory,
        "provenance": across,
        "provenance_nearby": [] if across else nearby(s, change.index),
        "diff": diff_command(before.directory, after.directory, s.variant, s.threads),
    }


def nearby(s: Series, index: int) -> list[dict[str, Any]]:
    """Provenance changes between consecutive runs near run `index` (not across it), nearest first."""
    found = []
    for i in range(max(1, index - NEARBY), min(len(s.runs), index + NEARBY + 1)):
        if i != index:
            changed = provenance.differences(s.runs[i - 1].record.provenance, s.runs[i].record.provenance)
            found += [{**d, "offset": i - index} for d in changed]
    return sorted(found, key=lambda d: (abs(d["offset"]), d["offset"]))


def diff_command(a: str, b: str, variant: dict[str, str], threads: int) -> list[str]:
    """argv of the profile diff between two runs' same variant (B's from another directory)."""
    selector = f"{','.join(f'{k}={v}' for k, v in variant.items())}/t{threads}"
    return ["perflab", "diff", a, selector, selector, "--against", b]
