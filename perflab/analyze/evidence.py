"""The measured evidence beside a verdict: which per-transaction figures differ between two
variants beyond their noise, most different first.

Input: the cells of two groups (dicts as the store returns them; `resources` and, with
[observe] alloc, `alloc`). Per figure, the sample is one value per settled, successful repeat;
a difference counts when its 95% Welch interval over repeats excludes zero *and* it exceeds
`MIN_CHANGE` of the larger side (a 0.1% shift measured exactly is no explanation). Fewer than
two repeats on a side: nothing can be said, and nothing is.

Output: Evidence rows, the `evidence` list of `perflab compare --format json` rows:
    {"metric": "munmap_calls", "baseline": 0.0, "variant": 1.0, "delta": 1.0, "unit": "calls/txn"}
and `explain()`, one line of them, the mechanism first, e.g.
    "+1 mmap of 32 MiB and +1 munmap of 32 MiB per transaction, +64 minor faults per transaction"
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from perflab.analyze import stats
from perflab.analyze.status_diff import interesting
from perflab.units import format_bytes, size_class_label

MIN_CHANGE = 0.05
STATUS_PREFIX = "status:"  # the evidence metric of a SHOW GLOBAL STATUS counter
STATUS_IN_EXPLANATION = 2  # at most this many counters in the one-line explanation
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
    for name, value in ((cell.get("server_status") or {}).get("per_txn") or {}).items():
        if interesting(name):  # [observe] status: the server's own counters
            out[f"{STATUS_PREFIX}{name}"] = (value, "per txn")
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
                out[f"{op}_calls[{size_class_label(row['low'], row['high'])})"] = (value, "calls/txn")
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


def explain(evidence: list[Evidence] | list[dict[str, Any]], limit: int = 5) -> str:
    """One line, the mechanism first: the allocator's syscalls (with their mean size), then page
    faults, then the server's own counters ([observe] status, the two most different), then the
    allocation calls by size, bytes requested, CPU and switches; within each
    kind the most different first. Only figures in `evidence` (beyond noise) are named:
        "+0.994 mmap and +0.994 munmap of 32 MiB each per transaction, +63.7 minor faults per
         transaction, +1 malloc calls[32M-64M) per transaction, -1 malloc calls[1M-2M) ..."
    """
    rows = {e.metric: e for e in (Evidence(**e) if isinstance(e, dict) else e for e in evidence)}
    parts = []
    calls = [rows[f"{name}_calls"] for name in SYSCALLS if f"{name}_calls" in rows]
    if calls:
        words = []
        for e in calls:
            name = e.metric.removesuffix("_calls")
            size = rows.get(f"{name}_bytes")
            each = f" of {format_bytes(abs(size.variant / e.variant))}" if size and e.variant else ""
            words.append(f"{e.delta:+.3g} {name}{each}")
        parts.append(" and ".join(words) + " per transaction")
    kinds = (
        lambda m: m in ("minor_faults", "major_faults"),
        _status,
        _per_class,
        lambda m: m == "bytes_requested",
        lambda m: m.endswith("_calls") and m.removesuffix("_calls") not in SYSCALLS,
        lambda m: m in ("server_cpu", "context_switches"),
    )
    for kind in kinds:
        chosen = [e for e in rows.values() if kind(e.metric)]
        for e in chosen[:STATUS_IN_EXPLANATION] if kind is _status else chosen:
            name = e.metric.replace("_", " ")
            if kind is _status:  # the server's own name, as SHOW GLOBAL STATUS spells it
                value = f"{e.delta:+.3g} {e.metric.removeprefix(STATUS_PREFIX)}"
            elif e.unit == "bytes/txn":
                value = f"{'+' if e.delta >= 0 else '-'}{format_bytes(abs(e.delta))} {name}"
            elif e.unit == "cpu-us/txn":
                value = f"{e.delta:+.3g} µs of server CPU"
            else:
                value = f"{e.delta:+.3g} {name}"
            parts.append(f"{value} per transaction")
    return ", ".join(parts[:limit])


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


def _status(metric: str) -> bool:
    return metric.startswith(STATUS_PREFIX)


def _per_class(metric: str) -> bool:
    return metric.endswith(")")


def beyond_noise(delta: float, noise: float | None, a: float, b: float) -> bool:
    """A difference that counts: outside its noise floor, and more than MIN_CHANGE of the larger side."""
    return noise is not None and abs(delta) > noise and abs(delta) > MIN_CHANGE * max(abs(a), abs(b))


def _difference(xs: list[float], ys: list[float], level: float) -> tuple[float, float] | None:
    noise = stats.welch_half_width(xs, ys, level)
    delta = statistics.fmean(ys) - statistics.fmean(xs) if xs and ys else 0.0
    if noise is None or not beyond_noise(delta, noise, statistics.fmean(xs), statistics.fmean(ys)):
        return None
    return delta, noise
