"""The interchange formats: JSON ("perflab-results/9") and CSVs (report/csv_export.py).

JSON format history:
  perflab-results/1  first version; documented in docs/results-format.md.
  perflab-results/2  steady state and verdicts: per cell `warmup_s` (now the detected end of
                     the warm-up), `warmup_method`, `window_start_s`, `settled`,
                     `unsettled_reason`, `stalls`, `steady`; top level `groups` (per variant
                     x threads, CIs over repeats), `comparisons` (ratios, CIs, verdicts) and
                     `adaptive` (repeats = "auto": targets met, stop reason).
  perflab-results/3  per cell `alloc` (null without [observe] alloc): calls, bytes and the
                     allocator's syscalls per transaction, by size class
                     (observers/alloc/tracer.py).
  perflab-results/4  per cell `build`: the server binary the cell ran, {name (null: the
                     installed package), binary, sha256, version, compiler, kind, recipe, ...};
                     top level `builds` ([builds] entries: their record or their error) and
                     `datasets` (one per on-disk format: who prepared it, which builds ran on it).
  perflab-results/5  verdicts in four states: `verdict` is faster | slower | equivalent |
                     inconclusive (no more "no significant difference" or null); comparisons
                     carry `method` (paired | welch), `method_reason`, `pairs`, the Welch
                     estimate beside (`welch_ratio`, `welch_ci_low`, `welch_ci_high`),
                     Holm-adjusted `p_difference` and `p_equivalence`, `family`, `margin`,
                     `rounds_needed` (inconclusive); `experiment.equivalence_margin`;
                     `run.seed` (the order inside each round; null: the file's order).
  perflab-results/6  per cell `client`: the workload client's variant and use over the window,
                     {preload, library_mapped, rss_end_bytes, minor_faults_per_txn,
                     ctx_switches_per_txn, ...}; with [observe] status, `status_per_txn`
                     ({counter: per transaction}), `status_gauges` ({gauge: window mean}) and
                     `status_samples` ([{t, values: {name: value}}]); without it, null and [].
  perflab-results/7  top level `variance`: where the QPS variance comes from (second-to-second
                     in the window, between restarts, drift across rounds), each component's
                     variance of log QPS and its share of a paired and an unpaired ratio's
                     variance, and one line of advice (analyze/variance.py).
  perflab-results/8  per cell `profiles[]` carry `target` (server | client: whose stacks) and
                     `phase` is measured | warmup | stall | connect (the window, sysbench's
                     threads started to the window, the seconds of detected stalls, its
                     threads connecting): one entry per source, target
                     and phase. Readers that want the old list take phase "measured", target "server".
  perflab-results/9  per cell `host_speed` ([observe] host_speed; null without it): {work_ns,
                     samples, period_ms, spread, seconds: [[s, work_ns], ...]}
                     (observers/host_speed.py); comparisons carry `adjusted` (the ratio,
                     interval and verdict are at the run's mean host speed), `adjustment` (what
                     was done or why not; null without a canary) and the estimate without it,
                     `unadjusted_ratio`, `unadjusted_ci_low`, `unadjusted_ci_high`
                     (analyze/host_speed.py). The comparisons are the reports' (a run that
                     stopped on verdicts: its sequential ones).
  perflab-results/10 per cell `design` (experiment.design = "interleaved"; null: sequential):
                     {name, slice_s, group, turn, active_s, warning} (run/interleave.py); such
                     cells have null latency (sysbench's clock counts the stopped turns) and
                     `resources.idle_cpu_cores`; top level `experiment.design`.
                     Added within 10 (go-tpc, docs/workloads.md): per cell
                     `summary.transaction_types` and `summary.tool_tpmc` (go-tpc cells only) and
                     `run.throughput` {metric: "QPS" | "NOPM", means}: what every `qps` counts.
                     Added within 10 (a host axis, docs/hosts.md): comparisons' `across_hosts`
                     and `aa_check` (analyze/across_hosts.py); top level `host_datasets`,
                     `host_schedule`.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from perflab.analyze import compare, summary, variance
from perflab.analyze.rate import fixed_rate
from perflab.report import findings
from perflab.store.results import Results
from perflab.store.results import server_facts

FORMAT = "perflab-results/10"
REPORT_FORMAT = "perflab-report/1"  # `perflab report --format json`


def document(results: Results) -> dict[str, Any]:
    meta, stored = summary.load(results)
    cells = []
    for cell in stored:
        cells.append(_cell(cell, results.intervals(cell["id"]), results.rss_samples(cell["id"])))
        cells[-1]["status_samples"] = [{"t": t, "values": v} for t, v in results.status_samples(cell["id"])]
        cells[-1]["profiles"] = profile_refs(results, cell["id"])
    axes = (meta.get("experiment") or {}).get("axes") or {}
    base = compare.baseline_variant(axes, [])
    memory, fixed = server_facts(meta)["memory_figure"], fixed_rate(meta)
    groups = summary.groups(stored, base if axes else None, axes, memory=memory, fixed_rate=fixed)
    comparisons = [c.to_dict() for c in compare.verdicts(meta, stored).comparisons]
    return {
        "format": FORMAT,
        "experiment": meta.get("experiment", {}),
        "spec": meta.get("spec_text"),
        "host": meta.get("host", {}),
        "hosts": meta.get("hosts"),  # remote hosts (docs/hosts.md); null: none
        "dataset": meta.get("dataset"),
        "storage": meta.get("storage"),  # [experiment] storage as run/storage.py described it (null before)
        "run": {
            k: meta.get(k)
            for k in (
                "started_at",
                "ended_at",
                "status",
                "perflab_version",
                "cell_count",
                "workdir",
                "seed",
                "calibration",
                "design",
                "design_reason",
                "throughput",
            )
        },
        "groups": [g.to_dict() for g in groups],
        "comparisons": comparisons,
        "adaptive": meta.get("adaptive"),
        "variance": variance.load(results, stored).to_dict(),
        "builds": meta.get("builds") or {},
        "datasets": meta.get("datasets") or {},
        "host_datasets": meta.get("host_datasets"),  # a host axis's, prepared on each host; null: none
        "host_schedule": meta.get("host_schedule"),  # a host axis's hosts: at once or one at a time, why; null: none
        "cells": cells,
    }


def _cell(cell: dict[str, Any], intervals: list[dict[str, Any]], rss: list[tuple[float, int]]) -> dict[str, Any]:
    figures = cell.get("summary")
    return {
        "id": cell["id"],
        "key": cell["key"],
        "variant": cell["variant"],
        "threads": cell["threads"],
        "repeat": cell["repeat"],
        "retry_of": cell.get("retry_of"),  # the id of the unsettled cell this one measured again
        "order": cell["id"],
        "status": cell["status"],
        "error": cell["error"],
        "log_tail": cell["log_tail"],
        "backtrace": cell.get("backtrace"),
        "started_at": cell["started_at"],
        "ended_at": cell["ended_at"],
        "build": cell.get("build"),
        "host_speed": cell.get("host_speed"),
        "design": cell.get("design"),
        "preload": cell["preload"],
        "allocator_library": cell["allocator_library"],
        "allocator_version": cell["allocator_version"],
        # PostgreSQL: how many backends were seen mapping the variant's allocator (kept in resources)
        "preload_verified_backends": (cell.get("resources") or {}).get("preload_verified_backends"),
        "env": cell["env"],
        "server_options": cell["server_options"],
        "pinning": cell["pinning"],
        "warmup_s": cell.get("warmup_s"),
        "warmup_method": cell.get("warmup_method"),
        "window_start_s": cell.get("window_start_s"),
        "settled": None if cell.get("settled") is None else bool(cell["settled"]),
        "unsettled_reason": cell.get("unsettled_reason"),
        "stalls": cell.get("stalls") or [],
        "steady": cell.get("steady"),
        "summary": None
        if figures is None
        else {
            "tps": figures["tps"],
            "qps": figures["qps"],
            "transactions": figures["transactions"],
            "queries": figures["queries"],
            "latency_ms": figures["latency_ms"],
            "errors_per_s": figures["errors_per_s"],
            "reconnects": figures["reconnects"],
            "total_time_s": figures["total_time_s"],
            # go-tpc's; `rate` at a fixed arrival rate (workloads/rate.py)
            **{k: figures[k] for k in ("transaction_types", "tool_tpmc", "rate") if k in figures},
        },
        "intervals": [
            {
                "t": iv["t"],
                "warmup": bool(iv["warmup"]),
                "tps": iv["tps"],
                "qps": iv["qps"],
                "reads": iv["reads"],
                "writes": iv["writes"],
                "other": iv["other"],
                "p95_ms": iv["p95_ms"],
                "errors_per_s": iv["errors_per_s"],
                "reconnects_per_s": iv["reconnects_per_s"],
            }
            for iv in intervals
        ],
        "rss_samples": [{"t": t, "rss_bytes": v} for t, v in rss],
        "resources": cell["resources"],
        "sysbench_options": cell["sysbench_options"],
        "alloc": cell.get("alloc"),
        "client": client_fields(cell.get("client")),
        "status_per_txn": (cell.get("server_status") or {}).get("per_txn"),
        "status_gauges": (cell.get("server_status") or {}).get("gauges"),
    }


CLIENT_KEYS = ("preload", "library_mapped", "rss_end_bytes", "minor_faults_per_txn", "ctx_switches_per_txn")


def client_fields(client: dict[str, Any] | None) -> dict[str, Any] | None:
    """A cell's `client` (fixed interface: CLIENT_KEYS always present), the rest after them."""
    if client is None:
        return None  # results of a perflab before perflab-results/6
    return {**{k: client.get(k) for k in CLIENT_KEYS}, **client}


def profile_refs(results: Results, cell_id: int, top: int = 10) -> list[dict[str, Any]]:
    """The cell's profiles: where the folded stacks are (relative to the results directory),
    what they cover, their stack quality, and the top functions by self samples per transaction."""
    keep = (
        "source",
        "target",
        "phase",
        "path",
        "samples",
        "seconds",
        "transactions",
        "window_transactions",
        "frequency_hz",
        "interval_s",
        "call_graph",
        "quality",
    )
    return [{**{k: p[k] for k in keep}, "top": (p["top"] or [])[:top]} for p in results.profiles(cell_id)]


def to_json(results: Results) -> str:
    return json.dumps(document(results), indent=2)


def report_document(meta: dict[str, Any], cells: list[dict[str, Any]], baselines: list[str]) -> dict[str, Any]:
    """What `perflab report` prints, as data: groups per variant x threads (with the means of
    the table's per-transaction columns), comparisons against the chosen baseline for QPS and
    p95, and the findings (warnings) of every report format."""
    v = compare.verdicts(meta, cells, baselines)
    exp = meta.get("experiment") or {}
    keep = ("name", "server", "duration", "warmup", "max_warmup", "repeats", "pin", "axes")
    groups = [
        {
            **g.to_dict(),
            "minor_faults_per_txn_mean": summary.mean(g.faults_per_txn),
            "server_cpu_us_per_txn_mean": summary.mean(g.cpu_us_per_txn),
            "unsettled_cells": g.unsettled,
        }
        for g in v.groups
    ]
    return {
        "format": REPORT_FORMAT,
        "experiment": {**{k: exp.get(k) for k in keep}, "test": (exp.get("workload") or {}).get("test")},
        "host": meta.get("host", {}),
        "cells": len(cells),
        "baseline": v.baseline,
        "groups": groups,
        "comparisons": [c.to_dict() for c in v.comparisons],
        "findings": [asdict(f) for f in findings.collect(v.groups, cells, meta, v.comparisons)],
    }
