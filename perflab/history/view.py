"""A History as data: what `perflab history --format json` prints and the text and HTML pages show.

Format "perflab-history/2" (docs/results-format.md#perflab-history2):

    {"format": "perflab-history/2", "name": "nightly", "metric": "qps", "index": "...", "notes": [...],
     "method": {"alpha": 0.01, "min_size": 3, "window": 50},
     "provenance_changes": [{"run", "started_at", "directory", "kind", "changes": [{field, before, after}]}],
     "series": [{"workload_key", "workload", "kind": "absolute" | "ratio", "variant", "baseline",
                 "threads", "metric", "gated", "test", "tau",
                 "runs": [{"run", "started_at", "directory", "mean", "low", "high", "n", "provenance"}],
                 "segments": [{"first_run", "last_run", "level", "low", "high"}],
                 "change_points": [{"run", "started_at", "ratio", "low", "high", "p", "direction",
                                    "before_run", "after_run", "provenance": [{field, before, after}],
                                    "provenance_nearby": [{field, before, after, offset}],
                                    "diff": [argv], "diff_top": [{function, a, b, delta}] | null,
                                    "alloc_diff": [...] | null, "alloc_diff_command": [argv] | null,
                                    "status_diff": [{counter, baseline, variant, ratio, delta}] | null}]}],
     "gate": {"fail_on", "failed": [...], "inconclusive": [...], "passed": bool, "exit_code"} | null}

Version 2 added the ratio series (`kind`, `baseline`, `gated`, `test`: a ratio series' runs are
each run's ratio of the variant to `baseline`, its `mean` the ratio), `provenance_changes` (every
change between consecutive runs of the name, at the run where it happened; runs numbered from 1
among all the name's runs) and the gate's `exit_code`. Runs are numbered from 1 within their
series. `diff_top` is the profile diff's first functions when both runs stored profiles of that
variant, else null (the command is named either way); `alloc_diff` and `status_diff` the allocation
figures and server counters per transaction that differ, when both runs recorded them ([observe]
alloc, status), else null.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perflab.analyze.compare import METRICS
from perflab.errors import PerflabError
from perflab.history import series as series_mod
from perflab.history.series import History, Series

FORMAT = "perflab-history/2"
DIFF_TOP = 5


def document(history: History, location: str, gate: dict[str, Any] | None = None) -> dict[str, Any]:
    alpha, min_size, window = history.series[0].params if history.series else (None, None, None)
    return {
        "format": FORMAT,
        "name": history.name,
        "metric": history.metric,
        "index": location,
        "notes": history.notes,
        "method": {"alpha": alpha, "min_size": min_size, "window": window},
        "provenance_changes": history.changes,
        "series": [series_document(s) for s in history.series],
        "gate": gate,
    }


def series_document(s: Series) -> dict[str, Any]:
    analysis = s.analysis
    return {
        "workload_key": s.workload_key,
        "workload": s.workload,
        "kind": s.kind,
        "variant": s.variant,
        "baseline": s.baseline,
        "threads": s.threads,
        "metric": s.metric,
        "gated": s.gated,
        "test": s.test,
        "tau": analysis.tau if analysis else None,
        "runs": [
            {
                "run": i + 1,
                "started_at": r.record.started_at,
                "directory": r.record.directory,
                "mean": e.mean,
                "low": e.low,
                "high": e.high,
                "n": e.n,
                "provenance": r.record.provenance,
            }
            for i, (r, e) in enumerate(zip(s.runs, s.estimates))
        ],
        "segments": [
            {"first_run": g.start + 1, "last_run": g.end, "level": g.level, "low": g.low, "high": g.high}
            for g in (analysis.segments if analysis else [])
        ],
        "change_points": [change_document(s, c) for c in (analysis.change_points if analysis else [])],
    }


def change_document(s: Series, c: Any) -> dict[str, Any]:
    cause = series_mod.cause(s, c)
    better = (c.ratio > 1) == METRICS.get(s.metric, True)
    return {
        "run": c.index + 1,
        "started_at": s.runs[c.index].record.started_at,
        "ratio": c.ratio,
        "low": c.low,
        "high": c.high,
        "p": float(c.p),
        "direction": "improvement" if better else "regression",
        **cause,
        "diff_top": profile_diff_top(cause["before_run"], cause["after_run"], s.variant, s.threads),
        **counter_diffs(cause["before_run"], cause["after_run"], s.variant, s.threads),
    }


def profile_diff_top(before: str, after: str, variant: dict[str, str], threads: int) -> list[dict[str, Any]] | None:
    """The first functions of `perflab diff` between the runs, when both stored profiles; else None."""
    from perflab.analyze import profile_diff, profile_select
    from perflab.store.results import Results

    selector = f"{','.join(f'{k}={v}' for k, v in variant.items())}/t{threads}"
    if not (Path(before) / "results.db").is_file() or not (Path(after) / "results.db").is_file():
        return None
    try:
        with Results(Path(before)) as a, Results(Path(after)) as b:
            if not a.profiles() or not b.profiles():
                return None
            sel_a = profile_select.select(a, selector=selector)
            sel_b = profile_select.select(b, selector=selector, source=sel_a.source)
            merged_a, _, _ = profile_select.load(a, sel_a)
            merged_b, _, _ = profile_select.load(b, sel_b)
    except PerflabError:
        return None  # no profile of this variant, phase or target in one of them: the command says why
    rows = profile_diff.diff(merged_a, merged_b).rows(limit=DIFF_TOP, by="self")
    keep = ("function", "a_self_per_txn", "b_self_per_txn", "delta_self_per_txn", "significant")
    return [{k: r.get(k) for k in keep} for r in rows]


def counter_diffs(before: str, after: str, variant: dict[str, str], threads: int) -> dict[str, Any]:
    """What else the two runs measured of the variant, per transaction, where both recorded it:
    allocation figures ([observe] alloc, with their noise floor: `alloc_diff`, and the command
    `alloc_diff_command`) and the server's counters ([observe] status: `status_diff`); else null."""
    from perflab.analyze import alloc, status_diff, summary
    from perflab.store.results import Results

    sides = []
    for where in (before, after):
        if not (Path(where) / "results.db").is_file():
            return {"alloc_diff": None, "alloc_diff_command": None, "status_diff": None}
        with Results(Path(where)) as results:
            _, cells = summary.load(results)
        sides.append(
            [
                c
                for c in cells
                if c["variant"] == variant
                and c["threads"] == threads
                and c["status"] == "ok"
                and c.get("settled") in (True, 1, None)
            ]
        )
    a, b = sides
    traced = all(c.get("alloc") for c in a + b) and a and b
    counted = all((c.get("server_status") or {}).get("per_txn") for c in a + b) and a and b
    command = series_mod.diff_command(before, after, variant, threads)
    return {
        "alloc_diff": alloc.diff_figures(a, b) if traced else None,
        "alloc_diff_command": ["perflab", "alloc", *command[2:]] if traced else None,
        "status_diff": status_diff.differences(a, b) if counted else None,
    }
