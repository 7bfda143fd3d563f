"""The analysis of a run at a fixed arrival rate (workloads/rate.py): its verdicts compare latency
at equal load, and a cell that did not keep its rate is left out, never averaged in.

At a fixed rate every cell that keeps it does the same transactions a second, so QPS says
nothing; what differs is how long each transaction waits and runs. The verdicts' default metric
is then p99 from each transaction's intended start (`latency_from` in the cell's `summary.rate`:
"intended" for sysbench and pgbench at a rate). A cell whose `summary.rate.kept` is false (its
achieved rate fell short of the target, its backlog grew, or sysbench's event queue filled up)
measured a different load: its latency is that of an overload, not of the rate.

    primary_metric(meta)                 -> "p99" (a fixed-rate run) or "qps"
    missed(cell)                         -> "achieved 812/s, below the target 1,500/s by more than 5%"
    curve(groups, "rate")                -> {variant label: [(achieved, p99 ms, target), ...]}

With a rate axis ([variants.rate]) a variant is compared with the baseline at its own rate: the
baseline variant's other labels, the rate label held (summary.groups, compare.within).
"""

from __future__ import annotations

import statistics
from typing import Any

P99 = "p99"


def rates(meta: dict[str, Any]) -> list[int]:
    """The run's target rates ([] for a closed loop): `experiment.rates` (the file's [workload] rate
    and its variants' rates), else the workload's own rate."""
    exp = meta.get("experiment") or {}
    found = exp.get("rates")
    if found is None:
        one = (exp.get("workload") or {}).get("rate")
        found = [one] if one else []
    return [int(r) for r in found]


def fixed_rate(meta: dict[str, Any]) -> bool:
    return bool(rates(meta))


def primary_metric(meta: dict[str, Any]) -> str:
    """The verdicts' metric: p99 from the intended start at a fixed rate, else QPS."""
    return P99 if fixed_rate(meta) else "qps"


def metrics(meta: dict[str, Any]) -> tuple[str, ...]:
    """Every metric a run's verdicts are computed for, its primary one first."""
    return (P99, "p95", "qps") if fixed_rate(meta) else ("qps", "p95")


def missed(cell: dict[str, Any]) -> str | None:
    """Why `cell` did not keep its rate (None: it did, or it ran without one)."""
    record = (cell.get("summary") or {}).get("rate") or {}
    if record.get("kept") is False:
        return str(record.get("reason") or "the rate was not kept")
    return None


def latency_from(cells: list[dict[str, Any]]) -> str | None:
    """Where the run's latency counts from at its rate ("intended"), as its cells' records say."""
    found = {str(f) for c in cells if (f := ((c.get("summary") or {}).get("rate") or {}).get("latency_from"))}
    return ", ".join(sorted(found)) if found else None


def curve(groups: list[Any], axis: str) -> dict[str, list[tuple[float, float, int]]]:
    """Per variant (its labels but `axis`'s, the rate axis) and thread count: (achieved rate mean,
    p99 mean, target) at each rate its cells kept, by ascending target: a latency-throughput curve."""
    out: dict[str, list[tuple[float, float, int]]] = {}
    for g in groups:
        targets = [((c.get("summary") or {}).get("rate") or {}).get("target") for c in g.cells]
        first = targets[0] if targets else None
        if not g.p99_ms or not g.tps or first is None or None in targets:
            continue
        point = (statistics.fmean(g.tps), statistics.fmean(g.p99_ms), int(first))
        out.setdefault(curve_key(g, axis), []).append(point)
    return {k: sorted(v, key=lambda p: p[2]) for k, v in out.items()}


def curve_key(group: Any, axis: str) -> str:
    """A curve's name: the group's labels but the rate axis's, and its thread count."""
    rest = ", ".join(f"{a}={lbl}" for a, lbl in group.variant.items() if a != axis) or "all"
    return f"{rest} · {group.threads} threads"


def rate_axis(axes: dict[str, list[str]], cells: list[dict[str, Any]]) -> str | None:
    """The axis whose labels set different rates (a latency-throughput curve; its label is held
    equal between a variant and its baseline: equal load), or None."""
    for axis in axes:
        by_label: dict[str, set] = {}
        for c in cells:
            target = ((c.get("summary") or {}).get("rate") or {}).get("target")
            by_label.setdefault(c["variant"].get(axis), set()).add(target)
        if len(by_label) > 1 and all(len(t) == 1 and None not in t for t in by_label.values()):
            if len({next(iter(t)) for t in by_label.values()}) == len(by_label):
                return axis
    return None


def rate_line(meta: dict[str, Any], cells: list[dict[str, Any]]) -> str:
    """One line under a fixed-rate run's tables: what its verdicts compare, and what was left out."""
    targets = ", ".join(f"{r:,}" for r in rates(meta))
    out = [f"at a fixed rate ({targets} transactions a second): verdicts on p99 latency"]
    origin = latency_from(cells)
    out[0] += f" from each transaction's {origin} start" if origin == "intended" else f" ({origin or 'not recorded'})"
    out.append("QPS is the rate achieved")
    missing = [c for c in cells if c.get("status") == "ok" and missed(c)]
    if missing:
        out.append(f"{len(missing)} cell(s) did not keep the rate and are left out ({missed(missing[0])})")
    return "; ".join(out)
