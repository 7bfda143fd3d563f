"""CI gating: does a comparison show a regression beyond what the user tolerates?

`perflab compare ... --fail-on slower[:THRESHOLD]` exits with EXIT_REGRESSION (4) when any
comparison it printed has the verdict `slower` (its whole confidence interval is on the
slow side of 1) and its ratio is beyond THRESHOLD: for QPS a ratio below 1 - THRESHOLD, for
p95 latency (lower is better) above 1 + THRESHOLD. THRESHOLD is a percentage ("5%") or a
fraction ("0.05"); without it any `slower` verdict fails. `equivalent` and `faster` never
fail it; nor does `inconclusive` (too few repeats, or an interval too wide to tell):
`unjudged` counts those so the caller can say so, with the rounds that would resolve them.

    parse("slower:5%")  ->  Gate(verdict="slower", threshold=0.05)
"""

from __future__ import annotations

from dataclasses import dataclass

from perflab.analyze.compare import METRICS, Comparison
from perflab.analyze.verdict import INCONCLUSIVE, SLOWER
from perflab.errors import UsageError
from perflab.variants import variant_label

_HINT = "write --fail-on slower, or slower:5% (or slower:0.05) to tolerate up to a 5% regression"


@dataclass(frozen=True)
class Gate:
    verdict: str  # only "slower" for now
    threshold: float  # fraction: 0.05 tolerates a 5% regression

    def describe(self) -> str:
        return f"slower by more than {self.threshold * 100:g}%" if self.threshold else "slower"

    def fails(self, c: Comparison) -> bool:
        """True when `c` is a regression beyond the threshold."""
        if c.verdict != SLOWER or c.ratio is None:
            return False
        higher_is_better = METRICS.get(c.metric, True)
        return c.ratio < 1 - self.threshold if higher_is_better else c.ratio > 1 + self.threshold

    def failures(self, rows: list[Comparison]) -> list[Comparison]:
        return [c for c in rows if self.fails(c)]


def unjudged(rows: list[Comparison]) -> int:
    """Inconclusive comparisons: the gate cannot fail on them."""
    return sum(1 for c in rows if c.verdict == INCONCLUSIVE)


def parse(text: str) -> Gate:
    """`slower` or `slower:THRESHOLD` -> Gate; UsageError (exit 2) with a hint otherwise."""
    verdict, sep, value = text.strip().partition(":")
    if verdict != "slower":
        raise UsageError(f"--fail-on {text!r}: only `slower` can fail a run", _HINT)
    if not sep:
        return Gate(verdict, 0.0)
    try:
        threshold = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise UsageError(f"--fail-on {text!r}: {value!r} is not a threshold", _HINT) from None
    if not 0 <= threshold < 1:
        raise UsageError(f"--fail-on {text!r}: the threshold must be at least 0% and below 100%", _HINT)
    return Gate(verdict, threshold)


def message(gate: Gate, failed: list[Comparison]) -> str:
    """One line per failing comparison, for stderr."""
    lines = [f"{len(failed)} comparison(s) {gate.describe()}:"]
    for c in failed:
        where = f"{c.kind}{'/' + c.axis if c.axis else ''}"
        label = variant_label(c.variant)
        ci = f"[{c.ci_low:.3f}-{c.ci_high:.3f}]"
        lines.append(f"  {label} at {c.threads} threads ({c.metric}, {where}): ratio {c.ratio:.3f} {ci}")
    return "\n".join(lines)
