"""Load at a fixed arrival rate (open loop): `[workload] rate = N`, or a variant's `rate` (a rate axis).

A closed loop sends each client's next transaction when the last one returns, so a slow second
sends fewer and its queueing is never seen (coordinated omission). At a fixed rate the client
schedules N transactions a second over all its threads, whatever the server does, and a
transaction's latency counts from its scheduled (intended) start. What each tool gives:

- sysbench 1.0.20 `--rate=N`: an event generator thread queues events at exponential intervals
  (mean 1/N s); a worker takes the next one when it is free, and the latency it records (its
  histogram, percentiles, min/avg/max) is the event's queue time plus its execution: from the
  intended start (sb_timer_stop adds the queue time). It does not report the service time alone.
  Each second's report is followed by `queue length: Q, concurrency: C`: Q events wait. Its queue
  holds 131,072 events; when it is full sysbench prints "FATAL: The event queue is full" and exits 1
  without a summary (the cell fails saying so: sysbench_output.overflow).
- pgbench 15 `--rate=N`: each client schedules its transactions (Poisson, N over all clients);
  the per-transaction log's `time` counts from the scheduled start, and a `schedule_lag` column
  (start - scheduled) follows: service time = time - schedule_lag. `--latency-limit=MS` skips a
  transaction already later than that when its turn comes ("skipped" in the log).
- go-tpc v1.0.12 has no rate control: its workers loop as fast as they can (`--wait` adds TPC-C's
  keying and think time, a closed loop still): refused (Workload.rate_refusal).

The per-second record (`summary.rate`, docs/results-format.md) and whether the cell kept its rate:

    record(1500, [(11, 1498.0, 0.0), ...], "intended", {...}, None)
    -> {"target": 1500, "achieved": 1497.3, "kept": True, "reason": None, "seconds": [...], ...}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from perflab.errors import Problem

if TYPE_CHECKING:
    from perflab.spec.schema import ExperimentFile
    from perflab.spec.matrix import Cell

INTENDED = "intended"  # latency from each transaction's scheduled start
# a second whose achieved rate is below this share of the target is counted in `seconds_below`
SECOND_SHARE = 0.9
# the window's achieved rate may fall short of the target by chance (a Poisson count): by up to
# this many standard deviations, and always by up to MIN_SHORTFALL, before the rate counts as missed
SIGMAS = 4.0
MIN_SHORTFALL = 0.05
BACKLOG_S = 1.0  # a backlog of more than this many seconds of arrivals at the window's end: missed
SYSBENCH_QUEUE = 131_072  # sysbench 1.0.20's MAX_QUEUE_LEN


def options(spec: ExperimentFile, cell: Cell) -> dict[str, Any]:
    """A cell's client options: the experiment's, the variant's over them, and its rate (`--rate`)."""
    rate = getattr(cell, "rate", None)
    return {**spec.workload.options, **cell.workload_options, **({"rate": rate} if rate else {})}


def rates(spec: ExperimentFile) -> list[int]:
    """The distinct arrival rates of the file's cells, ascending; [] for a closed loop."""
    found = [spec.workload.rate, *(v.rate for labels in spec.variants.values() for v in labels.values())]
    return sorted({r for r in found if r is not None})


def problems(spec: ExperimentFile, refusal: str | None) -> list[Problem]:
    """`rate` where the workload has no rate control (`refusal`: why), or beside a raw `rate` option."""
    where = ["workload.rate"] if spec.workload.rate is not None else []
    where += [f"variants.{a}.{lbl}.rate" for a, ls in spec.variants.items() for lbl, v in ls.items() if v.rate]
    if not where:
        return []
    if refusal:
        return [Problem(where[0], f"no rate with {spec.workload.tool}", "rate", refusal)]
    raw = ["workload.options.rate"] if "rate" in spec.workload.options else []
    raw += [
        f"variants.{a}.{lbl}.workload_options.rate"
        for a, ls in spec.variants.items()
        for lbl, v in ls.items()
        if "rate" in v.workload_options
    ]
    hint = "keep [workload] rate (or the variants' rate): perflab passes it as --rate and measures the open loop"
    return [Problem(key, f"no raw --rate option beside {where[0]}", "rate", hint) for key in raw]


def record(
    target: int,
    seconds: list[tuple[int, float, float | None]],
    latency_from: str,
    service_ms: Mapping[str, float | None] | None,
    note: str | None,
) -> dict[str, Any]:
    """The window's rate record: `seconds` are its (t, achieved per second, backlog in seconds of
    arrivals or None); `service_ms` the service time's percentiles where the tool gives them, else
    None with `note` saying why."""
    achieved = math.fsum(a for _, a, _ in seconds) / len(seconds) if seconds else 0.0
    kept, reason = judge(target, seconds)
    return {
        "target": target,
        "achieved": round(achieved, 2),
        "kept": kept,
        "reason": reason,
        "seconds_below": sum(1 for _, a, _ in seconds if a < SECOND_SHARE * target),
        "latency_from": latency_from,
        "service_latency_ms": service_ms,
        "note": note,
        "seconds": [{"t": t, "achieved": a, "backlog_s": b} for t, a, b in seconds],
    }


def judge(target: int, seconds: list[tuple[int, float, float | None]]) -> tuple[bool, str | None]:
    """Whether the window kept `target`: its mean rate short of the target by no more than chance
    allows, and no backlog of more than BACKLOG_S at its end. (A sysbench whose event queue filled
    up kept nothing: it exits at once without a summary, and its cell fails saying so.)"""
    if not seconds:
        return False, "no second of the window was measured"
    achieved = math.fsum(a for _, a, _ in seconds) / len(seconds)
    allowed = max(MIN_SHORTFALL, SIGMAS / math.sqrt(target * len(seconds)))
    if achieved < target * (1 - allowed):
        return False, f"achieved {achieved:,.0f}/s, below the target {target:,}/s by more than {allowed:.0%}"
    backlog = seconds[-1][2]
    if backlog is not None and backlog > BACKLOG_S:
        return False, f"its backlog grew to {backlog:.1f} s of arrivals by the window's end"
    return True, None
