"""Terminal tables of profiles and differential profiles, and their stack-quality notes.

Figures are per transaction: samples (and, from the sampling rate, microseconds of CPU for
perf or of thread wall time for pmp). A diff row shows A, B, the change and its noise
floor; a change within its noise floor is dimmed and marked `~`.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from perflab.units import format_bytes


def _num(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if abs(value) < 100 else f"{value:,.0f}"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def quality_notes(console: Console, qualities: list[dict[str, Any] | None]) -> None:
    """Each distinct note once, with the figures of the first profile that has it."""
    seen = set()
    for quality in qualities:
        if not quality:
            continue
        for note in quality.get("notes", []):
            key = note["problem"].split(":")[0]
            if key in seen:
                continue
            seen.add(key)
            console.print(f"[yellow]stack quality:[/] {escape(note['problem'])}", highlight=False, soft_wrap=True)
            console.print(f"  [cyan]remedy:[/] {escape(note['remedy'])}", highlight=False, soft_wrap=True)


def profile_table(console: Console, title: str, rows: list[dict[str, Any]], unit: str, per: str = "txn") -> None:
    """`per`: txn, or s (a stall's profile per second: the values are then per second)."""
    table = Table(title=title, title_justify="left", show_edge=False)
    for name in (
        "function",
        "dso",
        f"self/{per}",
        f"self {unit}/{per}",
        f"total/{per}",
        f"total {unit}/{per}",
        "self %",
        f"self/{per} min-max",
    ):
        table.add_column(name, justify="left" if name in ("function", "dso") else "right")
    for r in rows:
        table.add_row(
            escape(r["function"]),
            escape(r["dso"] or "?"),
            _num(r["self_per_txn"]),
            _us(r["self_us_per_txn"]),
            _num(r["total_per_txn"]),
            _us(r["total_us_per_txn"]),
            f"{r['self_pct']:.1f}",
            f"{_num(r['self_per_txn_min'])}-{_num(r['self_per_txn_max'])}",
        )
    console.print(table)


def diff_table(console: Console, title: str, rows: list[dict[str, Any]], by: str, unit: str, per: str = "txn") -> None:
    table = Table(title=title, title_justify="left", show_edge=False)
    for name in (
        "function",
        "dso",
        f"A {by}/{per}",
        f"B {by}/{per}",
        "change",
        "noise ±",
        f"change {unit}/{per}",
        "B/A self",
        "callers carrying the change",
    ):
        table.add_column(
            name, justify="left" if name in ("function", "dso", "callers carrying the change") else "right"
        )
    for r in rows:
        delta = r[f"delta_{by}_per_txn"]
        mark = "" if r["significant"] else "~"
        style = None if r["significant"] else "dim"
        callers = ", ".join(f"{c['caller']} {c['delta_total_per_txn']:+.4f}" for c in r["callers"])
        ratio = r.get("ratio_self")
        table.add_row(
            escape(r["function"]),
            escape(r["dso"] or "?"),
            _num(r[f"a_{by}_per_txn"]),
            _num(r[f"b_{by}_per_txn"]),
            f"{mark}{delta:+.4f}",
            _num(r[f"noise_{by}_per_txn"]),
            _us(r[f"delta_{by}_us_per_txn"]),
            "-" if ratio is None else f"{ratio:.2f}x",
            escape(callers),
            style=style,
        )
    console.print(table)


def _amount(value: float, unit: str) -> str:
    return format_bytes(value) if unit == "bytes/txn" else f"{value:,.4g}"


def alloc_table(console: Console, title: str, rows: list[dict[str, Any]], functions: list[dict[str, Any]]) -> None:
    """`perflab alloc`: every per-transaction figure, then the allocating functions by bytes."""
    table = Table(title=title, title_justify="left", show_edge=False)
    table.add_column("figure")
    table.add_column("per transaction", justify="right")
    table.add_column("unit")
    for row in rows:
        table.add_row(escape(row["metric"]), _amount(row["per_txn"], row["unit"]), row["unit"].removesuffix("/txn"))
    console.print(table)
    if functions:
        top = Table(
            title="allocating functions (sampled stacks), bytes requested", title_justify="left", show_edge=False
        )
        top.add_column("per transaction", justify="right")
        top.add_column("function")
        for row in functions:
            top.add_row(_amount(row["bytes_per_txn"], "bytes/txn"), escape(row["function"]))
        console.print(top)


def alloc_diff_table(console: Console, title: str, rows: list[dict[str, Any]], functions: list[dict[str, Any]]) -> None:
    """`perflab alloc DIR A B`: A, B, the change and its noise floor, per figure and per function."""
    for caption, items in ((title, rows), ("allocating functions (sampled stacks), bytes requested", functions)):
        if not items:
            continue
        table = Table(title=caption, title_justify="left", show_edge=False)
        for name in ("A", "B", "B - A", "noise floor"):
            table.add_column(name, justify="right")
        table.add_column("figure")
        for row in items:
            noise = "n/a" if row["noise"] is None else _amount(row["noise"], row["unit"])
            mark = "" if row["beyond_noise"] else "~ "
            table.add_row(
                _amount(row["a"], row["unit"]),
                _amount(row["b"], row["unit"]),
                mark + _amount(row["delta"], row["unit"]),
                noise,
                escape(row["metric"]),
            )
        console.print(table)
