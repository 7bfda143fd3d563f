"""Error rates of perflab's statistics, by simulation: intervals, verdicts, profile diffs.

What: how often the claims of the README's "Explaining the numbers" and "Reading profiles"
hold, on synthetic data where the truth is known.
  1. The 95% interval of a variant's mean (Student t over repeats): coverage.
  2. The ratio interval and verdict of `compare` (delta method on the log scale, Welch df):
     coverage of the true ratio (1.04), the false-positive rate of two identical variants at
     95% and at 99.9%, and the power for a 3% difference.
     Noise: Gaussian, lognormal (skewed), Student t with 3 df (heavy tails) and "outlier"
     (Gaussian, but 1 repeat in 20 is 25% low: a stall or a noisy neighbour; the truth is
     then the mean of that mixture), at CVs from 1% to 20%, with equal and unequal repeat
     counts and CVs. A design `3x 5% vs 10x 1.7%` is 3 repeats at 5% CV against 10 at 1.7%.
  3. The differential profile's noise floor (`perflab diff`, the report's differential
     table): two variants drawn from the *same* profile, each a few repeats; how often at
     least one function is marked significant (family-wise, over all functions and over the
     25 a `perflab diff` shows) and the share of functions marked (per function). Profiles:
     a random call tree of K functions with Zipf(1.1) self costs, Poisson sample counts of a
     few hundred to a million samples per repeat, transactions varying 2% between repeats,
     and run-to-run noise: none (sampling only), 5% CV shared by every function, or
     heterogeneous (each function its own CV, lognormal around 3-5%, some above 20%).
How: the real code on numpy arrays: `stats.mean_half_width` and `stats.log_ratio_interval`
(what `ci`, `ratio_ci` and `compare` compute), and for profiles `Profile.from_stacks` and
`profile_diff.diff(...).rows()`, exactly what `perflab diff` runs. Seeded: the figures are
the same on every run. CPU only: no server, no sysbench.

Run: python3 bench/stats_rates.py                  # the figures we quote (~10 minutes)
     python3 bench/stats_rates.py --quick          # smoke test, fewer trials (~1 minute)
     python3 bench/stats_rates.py --part profiles  # only one part: stats | profiles
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from typing import Any

import _common as C
import numpy as np

from perflab.analyze import stats
from perflab.analyze.profile import Merged, Profile
from perflab.analyze.profile_diff import diff

SEED = 20261122
FAMILIES = ("gauss", "lognormal", "t3", "outlier")
CVS = (0.01, 0.02, 0.05, 0.1, 0.2)
OUTLIER_P, OUTLIER_DROP = 0.05, 0.25
# (repeats A, relative CV A, repeats B, relative CV B): the larger CV is the `cv` of the row
DESIGNS = (
    (3, 1, 3, 1),
    (5, 1, 5, 1),
    (10, 1, 10, 1),
    (3, 1, 6, 1),
    (3, 1, 10, 1),
    (3, 1, 3, 1 / 2),
    (3, 1, 3, 1 / 5),
    (5, 1, 5, 1 / 4),
    (10, 1, 10, 1 / 5),
    (3, 1, 10, 1 / 3),
    (3, 1 / 3, 10, 1),
    (3, 1, 10, 1 / 5),
    (5, 1, 10, 1 / 3),
    (3, 1, 6, 1 / 3),
)


def draw(rng: np.random.Generator, family: str, mean: float, cv: float, shape: tuple[int, int]) -> np.ndarray:
    """Repeats with the given true mean and CV (outlier: the mixture's mean is `mean`)."""
    if family == "gauss":
        return mean * (1 + cv * rng.standard_normal(shape))
    if family == "lognormal":
        s = np.sqrt(np.log1p(cv * cv))
        return mean * np.exp(s * rng.standard_normal(shape) - s * s / 2)
    if family == "t3":
        return mean * (1 + cv * rng.standard_t(3, shape) / np.sqrt(3))
    values = mean * (1 + cv * rng.standard_normal(shape))
    values = np.where(rng.random(shape) < OUTLIER_P, values * (1 - OUTLIER_DROP), values)
    return values / (1 - OUTLIER_P * OUTLIER_DROP)


# ----------------------------------------------------------------------------- 1-2: intervals


def mean_coverage(rng: np.random.Generator, family: str, cv: float, n: int, trials: int) -> float:
    x = draw(rng, family, 1000.0, cv, (trials, n))
    half = stats.mean_half_width(x.std(1, ddof=1), n)
    return float(np.mean(np.abs(x.mean(1) - 1000.0) <= half))


def ratio_rates(rng: np.random.Generator, family: str, cv: float, design: tuple, trials: int) -> dict[str, float]:
    """Coverage of 1.04, false positives at 95% and 99.9%, power for a 3% loss."""
    na, ka, nb, kb = design
    out = {}
    for name, truth in (("coverage", 1.04), ("fp", 1.0), ("power", 0.97)):
        a, b = draw(rng, family, 100.0, cv * ka, (trials, na)), draw(rng, family, 100.0 * truth, cv * kb, (trials, nb))
        moments = (a.mean(1), a.var(1, ddof=1), na, b.mean(1), b.var(1, ddof=1), nb)
        with np.errstate(invalid="ignore"):  # t3 at 20% CV: a mean below 0 now and then (not covered)
            log_ratio, half = stats.log_ratio_interval(*moments)
        if name == "coverage":
            out[name] = float(np.mean(np.abs(log_ratio - np.log(truth)) <= half))
        elif name == "power":
            out[name] = float(np.mean(log_ratio + half < 0))
        else:
            out["fp95"] = float(np.mean(np.abs(log_ratio) > half))
            _, half999 = stats.log_ratio_interval(*moments, level=0.999)
            out["fp999"] = float(np.mean(np.abs(log_ratio) > half999))
    return out


def design_label(cv: float, design: tuple) -> str:
    na, ka, nb, kb = design
    return f"{na}x {cv * ka:.3g} vs {nb}x {cv * kb:.3g}"


def stats_part(trials: int) -> dict[str, Any]:
    rng = np.random.default_rng(SEED)
    C.say(f"## 1. Coverage of the 95% interval of a mean ({trials} trials a cell)\n")
    rows, worst = [], {}
    for family in FAMILIES:
        for cv in CVS:
            cells = [mean_coverage(rng, family, cv, n, trials) for n in (3, 5, 10)]
            worst[family] = min(worst.get(family, 1.0), *cells)
            rows.append([family, f"{cv:.0%}", *(C.pct(c, 1) for c in cells)])
    C.say(C.table(["noise", "CV", "n=3", "n=5", "n=10"], rows) + "\n")
    C.say(f"## 2. Ratio interval and verdicts ({trials} trials a cell; truth 1.04 for coverage)\n")
    rows, summary = [], {}
    for family in FAMILIES:
        for cv in CVS:
            for design in DESIGNS:
                r = ratio_rates(rng, family, cv, design, trials)
                equal = design[0] == design[2] and design[1] == design[3]
                key = f"{family}/{'equal' if equal else 'unequal'}"
                agg = summary.setdefault(key, {"coverage": [1.0, 0.0], "fp95": [1.0, 0.0], "fp999": [1.0, 0.0]})
                for metric in agg:
                    agg[metric] = [min(agg[metric][0], r[metric]), max(agg[metric][1], r[metric])]
                rows.append(
                    [
                        family,
                        design_label(cv, design),
                        C.pct(r["coverage"], 1),
                        C.pct(r["fp95"], 2),
                        C.pct(r["fp999"], 3),
                        C.pct(r["power"], 0),
                    ]
                )
    C.say(C.table(["noise", "design (repeats x CV)", "coverage", "FP at 95%", "FP at 99.9%", "power 3%"], rows))
    C.say("\nRanges (min - max over CVs 1-20% and the designs; equal = same repeats and CV on both sides):\n")
    C.say(
        C.table(
            ["noise/designs", "coverage", "FP at 95%", "FP at 99.9%"],
            [[k, *(f"{C.pct(lo, 2)} - {C.pct(hi, 2)}" for lo, hi in v.values())] for k, v in summary.items()],
        )
    )
    return {"mean_coverage_min": worst, "ratio": summary}


# ----------------------------------------------------------------------------- 3: profile diffs


def call_tree(rng: np.random.Generator, k: int) -> tuple[list[str], np.ndarray]:
    """K stacks (root first, each function's own path) and their self-cost shares."""
    parent = [-1] + [int(rng.integers(0, i // 3 + 1)) for i in range(1, k)]
    stacks = []
    for i in range(k):
        path, j = [], i
        while j >= 0:
            path.append(f"fn{j}")
            j = parent[j]
        stacks.append(";".join(reversed(path)))
    weights = 1.0 / np.arange(1, k + 1) ** 1.1
    rng.shuffle(weights)  # a function's cost does not depend on its depth
    return stacks, weights / weights.sum()


def repeat(rng: np.random.Generator, stacks: list[str], share: np.ndarray, samples: int, cv: Any) -> Profile:
    """One repeat: 2% CV of transactions, a run-to-run factor per function, Poisson counts."""
    txn = 10000.0 * (1 + 0.02 * rng.standard_normal())
    factor = np.exp(cv * rng.standard_normal(len(share)) - cv * cv / 2) if np.any(cv) else 1.0
    counts = rng.poisson(share * factor * samples * txn / 10000.0)
    return Profile.from_stacks(Counter({s: int(c) for s, c in zip(stacks, counts) if c}), transactions=txn)


NOISES: dict[str, Callable[[np.random.Generator, int], np.ndarray | float]] = {
    "sampling only": lambda rng, k: 0.0,
    "5% shared": lambda rng, k: 0.05,
    "heterogeneous": lambda rng, k: 0.04 * np.exp(0.8 * rng.standard_normal(k)),
}


def diff_rates(rng: np.random.Generator, k: int, samples: int, reps: int, noise: str, trials: int) -> dict[str, float]:
    """Family-wise (all functions, the 25 shown) and per-function rates of `significant`."""
    any_all = any_top = flagged = total = 0
    for _ in range(trials):
        stacks, share = call_tree(rng, k)
        cv = NOISES[noise](rng, k)
        a = Merged([repeat(rng, stacks, share, samples, cv) for _ in range(reps)])
        b = Merged([repeat(rng, stacks, share, samples, cv) for _ in range(reps)])
        for by in ("self", "total"):
            marks = [r["significant"] for r in diff(a, b).rows(limit=None, by=by)]
            any_all += any(marks)
            any_top += any(marks[:25])
            flagged, total = flagged + sum(marks), total + len(marks)
    return {"any": any_all / (2 * trials), "any_top25": any_top / (2 * trials), "per_function": flagged / total}


def profiles_part(trials: int) -> dict[str, Any]:
    rng = np.random.default_rng(SEED + 1)
    C.say(f"\n## 3. Identical profiles: diffs with a 'significant' function (self and total, {trials} trials each)\n")
    rows, out = [], {}
    grid = [(300, s, r) for s in (400, 4000, 100_000, 1_000_000) for r in (1, 2, 3, 5)]
    grid += [(2000, s, r) for s in (4000, 100_000, 1_000_000) for r in (2, 3)]
    for k, samples, reps in grid:
        for noise in NOISES:
            r = diff_rates(rng, k, samples, reps, noise, trials if k <= 300 else max(10, trials // 4))
            out[f"K={k} S={samples} reps={reps} {noise}"] = r
            rows.append(
                [
                    f"{k}",
                    f"{samples:,}",
                    reps,
                    noise,
                    C.pct(r["any"], 1),
                    C.pct(r["any_top25"], 1),
                    C.pct(r["per_function"], 3),
                ]
            )
    C.say(
        C.table(
            [
                "functions",
                "samples/repeat",
                "repeats",
                "run-to-run noise",
                "any function",
                "any of top 25",
                "per function",
            ],
            rows,
        )
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials: a smoke test, not the quoted figures")
    parser.add_argument("--part", choices=("stats", "profiles", "all"), default="all")
    parser.add_argument("--trials", type=int, help="trials per cell (default 200000 for stats, 200 for profiles)")
    args = parser.parse_args()
    result: dict[str, Any] = {"seed": SEED}
    if args.part in ("stats", "all"):
        result["stats"] = stats_part(args.trials or (20_000 if args.quick else 200_000))
    if args.part in ("profiles", "all"):
        result["profiles"] = profiles_part(args.trials or (10 if args.quick else 200))
    C.final_json(result)


if __name__ == "__main__":
    C.main_guard(main)
