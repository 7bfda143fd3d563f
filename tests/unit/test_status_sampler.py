"""[observe] status: parsing a recorded batch of `mariadb --batch` output, and the window's
per-transaction rates and gauge means (the recording: tests/data/regen_status.py)."""

from __future__ import annotations

from pathlib import Path

from perflab.observers import status

BATCH = Path(__file__).resolve().parents[1] / "data" / "status" / "batch.txt"


def recorded() -> tuple[dict[str, float], set[str]]:
    lines = BATCH.read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[-1].startswith(status.END)  # the end marker closes the batch
    return status.parse(lines[:-1])


def test_a_recorded_batch_parses_to_numbers_with_gauges_told_apart():
    values, gauges = recorded()
    assert values["Handler_read_key"] >= 0 and values["Com_select"] >= 0
    assert "Innodb_buffer_pool_load_status" not in values  # a text, left out
    assert "Threads_running" in gauges and "Innodb_buffer_pool_pages_free" in gauges
    assert "Opened_tables" not in gauges and "Open_tables" in gauges  # Opened_* counts, Open_* is a level
    assert "Innodb_buffer_pool_pages_flushed" not in gauges  # a counter among the pool's gauges
    metrics = [name for name in values if name.startswith(status.METRICS_PREFIX)]
    assert len(metrics) > 20  # the enabled INNODB_METRICS rows, by their own type
    assert "INNODB_METRICS.buffer_pool_size" in gauges  # TYPE value
    assert "INNODB_METRICS.buffer_pool_reads" not in gauges  # TYPE status_counter


def test_counters_become_per_transaction_rates_and_gauges_window_means():
    samples = [
        (0.0, {"Handler_read_key": 100.0, "Created_tmp_disk_tables": 5.0, "Threads_running": 1.0}),
        (1.0, {"Handler_read_key": 1100.0, "Created_tmp_disk_tables": 5.0, "Threads_running": 3.0}),
        (2.0, {"Handler_read_key": 2100.0, "Created_tmp_disk_tables": 505.0, "Threads_running": 5.0}),
    ]
    figures = status.figures(samples, {"Threads_running"}, transactions=500)
    assert figures["per_txn"] == {"Created_tmp_disk_tables": 1.0, "Handler_read_key": 4.0}
    assert figures["gauges"] == {"Threads_running": 3.0}
    assert figures["samples"] == 3 and figures["transactions"] == 500


def test_the_server_counts_the_spans_transactions_and_gauges_skip_the_end():
    # a 3 s window, 2 queries per transaction; the sample at 3.05 s came after sysbench exited
    # (Questions: 2000 queries a second plus the sampler's 3 statements per sample)
    samples = [
        (0.0, {"Questions": 0.0, "Com_select": 0.0, "Threads_running": 3.0}),
        (1.0, {"Questions": 2003.0, "Com_select": 1000.0, "Threads_running": 3.0}),
        (2.0, {"Questions": 4006.0, "Com_select": 2000.0, "Threads_running": 3.0}),
        (3.05, {"Questions": 6109.0, "Com_select": 3050.0, "Threads_running": 1.0}),
    ]
    figures = status.figures(samples, {"Threads_running"}, transactions=3000, queries=6000, window_s=3.0)
    assert figures["transactions"] == 3050.0  # what the server saw, not sysbench's 3000
    assert figures["per_txn"]["Com_select"] == 1.0
    assert figures["gauges"] == {"Threads_running": 3.0}  # the idle server after the end is not the window
    assert figures["samples"] == 4


def test_too_few_samples_or_no_transactions_give_no_rates():
    one = [(0.0, {"Handler_read_key": 1.0})]
    assert status.figures(one, set(), 100)["per_txn"] == {}
    assert status.figures(one * 2, set(), 0)["per_txn"] == {}


def test_a_counter_missing_from_a_sample_is_left_out_not_guessed():
    samples = [(0.0, {"Handler_read_key": 1.0, "Innodb_x": 1.0}), (1.0, {"Handler_read_key": 3.0})]
    assert status.figures(samples, set(), 2)["per_txn"] == {"Handler_read_key": 1.0}
