"""Comparisons across hosts (a host axis): their own Holm family, judged only after an A/A check
on each host (analyze/across_hosts.py), on synthetic runs whose hosts and effects are known."""

from __future__ import annotations

import math
import random

from perflab.analyze import compare
from perflab.report import csv_export
from perflab.report.phrases import method_line
from perflab.variants import variant_key

META = {"experiment": {"axes": {"host": ["a", "b"], "alloc": ["glibc", "jemalloc"]}}}
HOSTS = {"a": "db1", "b": "db2"}


def cell(i: int, variant: dict, repeat: int, qps: float) -> dict:
    host = HOSTS[variant["host"]]
    return {
        "id": i, "key": f"{variant_key(variant)}/t2/r{repeat}", "variant": variant, "threads": 2, "repeat": repeat,
        "status": "ok", "settled": True, "window_start_s": 5.0, "stalls": [],
        "summary": {"qps": qps, "tps": qps / 20, "latency_ms": {"p95": 1000 / qps}},
        "resources": {"rss_end_bytes": 100, "rss_peak_bytes": 120},
        "build": {"host": {"name": host}} if host else {},
    }  # fmt: skip


def run(rounds: int, host_b: float = 1.3, jemalloc: float = 1.1, drift_b: float = 0.0, seed: int = 1) -> list[dict]:
    """Rounds on two hosts (b `host_b` times a's speed), jemalloc `jemalloc` times glibc, 1% noise;
    `drift_b`: host b slows by that fraction per round (a host that is not stable)."""
    rng = random.Random(seed)
    cells = []
    for r in range(1, rounds + 1):
        for host, speed in (("a", 1.0), ("b", host_b * (1 - drift_b) ** r)):
            for alloc, factor in (("glibc", 1.0), ("jemalloc", jemalloc)):
                qps = 1000 * speed * factor * math.exp(rng.gauss(0, 0.01))
                cells.append(cell(len(cells), {"host": host, "alloc": alloc}, r, qps))
    return cells


def rows(cells: list[dict]) -> dict[tuple[str | None, str, str], compare.Comparison]:
    """Rows by (axis: None for a variant row, the variant's host, its allocator)."""
    found = compare.verdicts(META, cells, metrics=("qps",)).comparisons
    return {(c.axis, c.variant["host"], c.variant["alloc"]): c for c in found}


def test_stable_hosts_are_compared_in_a_family_of_their_own() -> None:
    found = rows(run(6))
    across = [k for k, c in found.items() if c.across_hosts]
    within = [found[k] for k in found if k not in across]
    # the variant rows of host b, and the host axis's rows (b against a, each allocator)
    assert set(across) == {
        (None, "b", "glibc"),
        (None, "b", "jemalloc"),
        ("host", "b", "glibc"),
        ("host", "b", "jemalloc"),
    }
    across = [found[k] for k in across]
    assert all(c.aa_check == "passed" for c in across) and all(c.aa_check is None for c in within)
    assert found[("host", "b", "glibc")].verdict == "faster" and found[("alloc", "b", "jemalloc")].verdict == "faster"
    assert found[(None, "b", "glibc")].family == 2 and found[(None, "a", "jemalloc")].family == 1
    assert found[("host", "b", "glibc")].family == 2 and found[("alloc", "a", "jemalloc")].family == 2
    assert "variant across-hosts comparisons of qps" in method_line(list(found.values()))


def test_a_host_that_drifts_fails_its_aa_check_and_its_comparisons_are_not_judged() -> None:
    found = rows(run(8, drift_b=0.03))
    row = found[(None, "b", "glibc")]
    assert row.across_hosts and row.verdict == "inconclusive" and row.family == 0
    assert "A/A check on host db2" in row.aa_check and "not stable enough" in row.aa_check
    assert row.aa_check in (row.reason or "")
    # within each host the allocator is still judged: the drift is shared within a round
    assert (
        found[("alloc", "b", "jemalloc")].verdict == "faster" and found[("alloc", "a", "jemalloc")].verdict == "faster"
    )
    assert found[("host", "b", "jemalloc")].verdict == "inconclusive"


def test_too_few_rounds_for_the_aa_check_say_how_many_it_needs() -> None:
    for rounds in (3, 5):  # three a half: no interval on fewer
        row = rows(run(rounds))[(None, "b", "glibc")]
        assert row.verdict == "inconclusive" and f"{rounds} settled round(s)" in row.aa_check and "it needs 6" in row.aa_check


def test_the_csv_has_the_new_columns() -> None:
    assert {"across_hosts", "aa_check"} <= set(csv_export.COMPARISON_COLUMNS)
    assert compare.verdicts(META, run(4), metrics=("qps",)).comparisons[0].to_dict().keys() >= {
        "across_hosts",
        "aa_check",
    }
