"""EXTENSION POINT for the profiles branch: what the HTML and Markdown reports show of profiles.

The reports call `load(directory, cells)` once per results directory and show a "Profiles"
section only when it returns a Profiles (never when it returns None, as it does today). The
profiles work (`perflab profile/diff/flame`, folded stacks under DIR/profiles/, inferno SVGs)
fills this one function in; nothing else in report/ needs to change:

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


def load(directory: Path, cells: list[dict[str, Any]]) -> Profiles | None:
    """The profiles of a results directory, or None when it has none.

    TODO(profiles branch): read DIR/profiles/ (folded stacks per cell), aggregate per
    variant, pick the pair (baseline vs the variant with the largest verdict), and render the
    flame graphs (one per variant plus the differential one) with inferno.
    """
    if not (Path(directory) / "profiles").is_dir():
        return None
    return None
