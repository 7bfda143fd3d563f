"""The server's counters ([observe] status) that differ most between a variant and its
baseline, per transaction: what the server did differently, by its own account.

Input: the settled, successful cells of two groups (their `server_status.per_txn`). Output:
rows, most different first, e.g.
    {"counter": "Created_tmp_disk_tables", "baseline": 0.0, "variant": 1.0, "ratio": None, "delta": 1.0}
Only counters of the families a performance engineer reads (FAMILIES) and large enough to
matter (at least MIN_PER_TXN per transaction on one side, MIN_CHANGE apart) are kept; the
noise-aware selection for verdict explanations is analyze/evidence.py's.
"""

from __future__ import annotations

import statistics
from typing import Any

FAMILIES = (
    "Handler_",
    "Sort_",
    "Created_tmp_",
    "Innodb_buffer_pool_",
    "Select_",
    "Com_",
    "Innodb_rows_",
    "Rows_",
    "Innodb_data_",
    "Innodb_row_lock_",
    "Opened_",
    "Table_locks_",
    "Innodb_log_",
    "Innodb_pages_",
    "Key_",
)
MIN_PER_TXN = 0.01
MIN_CHANGE = 0.05


def interesting(counter: str) -> bool:
    return counter.startswith(FAMILIES)


def means(cells: list[dict[str, Any]]) -> dict[str, float]:
    """counter -> mean per transaction over the cells that have it."""
    values: dict[str, list[float]] = {}
    for cell in cells:
        for name, value in ((cell.get("server_status") or {}).get("per_txn") or {}).items():
            if interesting(name):
                values.setdefault(name, []).append(value)
    return {name: statistics.fmean(v) for name, v in values.items()}


def differences(base_cells: list[dict[str, Any]], cells: list[dict[str, Any]], limit: int = 8) -> list[dict[str, Any]]:
    """The counters that differ most (relative change, then size), at most `limit`."""
    a, b = means(base_cells), means(cells)
    rows: list[dict[str, Any]] = []
    for name in sorted(set(a) & set(b)):
        x, y = a[name], b[name]
        big = max(abs(x), abs(y))
        if big < MIN_PER_TXN or abs(y - x) < MIN_CHANGE * big:
            continue
        rows.append({"counter": name, "baseline": x, "variant": y, "ratio": y / x if x else None, "delta": y - x})
    rows.sort(
        key=lambda r: (abs(r["delta"]) / max(abs(r["baseline"]), abs(r["variant"])), abs(r["delta"])), reverse=True
    )
    return rows[:limit]


def by_group(groups: list[Any]) -> list[tuple[Any, list[dict[str, Any]]]]:
    """Per non-baseline group (analyze/summary.py), its counters that differ most from the
    baseline's at its thread count; [] without [observe] status. The reports' Server counters."""
    out = []
    for group in (g for g in groups if not g.baseline):
        base = next((g for g in groups if g.baseline and g.threads == group.threads), None)
        rows = differences(base.cells, group.cells) if base is not None else []
        if rows:
            out.append((group, rows))
    return out
