"""The measured evidence beside a verdict: which per-transaction figures differ between two
variants beyond their noise, most different first.

Input: the cells of two groups (dicts as the store returns them; `resources` and, with
[observe] alloc, `alloc`). Per figure, the sample is one value per settled, successful repeat;
a difference counts when its 95% Welch interval over repeats excludes zero *and* it exceeds
`MIN_CHANGE` of the larger side (a 0.1% shift measured exactly is no explanation). Fewer than
two repeats on a side: nothing can be said, and nothing is.

Output: Evidence rows, the `evidence` list of `perflab compare --format json` rows:
    {"metric": "munmap_calls", "baseline": 0.0, "variant": 1.0, "delta": 1.0, "unit": "calls/txn"}
and `explain()`, one line of the largest of them, e.g.
    "+1.0 mmap and +1.0 munmap calls (+32 MiB) per transaction, +64 minor faults per transaction"
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from perflab.analyze import stats

MIN_CHANGE = 0.05
SYSCALLS = ("mmap", "munmap", "mprotect", "madvise", "brk")
RESOURCES = (
    ("minor_faults", "minor_faults_per_txn", "faults/txn"),
    ("major_faults", "major_faults_per_txn", "faults/txn"),
    ("server_cpu", "server_cpu_us_per_txn", "cpu-us/txn"),
    ("context_switches", "ctx_switches_per_txn", "switches/txn"),
)


@dataclass
class Evidence:
    metric: str
    baseline: float
    variant: float
    delta: float
    unit: str
    noise: float  # half-width of the difference's 95% interval

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def figures(cell: dict[str, Any]) -> dict[str, tuple[float, str]]:
    """A cell's per-transaction figures: metric -> (value, unit)."""
    out: dict[str, tuple[float, str]] = {}
    resources = cell.get("resources") or {}
    for name, key, unit in RESOURCES:
        if resources.get(key) is not None:
            out[name] = (float(resources[key]), unit)
    alloc = cell.get("alloc")
    if alloc:
        for op, value in (alloc.get("calls_per_txn") or {}).items():
            out[f"{op}_calls"] = (value, "calls/txn")
        if alloc.get("bytes_per_txn") is not None:
            out["bytes_requested"] = (alloc["bytes_per_txn"], "bytes/txn")
        for name, value in (alloc.get("syscalls_per_txn") or {}).items():
            out[f"{name}_calls"] = (value, "calls/txn")
        for name, value in (alloc.get("syscall_bytes_per_txn") or {}).items():
            out[f"{name}_bytes"] = (value, "bytes/txn")
        for row in alloc.get("by_size_class") or []:
            for op, value in row["calls_per_txn"].items():
                out[f"{op}_calls[{_size(row['low'])}-{_size(row['high'])})"] = (value, "calls/txn")
    return out


def compare(base_cells: list[dict[str, Any]], cells: list[dict[str, Any]], level: float = 0.95) -> list[Evidence]:
    """Figures that differ beyond noise between two groups' repeats, most different first."""
    a, b = samples(base_cells), samples(cells)
    out = []
    for metric in sorted(set(a) | set(b)):
        if metric not in a or metric not in b:
            if not _per_class(metric) or "bytes_requested" not in a or "bytes_requested" not in b:
                continue  # a figure one side did not measure
            traced = a if metric not in a else b  # a size class this side never used: zero calls
            traced[metric] = ([0.0] * len(traced["bytes_requested"][0]), "calls/txn")
        (xs, unit), (ys, _) = a[metric], b[metric]
        found = _difference(xs, ys, level)
        if found is not None:
            delta, noise = found
            out.append(Evidence(metric, statistics.fmean(xs), statistics.fmean(ys), delta, unit, noise))
    return sorted(out, key=lambda e: abs(e.delta) / max(e.noise, 1e-12 * abs(e.delta)), reverse=True)


def explain(evidence: list[Evidence] | list[dict[str, Any]], limit: int = 4) -> str:
    """One line of the largest differences, in the words of the figures."""
    parts = []
    for e in [Evidence(**e) if isinstance(e, dict) else e for e in evidence][:limit]:
        name = e.metric.replace("_", " ")
        value = _bytes(e.delta) if e.unit == "bytes/txn" else f"{e.delta:+.3g}"
        parts.append(f"{value} {name} per transaction")
    return ", ".join(parts)


def samples(cells: list[dict[str, Any]]) -> dict[str, tuple[list[float], str]]:
    """metric -> (one value per settled, successful repeat, unit). A size class that a traced
    repeat never used is zero calls in it, not a missing value."""
    usable = [c for c in cells if c.get("status") == "ok" and c.get("settled") not in (False, 0)]
    out: dict[str, tuple[list[float], str]] = {}
    for i, cell in enumerate(usable):
        for metric, (value, unit) in figures(cell).items():
            values = out.setdefault(metric, ([0.0] * i if _per_class(metric) else [], unit))[0]
            values.append(value)
        for metric, (values, _) in out.items():
            if _per_class(metric) and len(values) == i:
                values.append(0.0)
    return out


def _per_class(metric: str) -> bool:
    return metric.endswith(")")


def _difference(xs: list[float], ys: list[float], level: float) -> tuple[float, float] | None:
    if len(xs) < 2 or len(ys) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    vx, vy = statistics.variance(xs) / len(xs), statistics.variance(ys) / len(ys)
    se = math.sqrt(vx + vy)
    delta = my - mx
    if abs(delta) <= MIN_CHANGE * max(abs(mx), abs(my)):
        return None
    if se == 0:
        return delta, 0.0
    df = (vx + vy) ** 2 / ((vx**2 / (len(xs) - 1) if vx else 0) + (vy**2 / (len(ys) - 1) if vy else 0))
    half = stats.t_quantile(0.5 + level / 2, df) * se
    return (delta, half) if abs(delta) > half else None


def _size(value: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if value >= 1 << shift and value % (1 << shift) == 0:
            return f"{value >> shift}{unit}"
    return str(value)


def _bytes(value: float) -> str:
    sign = "+" if value >= 0 else "-"
    value = abs(value)
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if value >= 1 << shift:
            return f"{sign}{value / (1 << shift):.3g} {unit}"
    return f"{sign}{value:.3g} bytes"
