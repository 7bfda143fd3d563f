"""Differential profile: function by function, the change per transaction from A to B.

Input: two `Merged` profiles (analyze/profile.py), each the repeats of one variant. For
every function: A's and B's mean self and total samples per transaction, their difference,
and a noise floor: the half-width of a 95% interval of the difference, from the spread of
the repeats (Student t, pooled degrees of freedom) and never below what sampling alone
explains (Poisson counts). A change smaller than its noise floor is marked not significant.
The callers that carry a function's change are its parent frames, with the change of the
function's total samples through each.

    rows = diff(merged_a, merged_b).rows(limit=30, by="self")
    rows[0] -> {"function": "my_hash_sort_simple", "a_self_per_txn": 0.01, "b_self_per_txn": 0.9,
                "delta_self_per_txn": 0.89, "noise_self_per_txn": 0.05, "significant": true, ...}
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass

from perflab.analyze.profile import Merged, dso_of
from perflab.store.folded import is_kernel

# two-sided 95% Student t critical values, df = 1..10 (beyond: 2.0, then normal)
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def t95(df: float) -> float:
    if df < 1:
        return _T95[0]
    return _T95[int(df) - 1] if df <= len(_T95) else (2.0 if df < 30 else 1.96)


def noise(a: Merged, b: Merged, function: str, kind: str) -> float:
    """95% half-width of mean(B) - mean(A) for one function's per-txn value."""
    va, vb = a.values(function, kind), b.values(function, kind)
    sampling = a.poisson_var(function, kind) + b.poisson_var(function, kind)
    na, nb = len(va), len(vb)
    if na >= 2 and nb >= 2:
        # unequal-variance standard error with the pooled degrees of freedom: Welch's df falls
        # to 1 whenever one side does not vary (a function absent from A), which would hide
        # every change behind t = 12.7 at 2-3 repeats
        spread = statistics.variance(va) / na + statistics.variance(vb) / nb
        return t95(na + nb - 2) * math.sqrt(max(spread, sampling))
    return 1.96 * math.sqrt(sampling)  # one repeat: sampling noise is all we can know


def _callers(m: Merged, function: str) -> Counter:
    """Mean samples per txn of `function` (in the stack) via each parent frame."""
    out: Counter = Counter()
    for p in m.profiles:
        for parent, count in p.callers.get(function, {}).items():
            out[parent] += p.per_txn(count) / len(m.profiles)
    return out


@dataclass
class Diff:
    a: Merged
    b: Merged

    def rows(self, limit: int | None = 30, by: str = "self", callers: int = 3) -> list[dict]:
        us = self.a.sample_us if self.a.sample_us == self.b.sample_us else None
        dsos = {**self.a.dsos, **self.b.dsos}
        rows = []
        for function in self.a.functions() | self.b.functions():
            row: dict = {"function": function, "dso": dso_of(function, dsos), "kernel": is_kernel(function)}
            for kind in ("self", "total"):
                av, bv = self.a.mean(function, kind), self.b.mean(function, kind)
                row[f"a_{kind}_per_txn"], row[f"b_{kind}_per_txn"] = av, bv
                row[f"delta_{kind}_per_txn"] = bv - av
                row[f"noise_{kind}_per_txn"] = noise(self.a, self.b, function, kind)
                for side, v in (("a", av), ("b", bv), ("delta", bv - av)):
                    row[f"{side}_{kind}_us_per_txn"] = v * us if us else None
            row["ratio_self"] = row["b_self_per_txn"] / row["a_self_per_txn"] if row["a_self_per_txn"] else None
            row["significant"] = abs(row[f"delta_{by}_per_txn"]) > row[f"noise_{by}_per_txn"]
            rows.append(row)
        rows.sort(key=lambda r: (-abs(r[f"delta_{by}_per_txn"]), r["function"]))
        rows = rows[:limit] if limit else rows
        for row in rows:
            ca, cb = _callers(self.a, row["function"]), _callers(self.b, row["function"])
            change = {c: cb[c] - ca[c] for c in set(ca) | set(cb)}
            ranked = sorted(change.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:callers]
            row["callers"] = [{"caller": c, "delta_total_per_txn": d} for c, d in ranked if d]
        return rows


def diff(a: Merged, b: Merged) -> Diff:
    return Diff(a, b)
