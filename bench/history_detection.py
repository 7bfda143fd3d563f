"""Change points in run histories: how soon a 3% step is found, how often nothing is found as something.

What: perflab's change points (perflab/history/changes.py: each run weighted by its own
uncertainty, a permutation test) and Apache Otava 0.8.0's E-divisive (window 50, p 0.001, its
defaults; and p 0.01), on the same synthetic histories, shaped like Otava's test patterns
(otava_test_data: constant, outlier, banding, variance change, step, regression and fix,
multiple changes) at a 2% CV of the runs' estimates:
  - each run has a level (the pattern), a run effect (CV 1.4%: what nights differ by beyond their
    repeats), and 3, 5 or 8 repeats of within-run CV 3.2% (so its own interval is wide or
    narrow); a run's estimate is the mean of its repeats; its CV over runs is about 2%;
  - false change points per 100 runs: the change points of the whole history (offline) that are
    not within 3 runs of a true change, and, replaying the history night by night (online), the
    distinct false positions ever reported on some night;
  - detection delay of a 3% step (down) after 60 stable runs: replaying night by night, the runs
    after the step until a change point within 3 runs of it is reported; goal: within 4 runs.
Otava runs in a virtual environment this script makes itself (under ~/.cache/perflab: Otava pins
numpy and scipy versions that clash with perflab's; it is never a dependency of perflab); with
--no-otava, or when it cannot be installed, only perflab's figures are printed.

Pure simulation, seeded and deterministic, CPU only (run it niced while benchmarks run).

Run: nice -n 19 python3 bench/history_detection.py              # ~10 minutes
     nice -n 19 python3 bench/history_detection.py --sims 20    # a smoke test
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import venv
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import final_json, say, table, upper

from perflab.history import changes

OTAVA = "apache-otava==0.8.0"
VENV = Path.home() / ".cache" / "perflab" / "otava-0.8.0"
RUN_CV, WITHIN_CV, REPEATS = 0.014, 0.032, (3, 5, 8)
NEAR = 3  # a change point within this many runs of a true change finds it
STEP_AT, STEP = 60, 0.03
OTAVA_SCRIPT = """
import json, sys
from otava.analysis import compute_change_points
out = []
for job in json.load(sys.stdin):
    cps, _ = compute_change_points(job["series"], window_len=job["window"], max_pvalue=job["p"])
    out.append(sorted(int(c.index) for c in cps))
json.dump(out, sys.stdout)
"""


# ----------------------------------------------------------------------------- histories


def levels(pattern: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, list[int]]:
    """(the true level of each run, the indices where it changes) of an Otava-like pattern."""
    flat = np.ones(n)
    if pattern == "constant" or pattern == "variance_change":
        return flat, []
    if pattern == "outlier":
        flat[n // 2] = 0.9  # one bad night, 10% low: not a change of level
        return flat, []
    if pattern == "banding":  # two bands 1.5% apart, each run in one at random
        return 1 + 0.015 * rng.integers(0, 2, n), []
    if pattern == "step":
        return np.where(np.arange(n) >= n * 6 // 10, 1 - STEP, 1.0), [n * 6 // 10]
    if pattern == "regression_fix":
        a, b = n // 2, n // 2 + 20
        return np.where((np.arange(n) >= a) & (np.arange(n) < b), 1 - STEP, 1.0), [a, b]
    if pattern == "multiple_changes":
        cuts, steps = [n // 4, n // 2, 3 * n // 4], [1.03, 1.0, 0.95]
        out = np.ones(n)
        for cut, level in zip(cuts, steps):
            out[cut:] = level
        return out, cuts
    raise ValueError(pattern)


def history(level: np.ndarray, rng: np.random.Generator, noisier_after: int | None = None) -> list[changes.Point]:
    """Runs of 3, 5 or 8 repeats around level x (1 + run effect); CVs doubled from `noisier_after`."""
    points = []
    for i, lv in enumerate(level):
        scale = 2.0 if noisier_after is not None and i >= noisier_after else 1.0
        mean = 100_000 * lv * (1 + rng.normal(0, RUN_CV * scale))
        values = list(mean * (1 + rng.normal(0, WITHIN_CV * scale, int(rng.choice(REPEATS)))))
        points.append(changes.Point(float(np.mean(values)), values, n=len(values)))
    return points


def make(pattern: str, n: int, seed: int) -> tuple[list[changes.Point], list[int]]:
    rng = np.random.default_rng(seed)
    level, true = levels(pattern, n, rng)
    return history(level, rng, n // 2 if pattern == "variance_change" else None), true


# ----------------------------------------------------------------------------- detectors


Detector = Callable[[list[list[changes.Point]]], list[list[int]]]


def perflab_detector(alpha: float, min_size: int = changes.MIN_SIZE) -> Detector:
    def detect(batch: list[list[changes.Point]]) -> list[list[int]]:
        return [[c.index for c in changes.detect(h, alpha, min_size).change_points] for h in batch]

    return detect


def otava_python() -> Path | None:
    """The venv's python with Otava installed (made on first use), or None when it cannot be."""
    python = VENV / "bin" / "python"
    check = [str(python), "-c", "import otava.analysis"]
    if python.exists() and subprocess.run(check, capture_output=True, check=False).returncode == 0:
        return python
    say(f"making {VENV} with {OTAVA} (once)")
    venv.create(VENV, with_pip=True, clear=True)
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", OTAVA], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        say(f"Otava could not be installed: {done.stderr.strip().splitlines()[-1:]}")
        return None
    return python


def otava_detector(python: Path, p: float, window: int = 50) -> Detector:
    def detect(batch: list[list[changes.Point]]) -> list[list[int]]:
        jobs = [{"series": [pt.mean for pt in h], "window": window, "p": p} for h in batch]
        done = subprocess.run(
            [str(python), "-c", OTAVA_SCRIPT], input=json.dumps(jobs), capture_output=True, text=True, check=True
        )
        return json.loads(done.stdout)

    return detect


# ----------------------------------------------------------------------------- measures


def false_points(found: list[int], true: list[int]) -> int:
    return sum(1 for k in found if all(abs(k - t) > NEAR for t in true))


def offline(detect: Detector, pattern: str, sims: int, n: int = 100) -> dict[str, float]:
    """False change points per 100 runs in whole histories, and the true changes found."""
    made = [make(pattern, n, 1000 + s) for s in range(sims)]
    found = detect([h for h, _ in made])
    false = sum(false_points(f, t) for f, (_, t) in zip(found, made))
    hits = sum(sum(1 for t in true if any(abs(k - t) <= NEAR for k in f)) for f, (_, true) in zip(found, made))
    changes_total = sum(len(t) for _, t in made)
    return {
        "false_per_100": false / sims * 100 / n,
        "false_per_100_upper": upper(min(false, sims * n), sims * n) * 100,
        "found": hits / changes_total if changes_total else None,
    }


def online_false(detect: Detector, sims: int, n: int = 100, first: int = 10) -> dict[str, float]:
    """Replaying constant histories night by night: distinct false positions ever reported, per 100 runs."""
    made = [make("constant", n, 5000 + s)[0] for s in range(sims)]
    nights = list(range(first, n + 1))
    found = detect([h[:k] for h in made for k in nights])
    ever = 0
    for s in range(sims):
        reported: set[int] = set()
        for k in range(len(nights)):
            reported |= set(found[s * len(nights) + k])
        ever += len(reported)
    return {"false_per_100": ever / sims * 100 / n, "false_per_100_upper": upper(min(ever, sims * n), sims * n) * 100}


def delay(detect: Detector, sims: int, horizon: int = 15) -> dict[str, float | None]:
    """Runs after a 3% step (after STEP_AT stable runs) until a change point near it is reported."""
    made = [make("step", STEP_AT * 10 // 6, 9000 + s)[0] for s in range(sims)]
    after = list(range(1, horizon + 1))
    found = detect([h[: STEP_AT + d] for h in made for d in after])
    delays = []
    for s in range(sims):
        hit = next(
            (d for i, d in enumerate(after) if any(abs(k - STEP_AT) <= NEAR for k in found[s * len(after) + i])), None
        )
        delays.append(hit)
    within = sum(1 for d in delays if d is not None and d <= 4)
    seen = [d for d in delays if d is not None]
    return {
        "median": statistics.median(seen) if len(seen) > sims / 2 else None,
        "within_4": within / sims,
        "within_4_low": 1 - upper(sims - within, sims),
        "never_in_horizon": (sims - len(seen)) / sims,
    }


def run(detectors: dict[str, Detector], sims: int) -> dict[str, dict]:
    patterns = ("constant", "outlier", "banding", "variance_change", "step", "regression_fix", "multiple_changes")
    out: dict[str, dict] = {}
    for name, detect in detectors.items():
        say(f"{name} ...")
        out[name] = {
            "delay_3pct": delay(detect, sims),
            "online_false": online_false(detect, max(sims // 4, 5)),
            **{p: offline(detect, p, sims) for p in patterns},
        }
    return out


def show(found: dict[str, dict]) -> None:
    rows = []
    for name, r in found.items():
        d = r["delay_3pct"]
        rows.append([
            name, d["median"], f"{d['within_4']:.0%} (>= {d['within_4_low']:.0%})",
            f"{r['online_false']['false_per_100']:.2f} (<= {r['online_false']['false_per_100_upper']:.2f})",
            *(f"{r[p]['false_per_100']:.2f}" for p in ("constant", "outlier", "banding", "variance_change")),
            *(f"{r[p]['found']:.0%}" for p in ("step", "regression_fix", "multiple_changes")),
        ])  # fmt: skip
    say(table(["method", "delay (median)", "found in 4 runs", "false/100 online", "const", "outlier", "banding",
               "var.change", "step found", "reg+fix found", "multiple found"], rows))  # fmt: skip
    say("false/100: false change points per 100 runs (offline: the whole history's; online: every position "
        "ever reported, night by night); goals: delay <= 4 runs, <= 1 false per 100 runs")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=200)
    parser.add_argument("--no-otava", action="store_true")
    args = parser.parse_args()
    detectors: dict[str, Detector] = {
        f"perflab p {p:g}{' (default)' if p == changes.ALPHA else ''}": perflab_detector(p)
        for p in sorted({0.05, 0.02, 0.01, 0.001, changes.ALPHA}, reverse=True)
    }
    python = None if args.no_otava else otava_python()
    if python is not None:
        detectors["otava 0.8.0 p 0.001 (defaults)"] = otava_detector(python, 0.001)
        detectors["otava 0.8.0 p 0.01"] = otava_detector(python, 0.01)
    found = run(detectors, args.sims)
    show(found)
    final_json({"sims": args.sims, "results": found})


if __name__ == "__main__":
    sys.exit(main())
