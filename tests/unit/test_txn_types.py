"""The reports' TPC-C transaction types (analyze/txn_types.py): each type's rate and latency per
variant, from the window summaries that go-tpc's recorded outputs give (tests/data/gotpc/), in
the terminal, Markdown and HTML reports; nothing for another tool's cells."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from perflab.analyze import txn_types
from perflab.analyze.summary import Group
from perflab.report import markdown, text
from perflab.workloads import gotpc

DATA = Path(__file__).resolve().parents[1] / "data" / "gotpc"


def _cell(name: str, warmup: int) -> dict:
    summary, _ = gotpc.read_output(DATA / name, 0, warmup)
    return {"summary": summary.to_dict()}


def test_each_type_is_the_mean_of_the_cells_windows() -> None:
    cells = [_cell("run-pg-stamped.txt", 2), _cell("run-pg-stamped.txt", 4)]
    rows = txn_types.rows_of(cells)
    assert [r.name for r in rows] == list(txn_types.ORDER)  # TPC-C's order, not go-tpc's alphabetical one
    new_order = rows[0]
    nopm = [c["summary"]["qps"] for c in cells]
    assert new_order.per_minute == pytest.approx(sum(nopm) / 2)
    p95 = [c["summary"]["transaction_types"]["NEW_ORDER"]["p95_ms"] for c in cells]
    assert new_order.p95_ms == pytest.approx(sum(p95) / 2)
    assert all(r.avg_ms is None or r.avg_ms <= r.max_ms for r in rows)


def test_a_type_no_cell_saw_has_no_figures_and_other_tools_have_no_rows() -> None:
    cell = _cell("run-pg-stamped.txt", 2)
    cell["summary"]["transaction_types"]["DELIVERY"] = {"count": 0, "per_minute": 0.0, "errors": 0, "avg_ms": None,
                                                        "max_ms": None, "p50_ms": None, "p95_ms": None,
                                                        "p99_ms": None, "p999_ms": None}  # fmt: skip
    delivery = {r.name: r for r in txn_types.rows_of([cell])}["DELIVERY"]
    assert delivery.per_minute == 0.0 and delivery.p95_ms is None
    assert txn_types.rows_of([{"summary": {"qps": 100.0}}]) == []
    assert txn_types.by_group([Group({"a": "x"}, 2, cells=[{"summary": {"qps": 1.0}}])]) == []


def _groups() -> list[Group]:
    return [
        Group({"sb": "64MB"}, 4, cells=[_cell("run-pg-stamped.txt", 2)]),
        Group({"sb": "128MB"}, 4, cells=[_cell("run-stamped.txt", 2)]),
    ]


def test_the_terminal_report_prints_every_type_of_every_variant() -> None:
    console = Console(record=True, width=140)
    text._txn_types(console, _groups())
    printed = console.export_text()
    assert "TPC-C transaction types, threads = 4" in printed
    assert printed.count("STOCK_LEVEL") == 2 and "64MB" in printed and "128MB" in printed
    p99 = txn_types.rows_of(_groups()[0].cells)[1].p99_ms  # PAYMENT's
    assert f"{p99:.2f}" in printed


def test_markdown_has_the_section_and_nothing_without_go_tpc() -> None:
    found = txn_types.by_group(_groups())
    lines = markdown._txn_types(SimpleNamespace(transaction_types=lambda: found))
    assert lines[0] == "## TPC-C transaction types"
    rows = [ln for ln in lines if ln.startswith("| ") and "NEW_ORDER" in ln]
    assert len(rows) == 2 and "64MB" in rows[0]
    assert markdown._txn_types(SimpleNamespace(transaction_types=lambda: [])) == []
