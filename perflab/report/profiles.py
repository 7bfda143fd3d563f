"""What the HTML and Markdown reports show of profiles: top functions, a differential table, flame graphs.

The reports call `load(directory, cells)` once per results directory and show a "Profiles"
section only when it returns a Profiles (None: the run recorded no profiles). It reads the
folded stacks under DIR/profiles/ through analyze/, as `perflab profile/diff/flame` do:

    Profiles(top={"allocator=glibc": [FunctionRow("my_hash_sort_simple", 10.2, 14.0, 3.1)]},
             pair=("allocator=glibc", "allocator=jemalloc"),
             diff=[DiffRow("mprotect", 0.4, 2.9)],
             flames=[FlameGraph("allocator=glibc, 2 threads", "<svg ...>...</svg>")])

Flame graph SVGs are embedded whole in a sandboxed iframe (`srcdoc`, scripts allowed, no
network), so inferno's own click-to-zoom and search work unchanged and its script never sees
the report's other SVGs. They must not reference anything outside themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class FunctionRow:
    function: str
    self_pct: float  # share of the variant's samples in this function itself
    total_pct: float  # share of samples with this function on the stack
    per_txn: float | None = None  # samples per transaction (comparable across variants)


@dataclass(frozen=True)
class DiffRow:
    function: str
    base_per_txn: float
    other_per_txn: float

    @property
    def delta(self) -> float:
        return self.other_per_txn - self.base_per_txn


@dataclass(frozen=True)
class FlameGraph:
    title: str
    svg: str  # a standalone SVG document (inferno's output), scripts included
    differential: bool = False


@dataclass
class Profiles:
    top: dict[str, list[FunctionRow]] = field(default_factory=dict)  # variant key -> top functions
    pair: tuple[str, str] | None = None  # (baseline, other) variant keys of `diff`
    diff: list[DiffRow] = field(default_factory=list)
    flames: list[FlameGraph] = field(default_factory=list)
    no_flames: str | None = None  # why there are no flame graphs (inferno missing), said in the report


TOP = 10
DIFF_ROWS = 15


def load(directory: Path, cells: list[dict[str, Any]], groups: list[Any] | None = None) -> Profiles | None:
    """The profiles of a results directory, or None when it has none: per (variant, threads)
    the top functions by self samples per transaction (merged over repeats), the
    differential table of the baseline against the variant that differs most, and flame
    graphs (one per variant, and the differential one) when inferno is installed. `groups`
    (analyze/summary.py, in the file's order, the baseline first) order them; without, the
    order the cells ran."""
    from perflab.analyze import profile_diff, profile_select  # noqa: PLC0415
    from perflab.errors import PerflabError  # noqa: PLC0415
    from perflab.report import flame  # noqa: PLC0415
    from perflab.store.results import Results  # noqa: PLC0415

    with Results(Path(directory)) as results:
        if not results.profiles():
            return None
        out = Profiles()
        merged: dict[str, Any] = {}
        for key in _groups(cells, groups):
            try:
                sel = profile_select.select(results, selector=key)
                one, stacks, txn = profile_select.load(results, sel)
            except PerflabError:  # this group has no profile (a failed cell, another source)
                continue
            merged[key] = (one, stacks, txn)
            out.top[key] = [
                FunctionRow(
                    r["function"], r["self_pct"], 100.0 * r["total_samples"] / (one.samples or 1), r["self_per_txn"]
                )
                for r in one.rows(limit=TOP)
            ]
    if not merged:
        return None
    keys = list(merged)
    base = keys[0]
    if len(keys) > 1:
        other = max(keys[1:], key=lambda k: _distance(merged[base][0], merged[k][0]))
        out.pair = (base, other)
        rows = profile_diff.diff(merged[base][0], merged[other][0]).rows(limit=DIFF_ROWS)
        out.diff = [DiffRow(r["function"], r["a_self_per_txn"], r["b_self_per_txn"]) for r in rows]
    try:
        for key, (_, stacks, txn) in merged.items():
            text = flame.folded_text(flame.per_million_txn(stacks, txn))
            out.flames.append(FlameGraph(key, flame.svg(text, key, "samples per million transactions")))
        if out.pair:
            a, b = (merged[k] for k in out.pair)
            text = flame.diff_text(flame.per_million_txn(a[1], a[2]), flame.per_million_txn(b[1], b[2]))
            title = f"{out.pair[1]} vs {out.pair[0]}"
            out.flames.append(
                FlameGraph(title, flame.svg(text, title, "red grew, blue shrank", differential=True), True)
            )
    except PerflabError as exc:  # inferno missing: the tables still stand, and the report says why
        out.flames = []
        out.no_flames = f"{exc.message}: no flame graphs; {exc.hint}" if exc.hint else exc.message
    return out


def _groups(cells: list[dict[str, Any]], groups: list[Any] | None) -> list[str]:
    """Selector per (variant, threads) with a successful cell: in the order of `groups` (the
    baselines first), else in run order."""
    ran = list(dict.fromkeys(f"{_selector(c['variant'])}/t{c['threads']}" for c in cells if c["status"] == "ok"))
    if groups is None:
        return ran
    ordered = [f"{_selector(g.variant)}/t{g.threads}" for g in sorted(groups, key=lambda g: not g.baseline)]
    return [key for key in ordered if key in ran]


def _selector(variant: dict[str, str]) -> str:
    return ",".join(f"{axis}={label}" for axis, label in variant.items())


def _distance(a: Any, b: Any) -> float:
    """Sum of absolute self-per-transaction differences: how far apart two profiles are."""
    return sum(abs(a.mean(f, "self") - b.mean(f, "self")) for f in a.functions() | b.functions())
