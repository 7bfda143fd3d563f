"""One experiment's recorded runs as series: per workload, variant, thread count and metric.

Input: the index's runs of one name (history/index.py). Output: Series, oldest run first, each
point a run's estimate with its interval and n, and the change points of the series
(history/changes.py) with what changed in provenance between the runs either side:

    Series(workload="mariadb oltp_read_only, 2x50000 rows, 8s", variant={"log": "OFF"}, threads=2,
           metric="qps", runs=[...], analysis=Analysis(change_points=[...], ...))

Runs of one name whose workload differs (another test, dataset, duration, server or design) are
never put in one series: each workload is its own, and `notes` says so.

A run that measured a baseline (an axis's first label) beside its variants also gives, per
variant, a ratio series: its ratio to the baseline within each run, with the interval the run
measured (record.Ratio). The machine's drift falls on both sides of a ratio and cancels; so where
a ratio series exists, the gate judges it and not the absolute series of its workload and thread
count (`gated`), and its change points are found with the interval test (history/changes.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perflab.errors import UsageError
from perflab.history import changes, provenance, record
from perflab.history.index import Index, StoredRun
from perflab.variants import variant_key, variant_label


ABSOLUTE, RATIO = "absolute", "ratio"


@dataclass
class Series:
    workload_key: str
    workload: str
    variant: dict[str, str]
    threads: int
    metric: str
    runs: list[StoredRun] = field(default_factory=list)
    estimates: list[Any] = field(default_factory=list)  # one per run, in order: record.Estimate or record.Ratio
    analysis: changes.Analysis | None = None
    params: tuple[float, int, int] = (changes.ALPHA, changes.MIN_SIZE, changes.WINDOW)  # alpha, min_size, window
    kind: str = ABSOLUTE  # or RATIO: the variant's ratio to `baseline` within each run
    baseline: dict[str, str] | None = None
    gated: bool = True  # False: a ratio series of its workload and thread count is gated instead

    @property
    def label(self) -> str:
        if self.kind == RATIO:
            return f"{variant_label(self.variant)} / {variant_label(self.baseline or {})} at {self.threads} threads"
        return f"{variant_label(self.variant)} at {self.threads} threads"

    @property
    def test(self) -> str:
        return changes.INTERVAL if self.kind == RATIO else changes.PERMUTATION

    def points(self) -> list[changes.Point]:
        return [
            changes.Point(e.mean, e.values, e.low, e.high, e.n, *((e.se**2, e.df) if getattr(e, "se", None) else ()))
            for e in self.estimates
        ]

    def detect(self, points: list[changes.Point]) -> changes.Analysis:
        return changes.detect(points, *self.params, test=self.test)


@dataclass
class History:
    name: str
    metric: str
    series: list[Series]
    notes: list[str]
    changes: list[dict[str, Any]] = field(default_factory=list)  # provenance.changes_at of the name's runs


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
    by_key = _build(runs, metric)
    ratioed = {(s.workload_key, s.threads) for s in by_key.values() if s.kind == RATIO}
    for s in by_key.values():
        s.params = (alpha, min_size, window)
        s.gated = s.kind == RATIO or (s.workload_key, s.threads) not in ratioed
        s.analysis = s.detect(s.points())
    ordered = sorted(
        by_key.values(),
        key=lambda s: (
            s.workload_key != runs[-1].record.workload_key,
            s.workload,
            s.threads,
            s.kind != RATIO,
            variant_key(s.variant),
        ),
    )
    return History(name, metric, ordered, _notes(runs), provenance.changes_at([r.record for r in runs]))


def _build(runs: list[StoredRun], metric: str) -> dict[tuple, Series]:
    """The runs' series of `metric`, unanalysed: absolute per workload, variant and thread count;
    ratio per workload, variant, thread count and baseline."""
    by_key: dict[tuple[Any, ...], Series] = {}
    for run in runs:
        for e in run.record.estimates:
            if e.metric == metric:
                key: tuple[Any, ...] = (run.record.workload_key, ABSOLUTE, variant_key(e.variant), e.threads)
                fresh = Series(key[0], record.describe(run.record.workload), e.variant, e.threads, metric)
                _add(by_key, key, run, e, fresh)
        for r in run.record.ratios:
            if r.metric == metric:
                key = (run.record.workload_key, RATIO, variant_key(r.variant), r.threads, variant_key(r.baseline))
                described = record.describe(run.record.workload)
                fresh = Series(key[0], described, r.variant, r.threads, metric, kind=RATIO, baseline=r.baseline)
                _add(by_key, key, run, r, fresh)
    return by_key


def _add(by_key: dict[tuple, Series], key: tuple, run: StoredRun, estimate: Any, fresh: Series) -> None:
    s = by_key.setdefault(key, fresh)
    s.runs.append(run)
    s.estimates.append(estimate)


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
