"""The evidence beside a verdict, on cells with known figures: what differs beyond noise,
most different first, nothing from noise or from too few repeats."""

from __future__ import annotations

import random

from perflab.analyze import evidence


def cell(faults: float, munmap: float, big: float, cpu: float, seed: int) -> dict:
    rng = random.Random(seed)
    jitter = lambda v: v * (1 + rng.gauss(0, 0.01))
    by_class = [{"class": 13, "low": 4096, "high": 8192, "calls_per_txn": {"malloc": jitter(7.0)}, "bytes_per_txn": 1}]
    if big:
        by_class.append(
            {
                "class": 26,
                "low": 1 << 25,
                "high": 1 << 26,
                "calls_per_txn": {"malloc": big},
                "bytes_per_txn": big * (1 << 25),
            }
        )
    zero = dict.fromkeys(evidence.SYSCALLS, 0.0)
    return {
        "status": "ok",
        "settled": True,
        "resources": {"minor_faults_per_txn": jitter(faults), "server_cpu_us_per_txn": jitter(cpu)},
        "alloc": {
            "calls_per_txn": {"malloc": jitter(8.0), "free": jitter(8.0)},
            "bytes_per_txn": jitter(2e6 + big * (1 << 25)),
            "syscalls_per_txn": {**zero, "mmap": munmap, "munmap": munmap},
            "syscall_bytes_per_txn": {**zero, "munmap": munmap * (1 << 25)},
            "by_size_class": by_class,
        },
    }


def test_the_mechanism_of_a_slower_variant_is_named() -> None:
    base = [cell(0.1, 0.0, 0.0, 500, s) for s in range(3)]
    slow = [cell(64, 1.0, 1.0, 700, s + 10) for s in range(3)]
    found = evidence.compare(base, slow)
    metrics = [e.metric for e in found]
    assert {"munmap_calls", "mmap_calls", "minor_faults", "munmap_bytes", "malloc_calls[32M-64M)"} <= set(metrics)
    assert "malloc_calls" not in metrics and "free_calls" not in metrics  # the same in both
    faults = next(e for e in found if e.metric == "minor_faults")
    assert round(faults.delta) == 64 and faults.unit == "faults/txn"
    line = evidence.explain(found)
    # the mechanism first: the syscalls with their size, then the faults, then the allocations
    assert line.startswith("+1 mmap and +1 munmap of 32.0 MiB per transaction, +63.9 minor faults per transaction")
    assert line.index("malloc calls[32M-64M)") > line.index("minor faults") and line.count(",") <= 4


def test_noise_is_no_evidence() -> None:
    base = [cell(10, 0.0, 0.0, 500, s) for s in range(5)]
    same = [cell(10, 0.0, 0.0, 500, s + 100) for s in range(5)]
    assert evidence.compare(base, same) == []


def test_one_repeat_says_nothing() -> None:
    assert evidence.compare([cell(0.1, 0, 0, 500, 1)], [cell(64, 1, 1, 700, 2)]) == []


def test_unsettled_and_failed_repeats_are_left_out() -> None:
    base = [cell(0.1, 0.0, 0.0, 500, s) for s in range(2)]
    slow = [cell(64, 1.0, 1.0, 700, s) for s in range(2)] + [
        {"status": "failed"},
        {**cell(0, 0, 0, 1, 9), "settled": False},
    ]
    assert any(e.metric == "minor_faults" for e in evidence.compare(base, slow))


def status_cell(tmp_disk: float, handler: float, faults: float, seed: int) -> dict:
    rng = random.Random(seed)
    jitter = lambda v: v * (1 + rng.gauss(0, 0.01))
    per_txn = {
        "Created_tmp_disk_tables": tmp_disk,
        "Handler_read_next": jitter(handler),
        "Handler_read_key": jitter(2.0),  # the same on both sides
        "Bytes_sent": jitter(5000.0 + 1000 * tmp_disk),  # not a family the explanation reads
        "Com_select": jitter(1.0 + 0.1 * tmp_disk),
    }
    return {
        "status": "ok",
        "settled": True,
        "resources": {"minor_faults_per_txn": jitter(faults)},
        "server_status": {"per_txn": per_txn, "gauges": {"Threads_running": 2.0}},
    }


def test_the_servers_own_counters_explain_a_verdict_after_the_faults() -> None:
    base = [status_cell(0.0, 100.0, 1.0, s) for s in range(3)]
    slow = [status_cell(1.0, 200.0, 30.0, s + 10) for s in range(3)]
    found = evidence.compare(base, slow)
    metrics = {e.metric for e in found}
    assert {"status:Created_tmp_disk_tables", "status:Handler_read_next", "minor_faults"} <= metrics
    assert "status:Handler_read_key" not in metrics and "status:Bytes_sent" not in metrics
    line = evidence.explain(found)
    assert line.startswith("+28.") or line.startswith("+29")  # the faults first
    assert "+1 Created_tmp_disk_tables per transaction" in line and "Handler_read_next per transaction" in line
    assert "Com_select" not in line  # two counters at most: the line stays readable
    assert line.index("minor faults") < line.index("Created_tmp_disk_tables")
