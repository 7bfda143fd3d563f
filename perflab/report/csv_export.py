"""CSV exports for spreadsheets and pandas: one column per axis, never all axes in one column.

    perflab export DIR --format csv              one row per cell (cells_flat's columns)
    perflab export DIR --format seconds-csv      one row per sysbench per-second line
    perflab export DIR --format comparisons-csv  one row per comparison (the JSON's `comparisons`)

Every file has `variant` (the variant key, `allocator=glibc,sort_buffer=2M`, or `default`)
followed by one column per axis named after the axis (store/views.axis_columns: an axis whose
name is taken by a fixed column, such as `threads`, becomes `axis_threads`). The cell and
per-second files have the columns of the SQL views cells_flat and seconds_flat in results.db,
with the same values; booleans are 0/1, missing values empty.

    id,order,variant,allocator,sort_buffer,threads,repeat,status,...,qps,...
    0,0,"allocator=glibc,sort_buffer=2M",glibc,2M,4,1,ok,...,8412.3,...
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from perflab.analyze import compare, evidence, summary
from perflab.store import views
from perflab.store.results import Results
from perflab.variants import variant_key

COMPARISON_COLUMNS = (
    "kind",
    "metric",
    "threads",
    "axis",
    "variant",
    "baseline",
    "ratio",
    "ci_low",
    "ci_high",
    "verdict",
    "rounds_needed",  # inconclusive: further rounds that would resolve it
    "method",  # paired | welch
    "method_reason",
    "pairs",
    "welch_ratio",
    "welch_ci_low",
    "welch_ci_high",
    "adjusted",  # [observe] host_speed: ratio, CI and verdict at the run's mean host speed
    "adjustment",
    "unadjusted_ratio",
    "unadjusted_ci_low",
    "unadjusted_ci_high",
    "p_difference",  # Holm-adjusted
    "p_equivalence",
    "family",
    "across_hosts",  # a host axis: the sides ran on two hosts (analyze/across_hosts.py)
    "aa_check",  # "passed", or why the row is not judged
    "margin",
    "n_baseline",
    "n_variant",
    "reason",
    "explanation",  # faster/slower: what was measured to differ beyond noise (analyze/evidence.py)
)


def axis_columns(meta: dict[str, Any], cells: list[dict[str, Any]], reserved: Iterable[str] = ()) -> dict[str, str]:
    """Axis -> its column (store/views.axis_columns, `reserved` beside the fixed columns), for the
    run's axes (those its cells name, in results without meta.experiment.axes)."""
    axes = list((meta.get("experiment") or {}).get("axes") or {})
    return views.axis_columns(axes or list(dict.fromkeys(a for cell in cells for a in cell["variant"])), reserved)


def with_axes(columns: Iterable[str], axis_cols: dict[str, str]) -> list[str]:
    """`columns` with the axis columns inserted after `variant`."""
    out: list[str] = []
    for name in columns:
        out.append(name)
        if name == "variant":
            out += axis_cols.values()
    return out


def _write(columns: list[str], rows: Iterable[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def variant_columns(variant: dict[str, str], axis_cols: dict[str, str]) -> dict[str, Any]:
    """`variant` (its key) and the variant's label in each axis column."""
    return {"variant": variant_key(variant), **{col: variant.get(a) for a, col in axis_cols.items()}}


def _bit(value: Any) -> int | None:
    return None if value is None else int(bool(value))


def cells_csv(results: Results) -> str:
    meta, cells = summary.load(results)
    axis_cols = axis_columns(meta, cells)
    return _write(with_axes(views.CELL_COLUMNS, axis_cols), (cell_row(c, axis_cols) for c in cells))


def cell_row(cell: dict[str, Any], axis_cols: dict[str, str]) -> dict[str, Any]:
    """A cell's row of views.CELL_COLUMNS and its axes: of a stored cell (analyze/summary.load) or
    of the JSON export's (report/export.py), which give the same row. Missing values are None."""
    figures = cell.get("summary") or {}
    lat = figures.get("latency_ms") or {}
    steady = cell.get("steady") or {}
    res = cell.get("resources") or {}
    return {
        "id": cell["id"],
        "order": cell["id"],
        **variant_columns(cell["variant"], axis_cols),
        "threads": cell["threads"],
        "repeat": cell["repeat"],
        "status": cell["status"],
        "error": cell["error"].splitlines()[0] if cell["error"] else None,
        "allocator_library": cell["allocator_library"],
        "allocator_version": cell["allocator_version"],
        "warmup_s": cell.get("warmup_s"),
        "warmup_method": cell.get("warmup_method"),
        "window_start_s": cell.get("window_start_s"),
        "settled": _bit(cell.get("settled")),
        "stalls": len(cell.get("stalls") or []),
        **{k: figures.get(k) for k in ("tps", "qps", "transactions", "errors_per_s")},
        **{f"latency_{k}_ms": lat.get(k) for k in ("min", "avg", "p50", "p95", "p99", "max")},
        **{f"steady_{k}": steady.get(k) for k in ("qps_mean", "qps_ci_low", "qps_ci_high")},
        "steady_cv": steady.get("cv"),
        **{k: res.get(k) for k in views.RESOURCE_COLUMNS},
        **_alloc(cell.get("alloc")),
        "host_speed_work_ns": (cell.get("host_speed") or {}).get("work_ns"),
        "steal_cpu_cores": res.get("steal_cpu_cores"),
    }


def _alloc(alloc: dict[str, Any] | None) -> dict[str, Any]:
    """The flat alloc_*_per_txn columns of a cell's `alloc` ([observe] alloc), empty without it."""
    out = {}
    for name, path in views.ALLOC_PATHS.items():
        value: Any = alloc
        for key in path.split(".")[1:]:
            value = value.get(key) if isinstance(value, dict) else None
        out[name] = value
    return out


def seconds_csv(results: Results) -> str:
    meta, cells = summary.load(results)
    axis_cols = axis_columns(meta, cells)
    rows = (row for cell in cells for row in second_rows(cell, results.intervals(cell["id"]), axis_cols))
    return _write(with_axes(views.SECOND_COLUMNS, axis_cols), rows)


def second_rows(
    cell: dict[str, Any], intervals: list[dict[str, Any]], axis_cols: dict[str, str]
) -> Iterable[dict[str, Any]]:
    """A cell's per-second rows (views.SECOND_COLUMNS and its axes), from its stored intervals
    or the JSON export's."""
    head = {"cell_id": cell["id"], **variant_columns(cell["variant"], axis_cols)}
    head.update(threads=cell["threads"], repeat=cell["repeat"])
    for iv in intervals:
        yield {**head, **iv, "warmup": _bit(iv["warmup"])}


def comparisons_csv(results: Results) -> str:
    """The comparisons of the JSON export (metrics qps and p95, default baseline), one per row;
    the axis columns give the compared variant's labels, `baseline` the baseline's key."""
    meta, cells = summary.load(results)
    axis_cols = axis_columns(meta, cells)
    rows = [comparison_row(c.to_dict(), axis_cols) for c in compare.verdicts(meta, cells).comparisons]
    return _write(with_axes(COMPARISON_COLUMNS, axis_cols), rows)


def comparison_row(comparison: dict[str, Any], axis_cols: dict[str, str]) -> dict[str, Any]:
    """A comparison's row (COMPARISON_COLUMNS and the compared variant's axes), from
    Comparison.to_dict(): the JSON export's comparisons are these dicts."""
    return {
        **comparison,
        **variant_columns(comparison["variant"], axis_cols),
        "baseline": variant_key(comparison["baseline"]),
        "explanation": evidence.explain(comparison["evidence"]),
    }


FORMATS = {"csv": cells_csv, "seconds-csv": seconds_csv, "comparisons-csv": comparisons_csv}
