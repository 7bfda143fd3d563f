"""The report's table of server counters: what differs most per transaction, with the ratio."""

from __future__ import annotations

from perflab.analyze import status_diff


def cells(per_txn: dict[str, float], n: int = 2) -> list[dict]:
    return [{"status": "ok", "server_status": {"per_txn": per_txn}} for _ in range(n)]


def test_largest_relative_differences_first_small_and_foreign_counters_left_out() -> None:
    base = cells({"Handler_read_next": 100.0, "Sort_rows": 10.0, "Created_tmp_disk_tables": 0.0,
                  "Bytes_sent": 1000.0, "Handler_read_key": 2.0, "Select_scan": 0.001})  # fmt: skip
    other = cells({"Handler_read_next": 200.0, "Sort_rows": 10.2, "Created_tmp_disk_tables": 1.0,
                   "Bytes_sent": 9000.0, "Handler_read_key": 2.0, "Select_scan": 0.004})  # fmt: skip
    rows = status_diff.differences(base, other)
    assert [r["counter"] for r in rows] == ["Created_tmp_disk_tables", "Handler_read_next"]
    assert rows[0]["ratio"] is None and rows[0]["delta"] == 1.0  # from nothing: no ratio
    assert rows[1]["ratio"] == 2.0
