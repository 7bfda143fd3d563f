"""Terminal report: one table per thread count, variants as rows.

Columns: steady-state QPS mean, min-max over repeats, CV, ratio to the baseline (the first
variant), p95 latency, RSS at the end of the window, minor faults and server CPU per
transaction (the usual explanation of an allocator difference).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from perflab.analyze.summary import Group, groups, mean
from perflab.units import format_bytes, format_duration

NOISY_CV = 0.03


def _num(value: float | None, fmt: str = "{:,.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def render(console: Console, meta: dict[str, Any], cells: list[dict[str, Any]]) -> None:
    exp = meta.get("experiment", {})
    host = meta.get("host", {})
    console.print(
        f"[bold]{exp.get('name', '?')}[/]  {exp.get('workload', {}).get('test', '')}  "
        f"{len(cells)} cells  measured {format_duration(exp.get('duration', 0))} "
        f"after {format_duration(exp.get('warmup', 0))} warm-up  pin={exp.get('pin')}"
    )
    console.print(f"[dim]{host.get('mariadbd')} | {host.get('sysbench')} | {host.get('cpu_model')} x{host.get('cores')}[/]")
    all_groups = groups(cells)
    for threads in sorted({g.threads for g in all_groups}):
        console.print(_table(threads, [g for g in all_groups if g.threads == threads]))
    _warnings(console, all_groups, cells)


def _table(threads: int, rows: list[Group]) -> Table:
    table = Table(title=f"threads = {threads}", title_justify="left", header_style="bold")
    axes = " × ".join(rows[0].variant) if rows and rows[0].variant else "variant"
    for name, justify in (
        (axes, "left"), ("n", "right"), ("QPS mean", "right"), ("min-max", "right"), ("CV", "right"),
        ("ratio", "right"), ("p95 ms", "right"), ("RSS end", "right"), ("minflt/txn", "right"),
        ("CPU µs/txn", "right"),
    ):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for g in rows:
        spread = f"{min(g.qps):,.0f}-{max(g.qps):,.0f}" if g.qps else "-"
        ratio = "baseline" if g.baseline else _num(g.ratio, "{:.3f}")
        n = f"{len(g.qps)}" + (f" [red]+{g.failed} failed[/]" if g.failed else "")
        table.add_row(
            ", ".join(g.variant.values()) or "default", n, _num(g.qps_mean), spread, _num(g.qps_cv and g.qps_cv * 100, "{:.1f}%"), ratio,
            _num(mean(g.p95_ms), "{:.2f}"), format_bytes(mean(g.rss_end)) if g.rss_end else "-",
            _num(mean(g.faults_per_txn), "{:.2f}"), _num(mean(g.cpu_us_per_txn), "{:.0f}"),
        )  # fmt: skip
    return table


def _warnings(console: Console, all_groups: list[Group], cells: list[dict[str, Any]]) -> None:
    for g in all_groups:
        if g.qps_cv is not None and g.qps_cv > NOISY_CV:
            console.print(
                f"[yellow]warning:[/] {escape(g.label)} at {g.threads} threads varies {g.qps_cv:.1%} across repeats; "
                "differences smaller than that are noise (remedy: longer duration, more repeats)"
            )
    for cell in cells:
        if cell["status"] != "ok":
            first = (cell["error"] or "").strip().splitlines()
            console.print(escape(f"failed: cell {cell['id']} {cell['key']}: {first[0] if first else '?'}"), style="red")
