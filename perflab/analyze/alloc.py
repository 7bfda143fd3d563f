"""What a variant asks of its allocator, per transaction (`perflab alloc`), and how two
variants differ (`perflab alloc DIR A B`).

Input: the selected cells' `alloc` fields (observers/alloc/tracer.py) and their
allocation profiles (source "alloc": folded stacks weighted in bytes requested, the leaf frame
being the call and its size class). Output: rows of figures per transaction, the mean over the
selection's repeats; for a diff, each figure's difference with its noise floor (the half-width
of the difference's 95% Welch interval over repeats; None with fewer than 2 repeats a side)
and whether it lies beyond it.

    perflab alloc DIR allocator=glibc,sort_buffer=32M
    perflab alloc DIR sort_buffer=2M sort_buffer=32M
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from typing import Any

from perflab.analyze import evidence, stats
from perflab.analyze.profile_select import Selection
from perflab.store import folded
from perflab.store.results import Results
from perflab.units import size_text


def figures(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every per-transaction figure of the cells: metric, unit, mean over repeats, repeats."""
    samples = evidence.samples(cells)
    return [
        {"metric": metric, "unit": unit, "per_txn": statistics.fmean(values), "repeats": len(values)}
        for metric, (values, unit) in sorted(samples.items(), key=_order)
        if any(values)
    ]


def dropped_samples(cells: list[dict[str, Any]]) -> str | None:
    """A warning with its remedy when the shim's ring of sampled stacks filled in some cells
    (`dropped_samples` > 0): their allocation profiles miss the window's later allocations."""
    dropping = [c for c in cells if c.get("status") == "ok" and (c.get("alloc") or {}).get("dropped_samples")]
    if not dropping:
        return None
    worst = max(dropping, key=lambda c: c["alloc"]["dropped_samples"] / (c["alloc"]["samples"] or 1))
    kept, dropped, period = worst["alloc"]["samples"], worst["alloc"]["dropped_samples"], worst["alloc"]["period"]
    ids = ", ".join(str(c["id"]) for c in dropping[:10]) + ("..." if len(dropping) > 10 else "")
    advice = f', period = "{size_text(suggested_period(period, kept, dropped))}" (now {size_text(period)})'
    return (
        f"{len(dropping)} cell(s) dropped sampled allocation stacks, the ring being full (cells {ids}; worst: cell "
        f"{worst['id']} kept {kept:,} and dropped {dropped:,}): their allocation profiles leave out the window's "
        "later allocations and undercount bytes per transaction. Remedy: a larger period under [observe] alloc"
        + (advice if period else "")
        + f", or a larger ring, samples = {suggested_samples(kept, dropped)} (now {kept}; 408 bytes a record)"
    )


STARTED_MATTERS = 0.01  # a share of the window's calls below this moves no figure per transaction by more


def _started_matters(alloc: dict[str, Any]) -> bool:
    """Threads started within the window made at least STARTED_MATTERS of its calls (MySQL 9.7's two
    background threads: 0.008%; PostgreSQL's autovacuum worker in CI's 4 s window: about 40%)."""
    share = alloc.get("started_calls_share")
    return bool(alloc.get("threads_started")) and (share is None or share >= STARTED_MATTERS)


def started_cells(cells: list[dict[str, Any]]) -> tuple[int, ...]:
    """The ids of the cells whose started threads matter (_started_matters)."""
    return tuple(c["id"] for c in cells if c.get("status") == "ok" and _started_matters(c.get("alloc") or {}))


def started_in_window(cells: list[dict[str, Any]]) -> str | None:
    """A warning when threads or processes took their counter slot within some cells' windows and
    made at least 1% of their calls (`threads_started`, `started_calls_share`): their one-off
    allocations (and a forked process's frees of what its parent had allocated) are in those cells'
    figures per transaction, beside the transactions'."""
    ids = set(started_cells(cells))
    starting = [c for c in cells if c["id"] in ids]
    if not starting:
        return None
    most = max(starting, key=lambda c: (c["alloc"].get("started_calls_share") or 0, c["alloc"]["threads_started"]))
    share = most["alloc"].get("started_calls_share")  # absent before 2026-11-30's second change
    calls = f", {share:.1%} of its calls" if share is not None else ""
    named = ", ".join(str(c["id"]) for c in starting[:10]) + ("..." if len(starting) > 10 else "")
    return (
        f"{len(starting)} cell(s) had threads or processes start within the window (cells {named}; most: cell "
        f"{most['id']}, {most['alloc']['threads_started']}{calls}): their one-off allocations, and a forked process's "
        "frees of its parent's memory, are in those cells' figures per transaction (PostgreSQL: an autovacuum "
        'worker mallocs what it keeps and exits). Remedy: autovacuum = "off" under [server_options] to compare '
        "the backends alone, or connections opened before the window (a warm-up)"
    )


def suggested_samples(kept: int, dropped: int) -> int:
    """A ring (a power of two) that holds the same window's samples twice over; the ring was
    full, so `kept` is its size."""
    return min(1 << math.ceil(math.log2(max(2 * (kept + dropped), 1024))), 1 << 22)


def suggested_period(period: int, kept: int, dropped: int) -> int:
    """A sampling period (a power of two) at which the same window fits in half the ring."""
    wanted = period * 2 * (kept + dropped) / max(kept, 1)
    return min(1 << max(12, math.ceil(math.log2(wanted))), 1 << 34)


def functions(results: Results, sel: Selection) -> dict[str, list[float]]:
    """Bytes requested per transaction by allocating function (the caller of malloc, new, ...),
    one value per cell of the selection."""
    per_cell: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(sel.profiles))
    for i, row in enumerate(sel.profiles):
        path = results.dir / row["path"]
        stacks, txn = folded.read(path), folded.read_meta(path).get("transactions") or 0
        for stack, size in callers(stacks).items():
            per_cell[stack][i] = size / txn if txn else 0.0
    return dict(per_cell)


def top_functions(results: Results, sel: Selection, limit: int = 25) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"function": f, "bytes_per_txn": statistics.fmean(v)} for f, v in functions(results, sel).items()
    ]
    return sorted(rows, key=lambda r: -r["bytes_per_txn"])[:limit]


def diff_figures(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each figure of A and B with its difference and noise floor, the largest beyond noise first."""
    xa, xb = evidence.samples(a), evidence.samples(b)
    rows = []
    for metric in sorted(set(xa) | set(xb)):  # a stable order among equal ranks
        (va, unit), (vb, _) = xa.get(metric, ([0.0] * _repeats(a), "")), xb.get(metric, ([0.0] * _repeats(b), ""))
        rows.append(_diff_row(metric, unit or xb[metric][1], va, vb))
    return _ranked(rows)


def diff_functions(
    results: Results, sa: Selection, sb: Selection, limit: int = 25, results_b: Results | None = None
) -> list[dict[str, Any]]:
    """`sb` read from `results_b` when given (one variant in two runs: `perflab diff --against`)."""
    fa, fb = functions(results, sa), functions(results_b or results, sb)
    rows = [
        _diff_row(f, "bytes/txn", fa.get(f, [0.0] * len(sa.profiles)), fb.get(f, [0.0] * len(sb.profiles)))
        for f in sorted(set(fa) | set(fb))
    ]
    return _ranked(rows)[:limit]


def _diff_row(metric: str, unit: str, a: list[float], b: list[float]) -> dict[str, Any]:
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    noise = stats.welch_half_width(a, b)
    delta = mean_b - mean_a
    beyond = evidence.beyond_noise(delta, noise, mean_a, mean_b)
    return {
        "metric": metric,
        "unit": unit,
        "a": mean_a,
        "b": mean_b,
        "delta": delta,
        "noise": noise,
        "beyond_noise": beyond,
    }


def _ranked(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = [r for r in rows if r["a"] or r["b"]]
    return sorted(rows, key=lambda r: (not r["beyond_noise"], -abs(r["delta"]) / (abs(r["a"]) + abs(r["b"]) or 1)))


# The server's own allocation wrappers: the function that allocates is the one that calls them.
WRAPPERS = frozenset(
    {
        "my_malloc",
        "my_realloc",
        "my_multi_malloc",
        "my_multi_malloc_large",
        "my_strdup",
        "my_strndup",
        "my_memdup",
        "my_once_alloc",
        "operator new",
        "operator new[]",
    }
)


def callers(stacks: Counter) -> Counter:
    """Bytes by allocating function: the frame above the leaf (the call and its size class),
    past the server's allocation wrappers."""
    out: Counter = Counter()
    for stack, size in stacks.items():
        frames = stack.split(";")[:-1]
        while len(frames) > 1 and frames[-1] in WRAPPERS:
            frames.pop()
        out[frames[-1] if frames else stack] += size
    return out


def _repeats(cells: list[dict[str, Any]]) -> int:
    return sum(1 for c in cells if c.get("status") == "ok" and c.get("settled") not in (False, 0))


def _order(item: tuple[str, Any]) -> tuple[int, str, int]:
    """Resources and totals, then syscalls, then size classes by op and size."""
    metric = item[0]
    if metric.endswith(")"):
        name, _, bounds = metric.partition("[")
        low = bounds.split("-")[0]
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(low[-1:], 1)
        return 2, name, int(low.rstrip("KMG") or 0) * scale
    return (1 if metric.split("_")[0] in evidence.SYSCALLS else 0), metric, 0
