"""Binomial bounds for tests that hold a claimed rate by simulation (coverage, false positives).

A simulated rate is a binomial count: `hits` of `trials`. A test holds a claim when the rate's
Clopper-Pearson bound, not its point estimate, lies within the claim, so a lucky seed cannot
pass a method that misses it, and the number of trials is what makes the bound tight:

    assert_at_most(hits, trials, 0.05)        # one-sided 95% upper bound <= 5%
    assert_within(hits, trials, 0.94, 0.96)   # two-sided 95% interval inside [94%, 96%]
    assert_not_above(hits, trials, 0.05)      # a method exactly at its level: not significantly above
"""

from __future__ import annotations

from scipy import special


def upper(hits: int, trials: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound of a rate."""
    return 1.0 if hits >= trials else float(special.betaincinv(hits + 1, trials - hits, confidence))


def lower(hits: int, trials: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson lower bound of a rate."""
    return 0.0 if hits <= 0 else float(special.betaincinv(hits, trials - hits + 1, 1 - confidence))


def _show(hits: int, trials: int) -> str:
    low, high = lower(hits, trials, 0.975), upper(hits, trials, 0.975)
    return f"{hits}/{trials} = {hits / trials:.4%} (95% CI {low:.4%} - {high:.4%})"


def assert_within(hits: int, trials: int, low: float, high: float) -> None:
    """The rate's two-sided 95% Clopper-Pearson interval lies inside [low, high]."""
    assert low <= lower(hits, trials, 0.975) and upper(hits, trials, 0.975) <= high, (
        f"{_show(hits, trials)}, claim {low:.4%} - {high:.4%}"
    )


def assert_at_most(hits: int, trials: int, claim: float) -> None:
    """The rate's one-sided 95% Clopper-Pearson upper bound is within the claim."""
    assert upper(hits, trials) <= claim, f"{_show(hits, trials)}, claim <= {claim:.4%}"


def assert_not_above(hits: int, trials: int, claim: float, slack: float = 0.15) -> None:
    """For a claim a method meets with no margin (a test exactly at its level): the rate is not
    significantly above the claim (one-sided 95%), and `trials` is enough to show a rate
    `slack` (relative) above it as such with 95% probability (the gap is 3.29 standard errors)."""
    above = claim * (1 + slack)
    needed = (3.29 / (above - claim)) ** 2 * above * (1 - above)
    assert trials >= needed, f"{trials} trials cannot tell {claim:.4%} from {above:.4%}: {needed:.0f} are needed"
    assert lower(hits, trials) <= claim, f"{_show(hits, trials)}, claim <= {claim:.4%}"
