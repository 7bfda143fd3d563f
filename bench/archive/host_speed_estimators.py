"""How good is the host-speed covariate, and which estimator should use it? From kept runs of
bench/fidelity.py --host-speed, no new measurement.

What, per run and per variant against the baseline `none` (over the rounds that hold both):
  - the covariate's quality within rounds: the sd of the per-round log-ratio d (QPS) and of the
    per-round difference in the canary's log speed c, their correlation, the within-round slope
    of d on c, and the sd of d left after it (what an adjusted paired interval is made of);
  - resampled fixed 19-round experiments (the 10-minute budget of bench/fidelity.py), RESAMPLES
    of them, judged at 95% by each estimator: the share called `slower` / `faster`. The A/A
    pair `same` is centred first (its d and c both), so every call is false; the slow variants
    are not, so their share is the power at the run's own effect. Estimators:
      unadjusted   paired t on d (n - 1 df)
      ols          d = delta + slope c + e, least squares, t on n - 2 df
      hc3          the same with HC3 standard errors: analyze/host_speed.paired, what perflab uses
      fixed:B      paired t on d - B c with a slope B fixed in advance (any fixed B keeps the
                   test valid when the variant does not move the canary; B decides the power)
      run-slope    fixed at the run's pooled within-round slope (all variants, round effects
                   removed, analyze/host_slope.within_rounds): from more data than the
                   comparison's own rounds, but the same run
      other-run    fixed at the pooled within-round slope of the other run(s) given: a slope
                   measured before and elsewhere, as `perflab calibrate` gives a run with
                   [observe] host_speed (what perflab uses when such a calibration matches)
Why: a slope fitted on the same 19 rounds that it adjusts is where a covariate can inflate
false verdicts (bench/fidelity.py's first estimators called 12-14% of resampled A/A pairs
different); a fixed or external slope cannot, and the runs say what each costs in power.

Run: python3 bench/archive/host_speed_estimators.py DIR [DIR ...]     # CPU only, seconds a run
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: _common and the scripts imported below
import _common as C
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perflab.analyze import host_slope, host_speed, stats

BASE, SAME = "none", "same"
ROUNDS = 19  # bench/fidelity.py: a 10-minute two-variant experiment of 15.5 s cells
RESAMPLES = 4000
FIXED = (1.0, 0.5)


def logs_by_round(doc: dict[str, Any]) -> dict[str, dict[int, tuple[float, float]]]:
    """variant -> round -> (log QPS, log canary speed) of its settled cells with a figure."""
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for c in doc["cells"]:
        qps, x = (c.get("summary") or {}).get("qps"), host_speed.log_speed(c)
        if c["status"] == "ok" and c.get("settled") not in (False, 0) and qps and x is not None:
            out.setdefault(c["variant"]["effect"], {})[c["repeat"]] = (math.log(qps), x)
    return out


def run_slope(doc: dict[str, Any]) -> float:
    """log QPS = variant + round + slope x log speed, least squares over every cell (perflab's own)."""
    found = host_slope.within_rounds(doc["cells"], "qps")
    if found is None:
        raise C.BenchError("too few cells with a canary figure")
    return float(found["slope"])


def decide(t: float, df: int) -> int:
    """-1 slower, +1 faster, 0 neither, at 95% two-sided."""
    crit = stats.t_quantile(0.975, df)
    return -1 if t < -crit else 1 if t > crit else 0


def paired_t(v: np.ndarray) -> int:
    sd = float(v.std(ddof=1))
    return 0 if sd == 0 else decide(float(v.mean()) / (sd / math.sqrt(len(v))), len(v) - 1)


def regression(d: np.ndarray, c: np.ndarray, hc3: bool) -> int:
    found = host_speed.regress(d, c, hc3)
    if found is None:
        return paired_t(d)
    delta, se2, _ = found
    return 0 if se2 <= 0 else decide(delta / math.sqrt(se2), len(d) - 2)


def estimators(slope: float, other: float | None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "unadjusted": lambda d, c: paired_t(d),
        "ols": lambda d, c: regression(d, c, False),
        "hc3": lambda d, c: regression(d, c, True),
    }
    for b in FIXED:
        found[f"fixed:{b:g}"] = lambda d, c, b=b: paired_t(d - b * c)
    found["run-slope"] = lambda d, c: paired_t(d - slope * c)
    if other is not None:
        found["other-run"] = lambda d, c: paired_t(d - other * c)
    return found


def one_run(path: str, doc: dict[str, Any], other: float | None) -> dict[str, Any]:
    by = logs_by_round(doc)
    slope = run_slope(doc)
    out: dict[str, Any] = {"run": path, "run_slope": C.rnd(slope, 3), "other_run_slope": C.rnd(other, 3),
                           "variants": {}}  # fmt: skip
    for name in sorted(by, key=lambda n: (n != SAME, n)):
        if name == BASE:
            continue
        rounds = sorted(set(by[BASE]) & set(by[name]))
        d = np.array([by[name][r][0] - by[BASE][r][0] for r in rounds])
        c = np.array([by[name][r][1] - by[BASE][r][1] for r in rounds])
        if name == SAME:  # the null made exact for both
            d, c = d - d.mean(), c - c.mean()
        cc = c - c.mean()
        within = float(cc @ (d - d.mean()) / (cc @ cc))
        left = d - within * c
        row: dict[str, Any] = {
            "rounds": len(rounds), "sd_d": C.rnd(float(d.std(ddof=1))), "sd_c": C.rnd(float(c.std(ddof=1))),
            "r": C.rnd(float(np.corrcoef(d, c)[0, 1]), 3), "slope_within": C.rnd(within, 3),
            "sd_d_adjusted": C.rnd(float(left.std(ddof=2))), "calls": {},
        }  # fmt: skip
        for label, judge in estimators(slope, other).items():
            rng = random.Random(7)
            tally = {-1: 0, 0: 0, 1: 0}
            for _ in range(RESAMPLES):
                pick = np.array([rng.randrange(len(d)) for _ in range(ROUNDS)])
                tally[judge(d[pick], c[pick])] += 1
            row["calls"][label] = {"slower": C.rnd(tally[-1] / RESAMPLES), "faster": C.rnd(tally[1] / RESAMPLES)}
        out["variants"][name] = row
    return out


def show(found: dict[str, Any]) -> None:
    C.say(f"{found['run']}: the run's pooled within-round slope {found['run_slope']}; the other runs' "
          f"{found['other_run_slope']}")
    rows = [[name, v["rounds"], C.pct(v["sd_d"], 1), C.pct(v["sd_c"], 1), v["r"], v["slope_within"],
             C.pct(v["sd_d_adjusted"], 1)] for name, v in found["variants"].items()]  # fmt: skip
    C.say(C.table(["variant", "rounds", "sd d", "sd c", "r(d, c)", "slope within", "sd d adjusted"], rows))
    labels = list(next(iter(found["variants"].values()))["calls"])
    rows = [[name] + [f"{C.pct(v['calls'][k]['slower'], 1)} / {C.pct(v['calls'][k]['faster'], 1)}" for k in labels]
            for name, v in found["variants"].items()]  # fmt: skip
    C.say(f"resampled {ROUNDS}-round experiments called slower / faster (A/A `{SAME}` centred: all false):")
    C.say(C.table(["variant", *labels], rows) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="DIR", help="results directories of bench/fidelity.py --host-speed")
    args = parser.parse_args()

    def run() -> None:
        docs = [json.loads(C.cli("export", path)) for path in args.runs]
        slopes = [run_slope(doc) for doc in docs]
        found = []
        for i, (path, doc) in enumerate(zip(args.runs, docs)):
            others = slopes[:i] + slopes[i + 1 :]
            found.append(one_run(path, doc, statistics.fmean(others) if others else None))
        for f in found:
            show(f)
        C.final_json({"bench": "host_speed_estimators", "rounds": ROUNDS, "resamples": RESAMPLES, "runs": found})

    C.main_guard(run)


if __name__ == "__main__":
    main()
