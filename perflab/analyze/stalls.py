"""Stalls in one cell's per-second series: runs of seconds whose QPS is below a floor, and gaps in
the reports, merged into windows (analyze/steady.py sets the floor: a share of the window's median).

Input: `(t, qps)` pairs in order (t = seconds since the workload started). Output: `Stall`s; a gap
in sysbench's once-a-second reports (its reporter thread could not run) is a stall of unknown
depth (`min_qps` = 0, `kind` = "no-report").

    find_stalls([(1, 100.0), (2, 10.0), (3, 100.0)], floor=50.0)  -> [Stall(start_s=1, end_s=2, min_qps=10.0, kind="low")]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Stall:
    start_s: float  # first second of the stall (sysbench's t of the first low interval, minus 1)
    end_s: float  # last second of the stall
    min_qps: float
    kind: str = "low"  # low | no-report

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_stalls(series: list[tuple[float, float]], floor: float) -> list[Stall]:
    """Runs of seconds below `floor`, and gaps in the reports, as stall windows."""
    stalls: list[Stall] = []
    current: Stall | None = None
    previous_t: float | None = None
    for t, qps in series:
        if previous_t is not None and t - previous_t > 1.5:  # seconds without a report
            if current is not None:
                stalls.append(current)
                current = None
            stalls.append(Stall(previous_t, t - 1, 0.0, "no-report"))
        if qps < floor:
            if current is None:
                current = Stall(t - 1, t, qps)
            else:
                current.end_s, current.min_qps = t, min(current.min_qps, qps)
        elif current is not None:
            stalls.append(current)
            current = None
        previous_t = t
    if current is not None:
        stalls.append(current)
    return _merge(stalls)


def _merge(stalls: list[Stall]) -> list[Stall]:
    """One window for touching stalls (a gap in the reports followed by low seconds)."""
    out: list[Stall] = []
    for stall in stalls:
        if out and stall.start_s <= out[-1].end_s:
            last = out[-1]
            last.end_s = max(last.end_s, stall.end_s)
            last.min_qps = min(last.min_qps, stall.min_qps)
            last.kind = "no-report" if "no-report" in (last.kind, stall.kind) else "low"
        else:
            out.append(stall)
    return out
