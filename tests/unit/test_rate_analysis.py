"""The analysis of a fixed-rate run (analyze/rate.py, workloads/rate.py): whether a window kept its
rate, verdicts on p99 at equal load, a cell that missed its rate left out and named, the
latency-throughput curve of a rate axis."""

from __future__ import annotations

import random
from typing import Any

from perflab.analyze import compare, rate, sequential, summary
from perflab.workloads import rate as wrate
from perflab.workloads.sysbench_output import Summary


def poisson_seconds(target: int, n: int, seed: int) -> list[tuple[int, float, float | None]]:
    """`n` seconds of a Poisson arrival count at `target` a second, backlog 0 (a rate kept)."""
    rng = random.Random(seed)
    out = []
    for t in range(n):
        count, clock = 0, rng.expovariate(target)
        while clock < 1.0:
            count, clock = count + 1, clock + rng.expovariate(target)
        out.append((t + 1, float(count), 0.0))
    return out


def test_a_kept_rate_is_rarely_called_missed() -> None:
    """Poisson noise alone: 300/s over a 4 s window, 500 windows: none called missed (4 sigma)."""
    missed = [s for s in range(500) if not wrate.judge(300, poisson_seconds(300, 4, s))[0]]
    assert missed == []


def test_a_shortfall_and_a_growing_backlog_are_missed() -> None:
    short = [(t, 1200.0, 0.0) for t in range(1, 6)]
    kept, why = wrate.judge(1500, short)
    assert not kept and "achieved 1,200/s, below the target 1,500/s" in str(why)
    backlog = [(t, 1500.0, 0.2 * t) for t in range(1, 11)]
    kept, why = wrate.judge(1500, backlog)
    assert not kept and "backlog grew to 2.0 s" in str(why)
    assert wrate.judge(1500, []) == (False, "no second of the window was measured")
    assert wrate.judge(1500, [(t, 1490.0, 0.001) for t in range(1, 6)]) == (True, None)


def test_the_record_lists_each_second_against_the_target() -> None:
    found = wrate.record(1000, [(3, 1000.0, 0.0), (4, 850.0, 0.4)], "intended", None, "why")
    assert found["target"] == 1000 and found["achieved"] == 925.0 and found["seconds_below"] == 1
    assert found["seconds"][1] == {"t": 4, "achieved": 850.0, "backlog_s": 0.4}
    assert found["latency_from"] == "intended" and found["note"] == "why"


def test_a_closed_loop_summary_keeps_its_shape() -> None:
    plain = Summary(1, 2, 1.0, 2.0, 0, 0.0, 0, 1.0, {"p99": 1.0})
    assert "rate" not in plain.to_dict()
    assert Summary(1, 2, 1.0, 2.0, 0, 0.0, 0, 1.0, {}, rate={"kept": True}).to_dict()["rate"] == {"kept": True}


def cell(i: int, alloc: str, repeat: int, p99: float, kept: bool = True, target: int = 1000) -> dict[str, Any]:
    record = {"target": target, "kept": kept, "latency_from": "intended", "reason": None if kept else "backlog"}
    return {
        "id": i,
        "variant": {"allocator": alloc},
        "threads": 2,
        "repeat": repeat,
        "status": "ok",
        "settled": True,
        "summary": {"qps": 1000.0, "tps": 1000.0, "latency_ms": {"p95": p99 / 2, "p99": p99}, "rate": record},
        "resources": {},
    }


META = {"experiment": {"axes": {"allocator": ["glibc", "jemalloc"]}, "rates": [1000], "workload": {"rate": 1000}}}


def test_fixed_rate_verdicts_are_on_p99_and_leave_out_a_missed_cell() -> None:
    cells = [cell(i, "glibc", i + 1, 2.0 + 0.01 * i) for i in range(4)]
    cells += [cell(10 + i, "jemalloc", i + 1, 4.0 + 0.01 * i) for i in range(4)]
    cells.append(cell(20, "jemalloc", 5, 400.0, kept=False))  # an overload: would swamp the mean
    found = compare.verdicts(META, cells)
    assert rate.primary_metric(META) == "p99" and found.comparisons[0].metric == "p99"
    row = next(c for c in found.comparisons if c.metric == "p99")
    assert row.verdict == "slower" and 1.9 < row.ratio < 2.1  # lower latency is better
    assert "1 cell(s) that did not keep the rate left out" in str(row.reason)
    jem = next(g for g in found.groups if g.variant == {"allocator": "jemalloc"})
    assert jem.rate_missed == [20] and len(jem.p99_ms) == 4
    assert "1 cell(s) did not keep the rate" in rate.rate_line(META, cells)


def test_a_closed_loop_run_keeps_qps_verdicts_and_every_cell() -> None:
    meta = {"experiment": {"axes": {"allocator": ["glibc", "jemalloc"]}, "rates": [], "workload": {"rate": None}}}
    cells = [cell(i, "glibc", i + 1, 2.0) for i in range(3)] + [cell(9, "jemalloc", 1, 2.0, kept=False)]
    assert rate.primary_metric(meta) == "qps" and rate.metrics(meta) == ("qps", "p95")
    groups = summary.groups(cells, axes=meta["experiment"]["axes"])  # paced, not asked: nothing left out
    assert all(not g.rate_missed for g in groups)
    old = {"experiment": {"axes": {}}}  # a run of an older perflab: no `rates`, no workload rate
    assert not rate.fixed_rate(old)


def test_a_rate_axis_draws_one_curve_per_variant() -> None:
    cells = []
    for i, (label, target, p99) in enumerate([("low", 500, 1.0), ("mid", 1000, 2.0), ("high", 2000, 9.0)]):
        for alloc in ("glibc", "jemalloc"):
            c = cell(i * 2 + (alloc == "jemalloc"), alloc, 1, p99 * (1.5 if alloc == "jemalloc" else 1), target=target)
            c["variant"] = {"rate": label, "allocator": alloc}
            c["summary"]["tps"] = target * 0.99
            cells.append(c)
    meta = {"experiment": {"axes": {"rate": ["low", "mid", "high"], "allocator": ["glibc", "jemalloc"]}}}
    assert rate.rate_axis(meta["experiment"]["axes"], cells) == "rate"
    assert rate.rate_axis({"allocator": ["glibc", "jemalloc"]}, cells) is None
    curves = rate.curve(summary.groups(cells, fixed_rate=True), "rate")
    assert list(curves) == ["allocator=glibc · 2 threads", "allocator=jemalloc · 2 threads"]
    assert [p[2] for p in curves["allocator=glibc · 2 threads"]] == [500, 1000, 2000]
    assert curves["allocator=jemalloc · 2 threads"][2][1] == 13.5
    meta["experiment"]["rates"] = [500, 1000, 2000]
    rows = [c for c in compare.verdicts(meta, cells).comparisons if c.kind == "variant" and c.metric == "p99"]
    assert {(c.variant["rate"], c.baseline["rate"], c.baseline["allocator"]) for c in rows} == {
        ("low", "low", "glibc"),
        ("mid", "mid", "glibc"),
        ("high", "high", "glibc"),
    }  # each allocator against the baseline at its own rate: equal load
    bases = [g for g in summary.groups(cells, {"rate": "low", "allocator": "glibc"}, meta["experiment"]["axes"],
                                        fixed_rate=True) if g.baseline]
    assert sorted(g.variant["rate"] for g in bases) == ["high", "low", "mid"]


def test_rounds_until_a_verdict_watch_p99_at_a_fixed_rate() -> None:
    """The sequential looks (analyze/sequential.py) of a fixed-rate run: jemalloc's p99 twice
    glibc's at equal QPS is `slower` there, and the run's verdict row is that look's."""
    cells = [cell(i, "glibc", i + 1, 2.0 + 0.01 * i) for i in range(4)]
    cells += [cell(10 + i, "jemalloc", i + 1, 4.0 + 0.02 * i) for i in range(4)]
    design = sequential.Design(max_rounds=10, min_rounds=3)
    axes = META["experiment"]["axes"]
    (watched,) = sequential.monitor(cells, {"allocator": "glibc"}, axes, design, 4, None, fixed_rate=True)
    assert watched.track.verdict == "slower" and watched.track.round == 3
    (closed,) = sequential.monitor(cells, {"allocator": "glibc"}, axes, design, 4, None)
    assert closed.track.verdict == "equivalent"  # QPS: 1000 everywhere
    adaptive = {"stop": sequential.STOP_VERDICT, "rounds": 4, "max_repeats": 10, "min_repeats": 3}
    meta = {**META, "adaptive": {**adaptive, **sequential.design_meta(design)}}
    row = next(c for c in compare.verdicts(meta, cells).comparisons if c.kind == "variant" and c.metric == "p99")
    assert row.verdict == "slower" and "sequential boundary" in str(row.reason)
