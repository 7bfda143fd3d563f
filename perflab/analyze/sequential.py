"""Group-sequential verdicts: adaptive rounds that stop once a comparison is resolved, without
inflating false verdicts (`[experiment] repeats = "auto"`, `stop = "verdict"`).

Input: after each round k from min_repeats on (a *look*), the ratio estimate of every variant
against its baseline (analyze/ratio.py: paired over the rounds that hold both, else Welch).
Output: one `Track` per comparison: `faster`, `slower` or `equivalent` once a test crossed its
boundary (and the round it did), else `inconclusive`. A comparison that has a verdict stops
(its variant runs no more rounds); the run stops when all have, or at max_repeats.

Why boundaries: testing a growing sample after every round at the fixed 5% level and stopping
at the first "significant" look calls identical variants different far more often than 5%
(paired t tests at rounds 3 to 10: 17%). Alpha spending (Lan and DeMets 1983) spends the 5%
over the looks: by the information fraction t = n / max_repeats (n: the rounds the estimate
holds; 1 at max_repeats), at most a(t) = 2 - 2 Phi(z(1 - a/2) / sqrt(t)) of a one-sided level
a has been spent, the O'Brien-Fleming-type function: almost nothing early (t = 0.3 of a = 2.5%:
0.004%), nearly all of it at t = 1.

The boundary of each look is the one whose first-crossing probability under "no difference" is
the increment of a(t). With a known variance that is a z boundary (the textbook recursion); here
the variance is estimated from 3-20 rounds, and the z boundaries applied to t statistics as
nominal p-values (Jennison and Turnbull's "significance level approach") let 5.8% through
instead of 5% at rounds 3 to 10. So the boundaries are those of the one-sample t statistic
itself, found by Monte Carlo: PATHS simulated normal sequences (drawn look by look as block means
and sums of squares, seeded: the same boundaries on every run), the boundary at each look the
value that the allowed number of surviving paths crosses. Each boundary is turned into a nominal
one-sided p-value at its look's n - 1 degrees of freedom, which the estimate's own p-value must
reach (Welch estimates, with other degrees of freedom, use the same nominal level). The paths
choose the boundaries they are counted on, which lets about 2% (relative) more through on fresh
data; 97% of the level is spent (SPEND). tests/unit/test_sequential.py checks the boundaries
against the published z ones for many rounds, and the level by fresh simulation;
bench/sequential.py gives the false-verdict rates of whole runs.

Tests at each look, each at the Holm level a_i = alpha / m (m: the comparisons whose null
hypothesis of that kind is not yet rejected), with the boundaries of the one-sided level a_i / 2:
- difference (faster / slower): the one-sided p of the observed direction <= nominal level;
- equivalence (two one-sided tests against 1 +/- margin): both one-sided p <= nominal level,
  each at a_i / 2 as in analyze/verdict.py (a (1 - a_i) interval inside the margin).
Holm across comparisons is the sequentially rejective graphical procedure for group-sequential
designs (Maurer and Bretz 2013): once a hypothesis is rejected its level goes to the others,
whose boundaries are recomputed at the larger level, and the look is tested again. A resolved
difference wins over equivalence, as in verdict.py. Stopping a comparison for one reason only
lowers the chance of rejecting the other test (a non-binding futility stop), so the error
rates hold. At max_repeats, t = 1 and all of alpha is spent; a run cut short by time_budget
keeps its planned fractions (it spends less than alpha: conservative).

    tracks = replay([(base_by_round, variant_by_round)], Design(max_rounds=10), rounds=6)
    tracks[0].verdict, tracks[0].round  -> ("slower", 5)
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special

from perflab.analyze import host_speed, rate, ratio, stats, summary
from perflab.analyze.verdict import EQUIVALENT, FASTER, INCONCLUSIVE, MARGIN, SLOWER, bounds

STOP_VERDICT, STOP_TARGET = "verdict", "target_ci"
SEED = 20261122  # the boundaries' simulated paths: the same boundaries on every run and machine
PATHS = 200_000  # per boundary computation: the one-sided level is met within about +/- 0.05%
# Boundaries picked from the same paths they are tested on let about 2% (relative) more
# through on fresh paths (2.55% for 2.5%, 3-10 rounds): spend 97% of the level to keep it.
SPEND = 0.97
CACHED_STATES = 16  # simulated paths kept for the looks to come (3.4 MB each)


OBRIEN_FLEMING, POCOCK = "obrien-fleming", "pocock"


def spent(t: float, a: float, spending: str = OBRIEN_FLEMING) -> float:
    """One-sided alpha spent by information fraction t: Lan-DeMets O'Brien-Fleming type (almost
    nothing early), or Pocock type, a ln(1 + (e - 1) t), which spends evenly enough over the
    looks that a large effect stops at the first (docs/methodology.md#stopping-on-a-verdict-by-default)."""
    if t >= 1:
        return a
    if spending == POCOCK:
        return a * math.log1p((math.e - 1) * t)
    return float(2 * special.ndtr(-special.ndtri(1 - a / 2) / math.sqrt(t)))


@dataclass(frozen=True)
class _Paths:
    """Simulated one-sample t processes after some looks: the mean and the sum of squares
    about it of every path, which paths have not crossed yet, how many did, their levels."""

    mean: np.ndarray
    squares: np.ndarray
    alive: np.ndarray
    crossed: int
    levels: tuple[float, ...]


_CACHE: OrderedDict[tuple, _Paths] = OrderedDict()
_LEVELS: dict[tuple, tuple[float, ...]] = {}  # every look sequence computed (a few bytes each)


def levels(
    ns: tuple[int, ...], fractions: tuple[float, ...], a: float, spending: str = OBRIEN_FLEMING
) -> tuple[float, ...]:
    """Nominal one-sided p-values (Student t, n - 1 degrees of freedom) that looks at `ns`
    rounds (increasing, >= 2) and information `fractions` must reach, spending level `a`:
    the boundaries of the one-sample t statistic, by Monte Carlo (module docstring)."""
    if (ns, fractions, a, spending) in _LEVELS:
        return _LEVELS[(ns, fractions, a, spending)]
    done = len(ns)
    while done and (ns[:done], fractions[:done], a, spending) not in _CACHE:
        done -= 1
    state = _CACHE[(ns[:done], fractions[:done], a, spending)] if done else None
    for j in range(done, len(ns)):
        state = _advance(state, ns[j - 1] if j else 0, ns[j], fractions[j], a, j, spending)
        _CACHE[(ns[: j + 1], fractions[: j + 1], a, spending)] = state
        _LEVELS[(ns[: j + 1], fractions[: j + 1], a, spending)] = state.levels
        while len(_CACHE) > CACHED_STATES:
            _CACHE.popitem(last=False)
    assert state is not None
    return state.levels


def _advance(state: _Paths | None, before: int, n: int, t: float, a: float, j: int, spending: str) -> _Paths:
    """The paths after one more look at n rounds: a block of n - before normal values each
    (drawn as its mean and sum of squares, the same draws for look j whatever came before)."""
    rng = np.random.default_rng([SEED, j])
    m = n - before
    block_mean = rng.standard_normal(PATHS) / math.sqrt(m)
    block_squares = rng.chisquare(m - 1, PATHS) if m > 1 else np.zeros(PATHS)
    found: tuple[float, ...]
    if state is None:
        mean, squares, alive, crossed, found = block_mean, block_squares, np.ones(PATHS, bool), 0, ()
    else:
        mean = (before * state.mean + m * block_mean) / n
        squares = state.squares + block_squares + before * m / n * (state.mean - block_mean) ** 2
        alive, crossed, found = state.alive, state.crossed, state.levels
    tstat = mean / np.sqrt(np.maximum(squares, 1e-300) / (n - 1) / n)
    allowed = int(SPEND * spent(t, a, spending) * PATHS) - crossed  # unspent alpha carries to the next look
    ranked = np.sort(tstat[alive])
    if allowed <= 0 or not len(ranked):
        return _Paths(mean, squares, alive, crossed, (*found, 0.0))
    b = float(ranked[-min(allowed, len(ranked))])
    hit = alive & (tstat >= b)
    return _Paths(mean, squares, alive & ~hit, crossed + int(hit.sum()), (*found, float(special.stdtr(n - 1, -b))))


@dataclass(frozen=True)
class Design:
    alpha: float = round(1 - stats.LEVEL, 12)
    margin: float = MARGIN
    max_rounds: int = 10
    min_rounds: int = 3
    higher_is_better: bool = True
    spending: str = OBRIEN_FLEMING


@dataclass
class Track:
    """One comparison's course through the looks."""

    verdict: str = INCONCLUSIVE
    round: int | None = None  # the look at which it stopped
    ns: list[int] = field(default_factory=list)  # rounds the estimate held at each of its looks
    fractions: list[float] = field(default_factory=list)  # information fractions of its looks

    def level(self, a: float, spending: str = OBRIEN_FLEMING) -> float:
        """The nominal one-sided level of its latest look, spending one-sided level `a`."""
        return levels(tuple(self.ns), tuple(self.fractions), a, spending)[-1]

    @property
    def open(self) -> bool:
        return self.verdict == INCONCLUSIVE


def one_sided(est: ratio.Estimate, margin: float) -> tuple[float, float, float] | None:
    """(p of the observed direction vs ratio 1, p of ratio <= 1 - margin, p of >= 1 + margin)."""
    if not est.has_interval or est.log_ratio is None:
        return None
    d = est.log_ratio
    se, df = est.se_df()
    low, high = bounds(margin)
    if se == 0:
        return (0.0 if d != 0 else 0.5, 0.0 if d > low else 1.0, 0.0 if d < high else 1.0)
    found = special.stdtr(df, -np.array([abs(d), d - low, high - d]) / se)
    return float(found[0]), float(found[1]), float(found[2])


def look(tracks: list[Track], estimates: list[ratio.Estimate], k: int, design: Design) -> None:
    """Test every open comparison with new information at look (round) k; stop those resolved."""
    final = k >= design.max_rounds
    fresh: dict[int, tuple[float, float, float]] = {}
    for i, (track, est) in enumerate(zip(tracks, estimates)):
        ps = one_sided(est, design.margin)
        t = 1.0 if final else min(1.0, est.n / design.max_rounds)
        if not track.open or ps is None or (track.ns and est.n <= track.ns[-1]):
            continue
        track.ns.append(est.n)
        track.fractions.append(t)
        fresh[i] = ps
    diff_done = [not t.open and t.verdict != EQUIVALENT for t in tracks]
    for i in _step_down(tracks, fresh, diff_done, design, lambda ps: ps[0]):
        better = (estimates[i].log_ratio or 0) > 0
        tracks[i].verdict = FASTER if better == design.higher_is_better else SLOWER
        tracks[i].round = k
    equiv_done = [t.verdict == EQUIVALENT for t in tracks]
    fresh = {i: ps for i, ps in fresh.items() if tracks[i].open}
    for i in _step_down(tracks, fresh, equiv_done, design, lambda ps: max(ps[1], ps[2])):
        tracks[i].verdict, tracks[i].round = EQUIVALENT, k


def _step_down(tracks: list[Track], fresh: dict[int, tuple], rejected: list[bool], design: Design, p_of) -> list[int]:
    """Holm over the family (graphical form): test at alpha / m, reject, give the level to
    the rest, test again; `rejected` marks the hypotheses rejected at earlier looks."""
    rejected = list(rejected)
    found: list[int] = []
    while True:
        m = max(1, rejected.count(False))
        a = design.alpha / m / 2  # one-sided: each side of the difference, each TOST test
        now = [i for i, ps in fresh.items() if not rejected[i] and p_of(ps) <= tracks[i].level(a, design.spending)]
        if not now:
            return found
        for i in now:
            rejected[i] = True
        found += now


def cut(values: dict[int, float], k: int) -> dict[int, float]:
    """The values of rounds 1..k."""
    return {r: v for r, v in values.items() if r <= k}


def replay(pairs: list[tuple[dict[int, float], dict[int, float]]], design: Design, rounds: int) -> list[Track]:
    """Every look from min_rounds to `rounds` over (baseline, variant) values keyed by round:
    the same decisions the run made, from its stored cells alone."""
    return looks(lambda k: [ratio.estimate(cut(b, k), cut(o, k))[0] for b, o in pairs], len(pairs), design, rounds)


def looks(estimates_at: Callable[[int], list[ratio.Estimate]], count: int, design: Design, rounds: int) -> list[Track]:
    """The looks from min_rounds to `rounds` of `count` comparisons, whose estimates on rounds
    1..k `estimates_at(k)` gives."""
    tracks = [Track() for _ in range(count)]
    for k in range(design.min_rounds, rounds + 1):
        if not any(t.open for t in tracks):
            break
        look(tracks, estimates_at(k), k, design)
    return tracks


@dataclass(frozen=True)
class Monitored:
    """One variant against its thread count's baseline, through the looks."""

    variant: str  # variant key (summary.Group.key)
    threads: int
    baseline: str  # the baseline's variant key
    track: Track


def monitor(
    cells: list[dict[str, Any]],
    baseline: dict[str, str],
    axes: dict[str, list[str]],
    design: Design,
    rounds: int,
    slope: dict[str, Any] | None = None,
    fixed_rate: bool = False,
) -> list[Monitored]:
    """Every variant's QPS against `baseline` at its thread count, replayed over the looks from
    min_rounds to `rounds` on the stored cells: the decisions the run made (or makes now).
    `slope`: the run's calibrated host-speed slope (host_speed.calibrated_slope). `fixed_rate`
    (analyze/rate.py): p99 instead of QPS, against the baseline at the variant's own rate."""
    metric = rate.P99 if fixed_rate else "qps"
    found = summary.groups(cells, baseline, axes, fixed_rate=fixed_rate)
    held = rate.rate_axis(axes, cells) if fixed_rate else None

    def at(g: summary.Group) -> tuple[int, str | None]:
        return g.threads, g.variant.get(held) if held else None

    bases = {at(g): g for g in found if g.baseline}
    pairs = [(bases[at(g)], g) for g in found if not g.baseline and at(g) in bases]

    def estimates_at(k: int) -> list[ratio.Estimate]:
        """As analyze/compare.py estimates them (host speed included) with rounds 1..k only."""
        early = [c for c in cells if (c.get("repeat") or 0) <= k]
        fit = host_speed.fit(early, metric, slope)
        out = []
        for b, g in pairs:
            cut_b, cut_g = (
                dataclasses.replace(side, cells=[c for c in side.cells if (c.get("repeat") or 0) <= k])
                for side in (b, g)
            )
            out.append(host_speed.estimate(cut_b, cut_g, metric, fit).chosen)
        return out

    judged_as = dataclasses.replace(design, higher_is_better=not fixed_rate)  # a latency: lower is faster
    tracks = looks(estimates_at, len(pairs), judged_as, rounds)
    return [Monitored(g.key, g.threads, b.key, t) for (b, g), t in zip(pairs, tracks)]


def pending(found: list[Monitored]) -> set[tuple[str, int]]:
    """The (variant key, threads) groups the next round runs: the open comparisons' variants
    and, at their thread counts, the baseline."""
    out = set()
    for m in found:
        if m.track.open:
            out |= {(m.variant, m.threads), (m.baseline, m.threads)}
    return out


def design_meta(design: Design) -> dict[str, Any]:
    """meta.adaptive's record of the design, from which a report replays the looks."""
    return {"alpha": design.alpha, "equivalence_margin": design.margin, "spending": design.spending}


def design_of(adaptive: dict[str, Any]) -> Design:
    """The design a run's meta.adaptive records."""
    return Design(
        alpha=float(adaptive.get("alpha", 1 - stats.LEVEL)),
        margin=float(adaptive.get("equivalence_margin", MARGIN)),
        max_rounds=int(adaptive["max_repeats"]),
        min_rounds=int(adaptive["min_repeats"]),
        spending=str(adaptive.get("spending") or OBRIEN_FLEMING),  # runs before 2026-11-27: O'Brien-Fleming
    )
