"""Per-function tables of folded profiles, per transaction, merged over repeats.

Input: folded stacks (store/folded.py) of one or more cells (the repeats of one variant and
thread count) and each profile's transaction count over the profiler's span. Output: one
row per function with self samples (the function is the leaf) and total samples (anywhere in
the stack, counted once per stack), both divided by transactions: the only fair basis when
two variants run at different speeds. With a sampling rate, samples become microseconds:
perf samples are CPU time (1/frequency s each), pmp samples thread wall time (interval s).

    p = Profile.from_stacks(stacks, transactions=12000, sample_us=1e6 / 99, dsos={...})
    rows = merge([p1, p2, p3]).rows()     # [{"function", "dso", "self_per_txn", ...}]
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field

from perflab.store.folded import is_kernel


def dso_of(function: str, dsos: dict[str, str]) -> str | None:
    if function in dsos:
        return dsos[function]
    if is_kernel(function):
        return "[kernel]"
    if "+0x" in function:
        return function.split("+0x", 1)[0]
    return None


@dataclass
class Profile:
    """One cell's profile reduced to per-function counts."""

    self_samples: Counter
    total_samples: Counter
    callers: dict[str, Counter]  # function -> parent frame -> samples where the function is in the stack
    samples: int
    transactions: float
    sample_us: float | None  # microseconds one sample stands for; None if unknown
    dsos: dict[str, str] = field(default_factory=dict)
    cell_id: int | None = None

    @classmethod
    def from_stacks(
        cls,
        stacks: Counter,
        *,
        transactions: float,
        sample_us: float | None = None,
        dsos: dict[str, str] | None = None,
        cell_id: int | None = None,
    ) -> Profile:
        self_s: Counter = Counter()
        total: Counter = Counter()
        callers: dict[str, Counter] = {}
        for stack, count in stacks.items():
            frames = stack.split(";")
            self_s[frames[-1]] += count
            seen = set()
            for depth, frame in enumerate(frames):
                if frame in seen:  # recursion: count the stack once per function
                    continue
                seen.add(frame)
                total[frame] += count
                parent = frames[depth - 1] if depth else "(root)"
                callers.setdefault(frame, Counter())[parent] += count
        return cls(self_s, total, callers, sum(stacks.values()), transactions, sample_us, dsos or {}, cell_id)

    def per_txn(self, count: float) -> float:
        return count / self.transactions if self.transactions else math.nan


@dataclass
class Merged:
    """The repeats of one variant: per-function per-transaction values, one per profile."""

    profiles: list[Profile]

    def functions(self) -> set[str]:
        return {f for p in self.profiles for f in p.total_samples}

    def values(self, function: str, kind: str) -> list[float]:
        return [p.per_txn((p.self_samples if kind == "self" else p.total_samples)[function]) for p in self.profiles]

    def mean(self, function: str, kind: str) -> float:
        return statistics.fmean(self.values(function, kind))

    @property
    def sample_us(self) -> float | None:
        rates = {p.sample_us for p in self.profiles}
        return rates.pop() if len(rates) == 1 else None

    @property
    def dsos(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for p in self.profiles:
            out.update(p.dsos)
        return out

    @property
    def samples(self) -> int:
        return sum(p.samples for p in self.profiles)

    @property
    def transactions(self) -> float:
        return sum(p.transactions for p in self.profiles)

    def rows(self, limit: int | None = None, by: str = "self") -> list[dict]:
        """One row per function, largest `by` (self or total) per transaction first."""
        us = self.sample_us
        dsos = self.dsos
        total_samples = self.samples or 1
        rows = []
        for function in self.functions():
            self_v, total_v = self.values(function, "self"), self.values(function, "total")
            s, t = statistics.fmean(self_v), statistics.fmean(total_v)
            self_n = sum(p.self_samples[function] for p in self.profiles)
            row = {
                "function": function,
                "dso": dso_of(function, dsos),
                "kernel": is_kernel(function),
                "self_per_txn": s,
                "total_per_txn": t,
                "self_us_per_txn": s * us if us else None,
                "total_us_per_txn": t * us if us else None,
                "self_samples": self_n,
                "total_samples": sum(p.total_samples[function] for p in self.profiles),
                "self_pct": 100.0 * self_n / total_samples,
                "self_per_txn_min": min(self_v),
                "self_per_txn_max": max(self_v),
                "repeats": len(self.profiles),
            }
            rows.append(row)
        rows.sort(key=lambda r: (-float(r[f"{by}_per_txn"] or 0.0), str(r["function"])))
        return rows[:limit] if limit else rows


def merge(profiles: list[Profile]) -> Merged:
    return Merged(profiles)


def round_row(row: dict, digits: int = 6) -> dict:
    return {k: (float(f"{v:.{digits}g}") if isinstance(v, float) else v) for k, v in row.items()}
