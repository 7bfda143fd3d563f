"""How often warm-up detection calls a steady cell unsettled, and how often it catches a ramp.

What: `perflab.analyze.steady.detect` on simulated per-second QPS series with known answers:
- false unsettled rate on white noise (CV 1%, 3%, 10%) and on a random walk (level steps of
  0.8% a second plus 1% noise: about 6% of wander over a minute, as seen on this VM), for
  series of 22 s (MSER-1), 70 s and 130 s (MSER-5), with the Clopper-Pearson 95% upper bound;
- detection rate of linear warm-up ramps from r x the steady level up to it, by ramp length
  (from one second to the whole series) and depth (r = 0.55 is the 24k -> 44k QPS ramp of
  issue 16; 0.9 a 10% ramp), with the bias the ramp puts into the window's mean.
The baseline is the same code at `--baseline-rev` (default: the commit before the fix), run
on the same series, so every rate is shown beside the old one.

Pure simulation, seeded and deterministic: it measures the method, not the machine, and can
run while anything else runs.

Run: python3 bench/warmup_detection.py                 # ~2 minutes
     python3 bench/warmup_detection.py --sims 200      # a smoke test
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path

from _common import upper

from perflab.analyze import steady

ROOT = Path(__file__).resolve().parent.parent
Detect = Callable[..., steady.SteadyState]


def points(values: list[float]) -> list[dict[str, float]]:
    return [{"t": float(i + 1), "qps": q} for i, q in enumerate(values)]


def ramp(n: int, length: int, depth: float, cv: float, rng: random.Random) -> list[float]:
    """n seconds: a linear ramp from depth x 100k up to 100k over `length` seconds, then flat."""
    level = 100_000.0
    return [rng.gauss(level * (depth + (1 - depth) * min((t + 1) / length, 1.0)), level * cv) for t in range(n)]


def steep_end(n: int, length: int, depth: float, cv: float, rng: random.Random) -> list[float]:
    """The shape of tests/data/workloads/ramp.lua: a pause of (1 - t/length) x each transaction,
    so throughput 1 / (2 - t/length): from half the steady level, steepest at the end."""
    level = 100_000.0
    return [rng.gauss(level / (2 - min((t + 1) / length, 1.0)), level * cv) for t in range(n)]


def walk(n: int, rng: random.Random, step: float = 0.008, noise: float = 0.01) -> list[float]:
    level, out = 100_000.0, []
    for _ in range(n):
        level += rng.gauss(0, 100_000 * step)
        out.append(rng.gauss(level, 100_000 * noise))
    return out


def window_bias(n: int, length: int, depth: float, start: int) -> float:
    """How far below the steady level the ramp pulls the window's mean."""
    return 1 - statistics.fmean(depth + (1 - depth) * min(t / length, 1.0) for t in range(start + 1, n + 1))


def steep_bias(n: int, length: int, start: int) -> float:
    return 1 - statistics.fmean(1 / (2 - min(t / length, 1.0)) for t in range(start + 1, n + 1))


def flagged(detect: Detect, make: Callable[[random.Random], list[float]], start: int, sims: int) -> int:
    return sum(not detect(points(make(random.Random(seed))), start).settled for seed in range(sims))


def baseline(rev: str) -> Detect:
    """`detect` as it was at `rev`, loaded from git into a module of its own."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:perflab/analyze/steady.py"], capture_output=True, text=True, check=True
    ).stdout
    module = types.ModuleType("steady_baseline")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:steady.py", "exec"), module.__dict__)  # noqa: S102 - our own file at a commit
    return module.detect


def false_alarms(new: Detect, old: Detect, sims: int) -> None:
    print(f"False unsettled rate ({sims} series each; 95% upper bound in brackets)")
    print(f"{'series':<42} {'new':>18} {'baseline':>18}")
    cases = [
        (f"white noise CV {cv:.0%}, {n} s, window at {w} s", n, w, lambda r, n=n, cv=cv: ramp(n, 1, 1.0, cv, r))
        for n, w in ((22, 2), (70, 10), (130, 10))
        for cv in (0.01, 0.03, 0.10)
    ]
    cases += [
        (f"random walk, {n} s, window at {w} s", n, w, lambda r, n=n: walk(n, r))
        for n, w in ((22, 2), (65, 5), (130, 10))
    ]
    for name, _, start, make in cases:
        k_new, k_old = flagged(new, make, start, sims), flagged(old, make, start, sims)
        print(
            f"{name:<42} {k_new / sims:>7.2%} [{upper(k_new, sims):>6.2%}] "
            f"{k_old / sims:>8.2%} [{upper(k_old, sims):>6.2%}]"
        )


def detection(new: Detect, old: Detect, sims: int) -> None:
    print(
        f"\nRamps caught (unsettled), {sims} series each, noise CV 1%: new / baseline "
        "(bias = the ramp's pull on the window mean)"
    )
    for n, start in ((22, 2), (70, 10)):
        lengths = sorted({max(1, round(n * f)) for f in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)})
        print(f"{n} s series (MSER-{'5' if n >= 50 else '1'}), window from {start} s; ramp length:")
        print(f"  {'depth':<8}" + "".join(f"{length:>14}" for length in lengths))
        for depth in (0.55, 0.8, 0.9, 0.97, "ramp.lua"):
            cells = []
            for length in lengths:
                shape = steep_end if depth == "ramp.lua" else ramp
                make = lambda r, n=n, length=length, depth=depth, shape=shape: shape(n, length, depth, 0.01, r)
                k_new, k_old = flagged(new, make, start, sims), flagged(old, make, start, sims)
                bias = window_bias(n, length, depth, start) if depth != "ramp.lua" else steep_bias(n, length, start)
                cells.append(f"{k_new / sims:>4.0%}/{k_old / sims:<4.0%}b{bias:>3.0%}")
            print(f"  {depth!s:<8}" + "".join(f"{c:>14}" for c in cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=2000, help="series per false-alarm case")
    parser.add_argument("--ramp-sims", type=int, default=200, help="series per ramp case")
    parser.add_argument("--baseline-rev", default="4b1d6cf", help="git revision of the baseline detector")
    args = parser.parse_args()
    old = baseline(args.baseline_rev)
    false_alarms(steady.detect, old, args.sims)
    detection(steady.detect, old, args.ramp_sims)
    return 0


if __name__ == "__main__":
    sys.exit(main())
