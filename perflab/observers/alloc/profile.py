"""[observe] alloc's figures and sampled stacks of a cell, as the window leaves them: `alloc` in the
row over the transactions its counts cover, and the sampled allocation stacks stored as a profile of
source "alloc" (folded, weighted in bytes requested, the leaf frame the call and its size class), of
a server here or on its host (alloc_fields) or of an interleaved group's seats (observers/seats.py).

    alloc_fields(results, cell_id, tracer, pid, measured, covered)   # run/ends.ServerHere.observed
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from perflab.analyze.alloc import callers
from perflab.observers.alloc.tracer import AllocTracer
from perflab.observers.pmp import demangle
from perflab.observers.pmp_sampler import Symbolizer
from perflab.observers.profilers import TOP_N
from perflab.store import folded
from perflab.store.results import Results


def alloc_figures(tracer: AllocTracer, measured: dict[str, Any], covered: Any = None) -> float:
    """The cell's `alloc` into `measured`, over its summary's transactions or those its counts cover
    (`covered`: the window's transactions -> those over the counts' own span, accounting.share), with
    that share as `window_share`; returns those transactions (a server here or on its host)."""
    whole = measured["summary"]["transactions"]
    transactions = covered(whole) if covered is not None else whole
    tracer.check_window(transactions)
    share = round(transactions / whole, 4) if whole else None
    measured["alloc"] = tracer.fields(transactions) | {"window_share": share}
    return transactions


def alloc_fields(
    results: Results, cell_id: int, tracer: AllocTracer, pid: int, measured: dict[str, Any], covered: Any = None
) -> None:
    """[observe] alloc of a server here: its figures (alloc_figures), its sampled stacks stored as a
    profile (store_alloc)."""
    transactions = alloc_figures(tracer, measured, covered)
    if tracer.spec.stacks:
        store_alloc(results, cell_id, transactions, tracer, pid)


def store_alloc(results: Results, cell_id: int, transactions: float, tracer: AllocTracer, pid: int) -> dict[str, Any]:
    """The sampled allocation stacks as a profile of source "alloc": folded, weighted in bytes
    requested, the leaf frame being the call and its size class (`malloc:32M-64M`); named from the
    server's maps where it runs (AllocTracer.naming: here, or a server host's)."""
    names, binary = tracer.naming(pid)
    names = names if names is not None else Symbolizer(pid)
    try:
        mangled = tracer.stacks(lambda pcs: _own_frames_dropped(names, pcs))
        dsos = dict(names.dsos)
    finally:
        names.close()
    readable = demangle(frame for stack in mangled for frame in stack.split(";"))
    stacks: Counter = Counter()
    for stack, size in mangled.items():
        stacks[";".join(readable.get(f, f) for f in stack.split(";"))] += size
    dsos = {readable.get(f, f): d for f, d in dsos.items()}
    by_function = callers(stacks)
    top = [
        {
            "function": f,
            "dso": dsos.get(f),
            "bytes": n,
            "bytes_per_txn": round(n / transactions, 1) if transactions else None,
        }
        for f, n in by_function.most_common(TOP_N)
    ]
    meta = {
        "source": "alloc",
        "window": "measured",
        "unit": "bytes",
        "period": tracer.spec.period,
        "seconds": round(tracer.seconds, 3),
        "transactions": transactions,
        "window_transactions": transactions,
        "pid": pid,
        "binary": binary,
        "dsos": dsos,
    }
    path = folded.write(folded.base(results.dir, cell_id, "alloc"), stacks, meta)
    row = {
        "cell_id": cell_id,
        "source": "alloc",
        "phase": "measured",
        "target": "server",
        "path": str(path.relative_to(results.dir)),
        "samples": len(tracer.records()[0]),
        "seconds": round(tracer.seconds, 3),
        "transactions": transactions,
        "window_transactions": transactions,
        "call_graph": "backtrace",
        "quality": None,
        "top": top,
    }
    results.commit_profile(row)
    return row


def _own_frames_dropped(names: Symbolizer, pcs: list[int]) -> list[str]:
    """Frame names root first (return addresses: the call is the byte before), the counter's own left out."""
    frames = [names.name(pc - 1) for pc in reversed(pcs)]
    return [f for f in frames if not names.dsos.get(f, "").startswith("perflab_alloc")]
