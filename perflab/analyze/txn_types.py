"""TPC-C's five transaction types, per variant and thread count, for the reports (tool = "go-tpc").

Input: the settled cells of each group (analyze/summary.py), whose `summary.transaction_types`
holds, per type, the measured window's rate and latency (workloads/gotpc.py). Output: per group,
one row per type in TPC-C's order, each figure the mean over the group's settled cells (the
mean of their percentiles, as the tables' p95 column is):

    for group, rows in by_group(groups):      # [] for cells of another tool
        rows[0] -> TypeRow("NEW_ORDER", per_minute=1520.4, avg_ms=2.1, p95_ms=3.7, ..., errors=0.0)

The verdicts compare NOPM only; these rows show where the time of each kind of transaction went
(a payment that waits on a warehouse row, a stock-level scan that grows with the buffer pool).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perflab.analyze.summary import Group

ORDER = ("NEW_ORDER", "PAYMENT", "ORDER_STATUS", "DELIVERY", "STOCK_LEVEL")  # TPC-C's, by share of the mix
FIGURES = ("per_minute", "avg_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms", "errors")


@dataclass(frozen=True)
class TypeRow:
    """One transaction type of a group: its means over the settled cells (None: none had it)."""

    name: str
    per_minute: float | None
    avg_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    errors: float | None  # failed transactions of this type per cell's window


def _mean(values: list[Any]) -> float | None:
    found = [float(v) for v in values if v is not None]
    return sum(found) / len(found) if found else None


def rows_of(cells: list[dict[str, Any]]) -> list[TypeRow]:
    """The types the cells' summaries hold, TPC-C's five first; [] when none holds any."""
    per_cell = [(c.get("summary") or {}).get("transaction_types") or {} for c in cells]
    names = {name for types in per_cell for name in types}
    ordered = [n for n in ORDER if n in names] + sorted(names - set(ORDER))
    return [
        TypeRow(name, *(_mean([types.get(name, {}).get(f) for types in per_cell if name in types]) for f in FIGURES))
        for name in ordered
    ]


def by_group(groups: list[Group]) -> list[tuple[Group, list[TypeRow]]]:
    """Each group with settled TPC-C cells, and its rows."""
    found = [(g, rows_of(g.cells)) for g in groups]
    return [(g, rows) for g, rows in found if rows]
