"""Which cells' profiles a command means, and loading them as one merged profile.

A selector names a variant and optionally a thread count, as cell keys do:
    allocator=jemalloc            every axis listed must match (other axes: any label)
    jemalloc                      a bare label, if exactly one axis has it
    allocator=jemalloc,sort_buffer=2M/t4
`--cell ID` picks one cell. The repeats of the selection are merged (analyze/profile.py).
A selection is of one profiler (`source`), one process (`target`: server | client) and one
phase (measured | warmup | stall); per transaction, or per second (`per`: stalls have few
transactions, so the fair basis there is time).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from perflab.analyze.profile import Merged, Profile
from perflab.errors import UsageError
from perflab.store import folded
from perflab.store.results import Results


@dataclass
class Selection:
    label: str
    cells: list[dict[str, Any]]
    profiles: list[dict[str, Any]]  # rows of the profiles table, one per cell
    source: str
    target: str = "server"
    phase: str = "measured"

    @property
    def what(self) -> str:
        """`perf`, `pmp, client`, `perf, client, stall`: the profile's kind in a title."""
        return ", ".join([self.source] + [x for x in (self.target, self.phase) if x not in ("server", "measured")])

    @property
    def threads(self) -> set[int]:
        return {c["threads"] for c in self.cells}


def parse_selector(text: str, axes: dict[str, list[str]]) -> tuple[dict[str, str], int | None]:
    body, _, tpart = text.partition("/t")
    threads = None
    if tpart:
        if not tpart.isdigit():
            raise UsageError(f"selector {text!r}: '/t' must be followed by a thread count", "e.g. allocator=glibc/t4")
        threads = int(tpart)
    wanted: dict[str, str] = {}
    for part in filter(None, body.split(",")):
        if "=" in part:
            axis, _, label = part.partition("=")
            if axis not in axes:
                raise UsageError(f"selector {text!r}: no axis {axis!r}", f"axes: {', '.join(axes) or '(none)'}")
            if label not in axes[axis]:
                raise UsageError(
                    f"selector {text!r}: axis {axis} has no label {label!r}", f"labels: {', '.join(axes[axis])}"
                )
            wanted[axis] = label
        else:
            owners = [a for a, labels in axes.items() if part in labels]
            if len(owners) != 1:
                known = "; ".join(f"{a}: {', '.join(v)}" for a, v in axes.items()) or "(no axes: use --cell)"
                raise UsageError(f"selector {text!r}: label {part!r} is on {len(owners)} axes", f"variants: {known}")
            wanted[owners[0]] = part
    return wanted, threads


def select(
    results: Results,
    *,
    selector: str | None = None,
    cell_id: int | None = None,
    threads: int | None = None,
    source: str | None = None,
    target: str = "server",
    phase: str = "measured",
) -> Selection:
    profiles = results.profiles()
    if not profiles:
        raise UsageError(
            f"{results.dir}: no profiles stored",
            'add perf = { frequency = 99 } or pmp = { interval = "1s" } under [observe] and run again',
        )
    sources = sorted({p["source"] for p in profiles})
    source = source or ("perf" if "perf" in sources else sources[0])
    if source not in sources:
        raise UsageError(f"no {source} profiles in {results.dir}", f"available: {', '.join(sources)}")
    label, chosen = select_cells(results, selector=selector, cell_id=cell_id, threads=threads)
    mine = [p for p in profiles if p["source"] == source]
    by_cell = {p["cell_id"]: p for p in mine if p["target"] == target and p["phase"] == phase}
    picked = [c for c in chosen if c["id"] in by_cell]
    if not picked:
        ids = {c["id"] for c in chosen}
        have = sorted({f"--target {p['target']} --phase {p['phase']}" for p in mine if p["cell_id"] in ids})
        raise UsageError(
            f"{label}: no {source} profile of the {target} in phase {phase!r} stored for its cells",
            f"stored: {'; '.join(have)}" if have else "was [observe] set for this run?",
        )
    return Selection(label, picked, [by_cell[c["id"]] for c in picked], source, target, phase)


def select_cells(
    results: Results, *, selector: str | None = None, cell_id: int | None = None, threads: int | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """(label, the successful cells of one variant at one thread count) for a selector or a cell id."""
    stored = results.cells()
    replaced = {c.get("retry_of") for c in stored} - {None}  # a retry stands in for the cell it names
    cells = [c for c in stored if c["status"] == "ok"]
    if cell_id is not None:
        chosen = [c for c in cells if c["id"] == cell_id]
        if not chosen:
            raise UsageError(f"no successful cell {cell_id}", "see `perflab report` or `perflab export` for cell ids")
        return f"cell {cell_id}", chosen
    axes = results.meta().get("experiment", {}).get("axes", {})
    wanted, sel_threads = parse_selector(selector or "", axes)
    threads = threads if threads is not None else sel_threads
    chosen = [
        c for c in cells if c["id"] not in replaced and all(c["variant"].get(a) == lbl for a, lbl in wanted.items())
    ]
    if threads is not None:
        chosen = [c for c in chosen if c["threads"] == threads]
    counts = sorted({c["threads"] for c in chosen})
    if len(counts) > 1:
        raise UsageError(
            f"{selector or 'the selection'} matches cells at {counts} threads",
            f"add --threads N or /tN to the selector, e.g. {selector or ''}/t{counts[-1]}",
        )
    keys = {c["key"].split("/retry-of-")[0].rsplit("/", 2)[0] for c in chosen}  # VARIANT/tN/rN[/retry-of-ID]
    if len(keys) > 1:
        raise UsageError(
            f"{repr(selector) if selector else 'no selector'} matches several variants: {', '.join(sorted(keys))}",
            "name a label for every axis that varies, or use --cell",
        )
    label = (keys.pop() if keys else selector or "") + (f"/t{counts[0]}" if counts else "")
    if not chosen:
        raise UsageError(
            f"no successful cell matches {selector!r}" + (f" at {threads} threads" if threads else ""),
            "see `perflab report` for the variants and thread counts",
        )
    return label, chosen


def load(
    results: Results, sel: Selection, start: float | None = None, end: float | None = None, per: str = "transaction"
) -> tuple[Merged, Counter, float]:
    """The merged per-function profile, the summed stacks and the summed transactions (with
    per = "second": seconds, which then divide the counts instead). `start`/`end` (seconds since
    the profile's start) cut pmp profiles by time; the transactions are then the profile's
    scaled by the share of its span kept."""
    profiles = []
    summed: Counter = Counter()
    txn = 0.0
    if (start is not None or end is not None) and sel.source != "pmp":
        raise UsageError("only pmp profiles keep each sample's time", "use --source pmp with --start/--end")
    for row in sel.profiles:
        path = results.dir / row["path"]
        meta = folded.read_meta(path)
        if start is None and end is None:
            stacks = folded.read(path)
        else:
            stacks = folded.read_timed(path, start, end)
            lo, hi = max(0.0, start or 0.0), min(row["seconds"], end if end is not None else row["seconds"])
            if hi <= lo:
                raise UsageError(f"--start/--end keep nothing of a {row['seconds']:.1f} s profile", "see its seconds")
            row = {**row, "transactions": (row["transactions"] or 0) * (hi - lo) / row["seconds"], "seconds": hi - lo}
        if per == "second":
            row = {**row, "transactions": row["seconds"]}
        sample_us = (
            1e6 / row["frequency_hz"]
            if row.get("frequency_hz")
            else (1e6 * row["interval_s"] if row.get("interval_s") else None)
        )
        profiles.append(
            Profile.from_stacks(
                stacks,
                transactions=row["transactions"] or 0,
                sample_us=sample_us,
                dsos=meta.get("dsos") or {},
                cell_id=row["cell_id"],
            )
        )
        summed.update(stacks)
        txn += row["transactions"] or 0
    return Merged(profiles), summed, txn
