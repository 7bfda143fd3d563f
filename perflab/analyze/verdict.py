"""Four-state verdicts over a family of ratio estimates, Holm-corrected; the rounds an
inconclusive one still needs.

Input: the Estimates (analyze/ratio.py) of one family: every comparison of one metric and
kind (`variant`, `axis` or `runs`) that one report or compare call makes. Output: one
Judgement per estimate:

  faster / slower  the difference test rejects "ratio = 1" (two-sided t test of the log-ratio);
                   for p95 (lower is better) a ratio below 1 is faster;
  equivalent       two one-sided tests reject "ratio <= 1 - margin" and "ratio >= 1 + margin",
                   each at alpha / 2: the 95% interval shown lies inside 1 +/- margin (stricter
                   than the textbook TOST at alpha, whose 90% interval a reader cannot see);
  inconclusive     neither; with `rounds_needed`, or with too few repeats for any interval.

A difference that is resolved wins over equivalence: a ratio of 1.01 [1.005-1.015] is
`faster`, and its interval says by how little. Holm's step-down correction runs over the
family, separately for the difference tests and for the equivalence tests, so each kind of
false verdict happens in at most alpha of families (A/A: no false faster/slower in 95% of
matrices, however many variants). Adjusted p-values: sort the m p-values, p~(i) =
max_{j<=i} min(1, (m - j + 1) p(j)); a test rejects when p~ <= alpha = 1 - level.

rounds_needed, at the observed ratio and variance: the smallest k >= 1 with

    t(1 - a/2, df(n + k)) * se(n + k) <= target

where se(n + k)^2 = sum(v / (n_i + k)) over the estimate's variance parts (paired: the
variance of the per-round log-ratios over the pairs; Welch: each side's squared CV over its
repeats, each side one more repeat a round), df is Welch-Satterthwaite's (n + k - 1 paired),
target = |log ratio| for the difference test, the distance from the log ratio to the nearer
of log(1 - margin), log(1 + margin) for equivalence, and a = alpha / u with u the comparisons
of the family that test has not resolved (Holm's level for the next one to resolve). The
fewer of the two tests' k is given. It is a projection, not a promise: the ratio moves as
rounds are added. None above MAX_ROUNDS; with fewer than 3 repeats, the rounds to reach 3.

    judge([estimate], higher_is_better=True, margin=0.02)[0].verdict  -> "equivalent"
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import special

from perflab.analyze import stats
from perflab.analyze.ratio import Estimate

FASTER, SLOWER, EQUIVALENT, INCONCLUSIVE = "faster", "slower", "equivalent", "inconclusive"
VERDICTS = (FASTER, SLOWER, EQUIVALENT, INCONCLUSIVE)
MARGIN = 0.02  # [experiment] equivalence_margin's default
MAX_ROUNDS = 1000


@dataclass(frozen=True)
class Judgement:
    verdict: str
    p_difference: float | None  # Holm-adjusted, over the family's difference tests
    p_equivalence: float | None  # Holm-adjusted, over the family's equivalence tests
    family: int  # comparisons tested in the family (Holm's m)
    rounds_needed: int | None = None  # inconclusive only
    reason: str | None = None  # inconclusive only: why


def bounds(margin: float) -> tuple[float, float]:
    """The equivalence region on the log scale: (log(1 - margin), log(1 + margin))."""
    return math.log1p(-margin), math.log1p(margin)


def p_difference(est: Estimate) -> float | None:
    """Two-sided p-value of "log ratio = 0"."""
    if not est.has_interval or est.log_ratio is None:
        return None
    se, df = est.se_df()
    if se == 0:
        return 0.0 if est.log_ratio != 0 else 1.0
    return stats.t_two_sided_p(est.log_ratio / se, df)


def p_equivalence(est: Estimate, margin: float) -> float | None:
    """Two one-sided tests against the margin, as one p-value: 2 x the larger one-sided p
    (capped at 1), so p <= alpha exactly when the (1 - alpha) interval lies inside the margin."""
    if not est.has_interval or est.log_ratio is None:
        return None
    low, high = bounds(margin)
    se, df = est.se_df()
    if se == 0:
        return 0.0 if low < est.log_ratio < high else 1.0
    worst = max(special.stdtr(df, -(est.log_ratio - low) / se), special.stdtr(df, -(high - est.log_ratio) / se))
    return min(1.0, 2 * float(worst))


def holm(pvalues: list[float | None]) -> list[float | None]:
    """Holm-adjusted p-values; None (no test) stays None and does not count in m."""
    tested = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        out[i] = running
    return out


def judge(estimates: list[Estimate], higher_is_better: bool, margin: float = MARGIN) -> list[Judgement]:
    """The verdict of each estimate of one family (all at one level)."""
    if not estimates:
        return []
    alpha = 1 - estimates[0].level
    diff = holm([p_difference(e) for e in estimates])
    equiv = holm([p_equivalence(e, margin) for e in estimates])
    family = sum(1 for p in diff if p is not None)
    open_diff = max(1, sum(1 for p in diff if p is not None and p > alpha))
    open_equiv = max(1, sum(1 for p in equiv if p is not None and p > alpha))
    out = []
    for est, pd, pe in zip(estimates, diff, equiv):
        if pd is not None and pd <= alpha:
            better = (est.log_ratio or 0) > 0 if higher_is_better else (est.log_ratio or 0) < 0
            out.append(Judgement(FASTER if better else SLOWER, pd, pe, family))
        elif pe is not None and pe <= alpha:
            out.append(Judgement(EQUIVALENT, pd, pe, family))
        else:
            need = rounds_needed(est, margin, alpha / open_diff, alpha / open_equiv)
            out.append(Judgement(INCONCLUSIVE, pd, pe, family, need, why_inconclusive(est, pd, margin, alpha)))
    return out


def rounds_needed(est: Estimate, margin: float, a_diff: float, a_equiv: float) -> int | None:
    """Further rounds that would resolve `est` at its observed ratio and variance (module docstring)."""
    if est.log_ratio is None:
        return None
    if not est.has_interval:
        return max(1, stats.MIN_REPEATS - est.n)
    low, high = bounds(margin)
    d = est.log_ratio
    targets = [(abs(d), a_diff), (min(high - d, d - low), a_equiv)]
    found = [k for target, a in targets if target > 0 if (k := _rounds_for(est, target, a)) is not None]
    return min(found) if found else None


def _rounds_for(est: Estimate, target: float, a: float) -> int | None:
    """The smallest k in 1..MAX_ROUNDS with half_width(k, 1 - a) <= target (it falls with k)."""
    def fits(k: int) -> bool:
        return est.half_width(k, 1 - a) <= target

    if not fits(MAX_ROUNDS):
        return None
    lo, hi = 1, MAX_ROUNDS
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid + 1, hi)
    return lo


def why_inconclusive(est: Estimate, p_diff: float | None, margin: float, alpha: float) -> str:
    """Why an estimate gets no verdict, in words a reader can check against its interval."""
    if est.ratio is None:
        return "no settled repeats on one side (failed or unsettled cells are left out)"
    if not est.has_interval:
        what = "round(s) hold both sides" if est.method == "paired" else "repeat(s)"
        return f"{est.n} {what}: at least {stats.MIN_REPEATS} are needed for an interval"
    low, high = est.low or 0.0, est.high or 0.0
    if low > 1 or high < 1:
        return f"the interval excludes 1, but not after Holm's correction (adjusted p = {p_diff:.3g} > {alpha:.3g})"
    if 1 - margin < low and high < 1 + margin:
        return f"the interval lies within ±{margin:.1%}, but not after Holm's correction"
    return f"the interval holds 1 and reaches beyond ±{margin:.1%}"
