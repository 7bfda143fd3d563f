"""Does the host's steal time explain a cell's QPS within a round as well as the canary does?
(issue 12: what the host does to a cell; analysis of kept runs, no run of its own)

Why: the canary ([observe] host_speed) times a spin loop on every CPU beside every cell, and a
fitted slope on its speed takes the host's share out of the paired ratios. The kernel of a VM
also counts the CPU time the hypervisor gave other guests while ours wanted it (steal,
recorded as resources.steal_cpu_cores since 2026-11-26). If steal explains as much, it is a
free covariate; if it explains something else, the two together explain more.

What: for every kept results directory given (runs with [observe] host_speed and steal, e.g.
bench/fidelity.py --host-speed --results DIR), the settled cells' log QPS with the round's and
the variant's means taken out (a two-way within-round residual: what the host and the restart
did to a cell), against the same residuals of (a) steal_cpu_cores, (b) the canary's log speed,
(c) both. Printed: the cells, steal's mean and max, each covariate's correlation with the
residual, the slope(s), and the share of the residual variance each fit leaves; other_cpu_cores
of the cells.

Run: python3 bench/archive/steal_covariate.py DIR [DIR ...]
Exit status: 0 when it analysed, 1 on a real error (no usable cells).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: _common and the scripts imported below
import _common as C
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perflab.analyze import host_slope, host_speed, summary
from perflab.store.results import Results


def fit(y: np.ndarray, xs: list[np.ndarray]) -> tuple[list[float], float]:
    """Least-squares slopes of y on xs (no intercept: all are centred) and the share of y's
    sum of squares they leave."""
    x = np.column_stack(xs)
    slopes, *_ = np.linalg.lstsq(x, y, rcond=None)
    left = y - x @ slopes
    return [float(b) for b in slopes], float(left @ left / (y @ y))


def steal(cell: dict[str, Any]) -> float | None:
    return (cell.get("resources") or {}).get("steal_cpu_cores")


def analyse(path: Path) -> dict[str, Any]:
    results = Results(path)
    _, cells = summary.load(results)
    usable = [c for c in cells if host_speed.usable_cell(c) and steal(c) is not None and host_speed.log_speed(c) is not None
              and host_speed.metric_value(c, "qps")]  # fmt: skip
    # their log QPS and both figures with the round's and the variant's effects taken out by least
    # squares: the host's within-round fit (analyze/host_speed.py)
    found = host_slope._within(usable, "qps", [steal, host_speed.log_speed])
    if found is None or len(usable) < 6:
        raise C.BenchError(f"{path}: {len(usable)} settled cells with steal and the canary (need 6)")
    x, y, _ = found
    steal_raw = [steal(c) for c in usable]
    steal_w, canary = x[:, 0], x[:, 1]
    (b_steal,), left_steal = fit(y, [steal_w])
    (b_canary,), left_canary = fit(y, [canary])
    (b2_steal, b2_canary), left_both = fit(y, [steal_w, canary])
    return {
        "results": str(path),
        "cells": len(usable),
        "rounds": len({c["repeat"] for c in usable}),
        "steal_cores": {"mean": C.rnd(float(np.mean(steal_raw)), 3), "max": C.rnd(max(steal_raw), 3)},
        "residual_sd": C.rnd(float(np.std(y, ddof=1))),
        "corr_steal": C.rnd(float(np.corrcoef(y, steal_w)[0, 1])),
        "corr_canary": C.rnd(float(np.corrcoef(y, canary)[0, 1])),
        "corr_steal_canary": C.rnd(float(np.corrcoef(steal_w, canary)[0, 1])),
        "slope_steal": C.rnd(b_steal),
        "slope_canary": C.rnd(b_canary),
        "slopes_both": [C.rnd(b2_steal), C.rnd(b2_canary)],
        "left_steal": C.rnd(left_steal),
        "left_canary": C.rnd(left_canary),
        "left_both": C.rnd(left_both),
        "other_cpu_cores": C.other_cpu_cores(usable),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="kept results directories (with host_speed and steal)")
    args = parser.parse_args()

    def run() -> None:
        rows = [analyse(d) for d in args.dirs]
        C.say(C.table(
            ["results", "cells", "steal mean/max", "within sd", "r steal", "r canary", "r steal~canary",
             "left: steal", "canary", "both"],
            [[Path(r["results"]).name, r["cells"], f"{r['steal_cores']['mean']}/{r['steal_cores']['max']}",
              C.pct(r["residual_sd"]), r["corr_steal"], r["corr_canary"], r["corr_steal_canary"],
              C.pct(r["left_steal"], 0), C.pct(r["left_canary"], 0), C.pct(r["left_both"], 0)] for r in rows],
        ))  # fmt: skip
        for r in rows:
            C.say(f"{Path(r['results']).name}: other_cpu_cores {r['other_cpu_cores']}")
        C.final_json({"bench": "steal_covariate", "runs": rows})

    C.main_guard(run)


if __name__ == "__main__":
    main()
