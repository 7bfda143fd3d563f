"""What a run will do, before it starts: the matrix size and the time estimate.

Printed by `perflab run` (and `run --check`) as one line, or as JSON with `--check --format json`:

    allocators: 5 allocator x 3 sort_buffer x 3 thread counts x 3 repeats = 135 cells, estimated 1h05m

    {"experiment": "allocators", "file": "examples/allocators.toml", "axes": {"allocator": [...]},
     "threads": [1, 2, 4], "repeats": 3, "cells": 135, "estimated_s": 3912.5, "adaptive": null,
     "design": "sequential", "design_reason": "design = \"sequential\" in the file", "slice_s": null}

A file without `repeats` stops on verdicts: its `adaptive` says so, with the budget (`budget_s`,
10 minutes unless the file sets `budget`) and the rounds that budget holds (`max_repeats`).

The estimate comes from the caller (run/scheduler.estimate_seconds), so this module stays on
the report side of the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.markup import escape

from perflab.spec.matrix import Experiment
from perflab.units import format_duration

Estimate = Callable[..., float]  # estimate(exp) or estimate(exp, cells) -> seconds


def plan(
    exp: Experiment,
    cells: int,
    estimate: Estimate,
    builds: dict[str, str] | None = None,
    max_rounds: int | None = None,
) -> dict[str, Any]:
    """The matrix of `exp` (with `cells` cells known in advance) and its estimated wall time;
    `builds`: what each [builds] entry needs before the first cell (cached, or to build);
    `max_rounds`: the most rounds an adaptive run plans for (run/adaptive.max_rounds)."""
    file, e = exp.file, exp.file.experiment
    out: dict[str, Any] = {
        "experiment": exp.name,
        "file": exp.source,
        "axes": {axis: list(labels) for axis, labels in file.variants.items()},
        "threads": list(file.workload.threads),
        "repeats": e.repeats,
        "cells": cells,
        "estimated_s": round(estimate(exp), 1),
        "adaptive": None,
        "builds": builds or {},
        "design": e.design,
        "design_reason": exp.design_reason,
        "slice_s": e.slice if e.interleaved else None,
    }
    if e.adaptive:
        rounds = max_rounds or e.max_repeats
        most = cells // e.min_repeats * rounds
        out["adaptive"] = {
            "min_repeats": e.min_repeats,
            "max_repeats": rounds,
            "target_ci": e.target_ci,
            "stop": e.stop_rule,
            "spending": e.spending,
            "time_budget_s": e.budget_s,
            "budget_s": e.budget_s,
            "max_cells": most,
            "max_estimated_s": round(estimate(exp, most), 1),
        }
    return out


def line(p: dict[str, Any]) -> str:
    """The plan as the one line `perflab run` prints first (rich markup)."""
    axes = " x ".join(f"{len(v)} {a}" for a, v in p["axes"].items()) or "1 variant"
    adaptive = p["adaptive"]
    most = ""
    if adaptive:
        until = (
            "until each comparison has a verdict"
            if adaptive.get("stop") == "verdict"
            else f"target ±{adaptive['target_ci']:.1%}"
        )
        repeats = f"{adaptive['min_repeats']}+ repeats (auto, {until})"
        most = f", up to {adaptive['max_cells']} cells"
        if adaptive["time_budget_s"]:
            most += f" within a budget of {format_duration(adaptive['time_budget_s'])}"
        else:
            most += f" ({format_duration(adaptive['max_estimated_s'])})"
    else:
        repeats = f"{p['repeats']} repeats"
    text = (
        f"[bold]{p['experiment']}[/]: {axes} x {len(p['threads'])} thread counts x {repeats} "
        f"= [bold]{p['cells']} cells[/], estimated {format_duration(p['estimated_s'])}{most}"
    )
    if p.get("design") == "interleaved":
        text += f"; each round's servers at once, clients in {p['slice_s']:g} s turns (design = interleaved)"
    if p.get("design_reason") and not p["design_reason"].startswith("design = "):
        text += f"\n  design: {escape(p['design_reason'])}"  # "[observe] pmp" is not markup
    for name, status in p.get("builds", {}).items():
        text += f"\n  build {name}: {status}"
    return text
