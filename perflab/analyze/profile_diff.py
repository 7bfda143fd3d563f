"""Differential profile: function by function, the change per transaction from A to B.

Input: two `Merged` profiles (analyze/profile.py), each the repeats of one variant. For
every function: A's and B's mean self and total samples per transaction, their difference,
and a noise floor: the half-width of a 95% interval of the difference that holds for all
the functions of the diff at once, never below what sampling alone explains (Poisson
counts); see analyze/profile_noise.py. A change smaller than its noise floor is marked not
significant. The callers that carry a function's change are its parent frames, with the
change of the function's total samples through each.

    rows = diff(merged_a, merged_b).rows(limit=30, by="self")
    rows[0] -> {"function": "my_hash_sort_simple", "a_self_per_txn": 0.01, "b_self_per_txn": 0.9,
                "delta_self_per_txn": 0.89, "noise_self_per_txn": 0.05, "significant": true, ...}
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from perflab.analyze import profile_noise
from perflab.analyze.profile import Merged, dso_of
from perflab.store.folded import is_kernel


def counts(m: Merged, functions: list[str], kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Sample counts (a row per repeat, a column per function) and each repeat's transactions."""
    table = [(p.self_samples if kind == "self" else p.total_samples) for p in m.profiles]
    txn = np.array([p.transactions for p in m.profiles], float)
    return np.array([[c[f] for f in functions] for c in table], float), txn


def floors(a: Merged, b: Merged, functions: list[str]) -> dict[str, profile_noise.Floor]:
    """The noise floors of self and of total samples per transaction, over `functions`."""
    kinds = ("self", "total")
    return {kind: profile_noise.floor(*counts(a, functions, kind), *counts(b, functions, kind)) for kind in kinds}


def _callers(m: Merged, function: str) -> defaultdict[str, float]:
    """Mean samples per txn of `function` (in the stack) via each parent frame."""
    out: defaultdict[str, float] = defaultdict(float)
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
        functions = sorted(self.a.functions() | self.b.functions())
        noise = floors(self.a, self.b, functions)
        rows = []
        for i, function in enumerate(functions):
            row: dict = {"function": function, "dso": dso_of(function, dsos), "kernel": is_kernel(function)}
            for kind, fl in noise.items():
                av, bv = float(fl.a_mean[i]), float(fl.b_mean[i])
                row[f"a_{kind}_per_txn"], row[f"b_{kind}_per_txn"] = av, bv
                row[f"delta_{kind}_per_txn"] = bv - av
                row[f"noise_{kind}_per_txn"] = float(fl.noise[i])
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
