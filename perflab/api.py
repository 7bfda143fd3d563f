"""The Python API: a results directory as pandas DataFrames, versioned with the JSON export.

    import perflab
    run = perflab.open("results/sb")      # or perflab.api.from_export(json.load(f)) for an export
    run.format                            # "perflab-results/10": the export's format, and these frames'
    run.cells                             # one row per cell: the `csv` export's columns, then key, retry_of, ...
    run.seconds                           # one row per per-second line: the `seconds-csv` export's columns
    run.comparisons                       # one row per comparison: the `comparisons-csv` columns, evidence
    run.groups                            # one row per variant x threads: the export's `groups`
    run.meta                              # the export's top level without those lists, `run`'s keys lifted

Every value comes from report/export.document, the document `perflab export` prints, flattened
by report/csv_export's row builders: no figure is computed here. The frames change with the
results format (FORMAT): columns may be added within a version; a column removed, renamed, or
changed in meaning or dtype makes a new version of the format (docs/api.md). pandas is imported
by this module only, so the CLI starts without it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from perflab.errors import ResultsFormatError
from perflab.report import csv_export, export
from perflab.store import views
from perflab.store.results import Results

FORMAT = export.FORMAT


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


FRAMES = ("cells", "seconds", "comparisons", "groups")  # the export's lists that become frames

# cells: the columns after the `csv` export's (views.CELL_COLUMNS), from the export's cell
CELL_EXTRAS = (
    "key",  # allocator=glibc/t4/r1; a retry's ends /retry-of-N
    "retry_of",  # the id of the failed or unsettled cell this one measured again, in its round
    "analyzed",  # counted in its group's figures and the comparisons (ok, settled, not measured again)
    "unsettled_reason",
    "started_at",
    "ended_at",
    "preload",
    "build_name",  # the [builds] entry the server binary came from; missing: the installed server
    "pss_end_bytes",
    "pss_peak_bytes",
    "idle_cpu_cores",
    "design",  # "interleaved", or missing: the sequential design
    "design_group",  # the ids of the cells that ran at once
    "design_turn",
    "design_slice_s",
    "design_active_s",
    "design_latency_spanned",
)
COMPARISON_EXTRAS = ("evidence",)  # faster/slower: [{metric, ...}] beyond noise (analyze/evidence.py)
GROUP_COLUMNS = _words(
    """variant threads baseline ratio repeats failed unsettled measured_again stalls qps_mean qps_ci_low qps_ci_high
    qps_cv p95_ms_mean p95_ms_ci_low p95_ms_ci_high rss_end_bytes_mean rss_peak_bytes_mean pss_end_bytes_mean memory
    cells"""
)

_CELL_COLUMNS = (*views.CELL_COLUMNS, *CELL_EXTRAS)
_COMPARISON_COLUMNS = (*csv_export.COMPARISON_COLUMNS, *COMPARISON_EXTRAS)
# an axis named like any column of any frame gets axis_<name>, in every frame alike
_RESERVED = (*_CELL_COLUMNS, *views.SECOND_COLUMNS, *_COMPARISON_COLUMNS, *GROUP_COLUMNS)
# Each column's dtype, whatever the data: text "string", whole numbers "Int64", flags "boolean", lists
# object, times datetime64 UTC, everything else float64 (NaN: missing). Axis columns are text.
_TEXT = _words(
    """variant status error allocator_library allocator_version warmup_method key unsettled_reason preload build_name
    design kind metric axis baseline verdict method method_reason adjustment reason explanation memory aa_check"""
)
_INTS = _words(
    """id order threads repeat stalls retry_of design_turn cell_id rounds_needed pairs family n_baseline n_variant
    repeats failed unsettled measured_again"""
)
_FLAGS = {"settled", "analyzed", "warmup", "adjusted", "across_hosts"}
_LISTS = {"design_group", "evidence", "cells"}
_TIMES = {"started_at", "ended_at"}


@dataclass(frozen=True, eq=False)
class Run:
    """A run's results: `meta` (a dict) and the frames of FRAMES, all of one results `format`."""

    format: str
    meta: dict[str, Any]
    cells: pd.DataFrame
    seconds: pd.DataFrame
    comparisons: pd.DataFrame
    groups: pd.DataFrame
    axes: dict[str, str]  # axis -> its column in every frame: its own name, or axis_<name> (docs/api.md)
    directory: Path | None = None  # None: read from an export

    @property
    def format_version(self) -> int:
        """The N of "perflab-results/N"."""
        return int(self.format.rsplit("/", 1)[1])

    def __repr__(self) -> str:
        where = str(self.directory) if self.directory is not None else "an export"
        return f"<perflab.api.Run {where}: {self.format}, {len(self.cells)} cells, {len(self.comparisons)} comparisons>"


def open(directory: str | os.PathLike[str]) -> Run:  # perflab.open; the builtin is not used here
    """The results directory `perflab run -o` wrote, read as `perflab export` reads it (an older
    results schema is upgraded in place, and the SQL views refreshed, as by every verb)."""
    path = Path(directory)
    with Results(path) as results:
        return _frames(export.document(results), path)


def from_export(document: dict[str, Any]) -> Run:
    """The same frames from the JSON `perflab export DIR` printed (parsed), of this FORMAT only."""
    found = document.get("format") if isinstance(document, dict) else None
    if found != FORMAT:
        raise ResultsFormatError(
            f"an export of format {found!r}: this perflab reads {FORMAT}",
            "export the results directory again with this perflab, or perflab.open() it",
        )
    return _frames(document, None)


def _frames(doc: dict[str, Any], directory: Path | None) -> Run:
    meta = {"format": doc["format"], **doc["run"]}
    meta.update((k, v) for k, v in doc.items() if k not in (*FRAMES, "format", "run"))
    axis_cols = csv_export.axis_columns(meta, doc["cells"], _RESERVED)
    analyzed = {cid for group in doc["groups"] for cid in group["cells"]}
    cells = [{**csv_export.cell_row(c, axis_cols), **_cell_extras(c, analyzed)} for c in doc["cells"]]
    seconds = (row for c in doc["cells"] for row in csv_export.second_rows(c, c["intervals"], axis_cols))
    comparisons = [csv_export.comparison_row(c, axis_cols) for c in doc["comparisons"]]
    groups = [{**g, **csv_export.variant_columns(g["variant"], axis_cols)} for g in doc["groups"]]
    return Run(
        format=doc["format"],
        meta=meta,
        cells=_frame(cells, _CELL_COLUMNS, axis_cols),
        seconds=_frame(seconds, views.SECOND_COLUMNS, axis_cols),
        comparisons=_frame(comparisons, _COMPARISON_COLUMNS, axis_cols),
        groups=_frame(groups, GROUP_COLUMNS, axis_cols, flags={"baseline"}),  # here: the baseline's group
        axes=axis_cols,
        directory=directory,
    )


def _cell_extras(cell: dict[str, Any], analyzed: set[int]) -> dict[str, Any]:
    design = cell.get("design") or {}
    resources = cell.get("resources") or {}
    return {
        "key": cell["key"],
        "retry_of": cell.get("retry_of"),
        "analyzed": cell["id"] in analyzed,
        "unsettled_reason": cell.get("unsettled_reason"),
        "started_at": cell.get("started_at"),
        "ended_at": cell.get("ended_at"),
        "preload": cell.get("preload"),
        "build_name": (cell.get("build") or {}).get("name"),
        **{k: resources.get(k) for k in ("pss_end_bytes", "pss_peak_bytes", "idle_cpu_cores")},
        "design": design.get("name"),
        **{f"design_{k}": design.get(k) for k in ("group", "turn", "slice_s", "active_s", "latency_spanned")},
    }


def _frame(
    rows: Iterable[dict[str, Any]], columns: Iterable[str], axis_cols: dict[str, str], flags: Iterable[str] = ()
) -> pd.DataFrame:
    """Rows as a frame of `columns` (the axis columns after `variant`), each of its fixed dtype
    (`flags`: this frame's boolean columns, beside _FLAGS)."""
    names = csv_export.with_axes(columns, axis_cols)
    frame = pd.DataFrame.from_records(list(rows), columns=names)
    for name in names:
        if name in _TIMES:
            frame[name] = pd.to_datetime(frame[name], utc=True, format="ISO8601")
        elif name not in _LISTS:
            frame[name] = frame[name].astype(_dtype(name, set(axis_cols.values()), {*flags, *_FLAGS}))
    return frame


def _dtype(name: str, axes: set[str], flags: set[str]) -> str:
    """A column's dtype: the same for every run, whatever its data (an all-missing column too)."""
    if name in flags:
        return "boolean"
    if name in _TEXT or name in axes:
        return "string"
    return "Int64" if name in _INTS else "float64"
