"""repeats = "auto": rounds until every group's CI is tight, or (stop = "verdict") until every
comparison has crossed a sequential boundary (analyze/sequential.py), within max_repeats and the
time budget. The Scheduler's rounds (run/scheduler.py) take this loop from `AdaptiveRounds`;
`max_rounds` is what an adaptive run plans for, and the meta.adaptive it records is made here.

    class Scheduler(AdaptiveRounds): ...     # self.run_adaptive(datasets, workdir, done)
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from perflab.analyze import host_speed, sequential
from perflab.analyze.rate import fixed_rate
from perflab.analyze.summary import adaptive_targets
from perflab.run.datasets import Datasets
from perflab.spec.matrix import Cell, Experiment
from perflab.spec.schema import ExperimentSection
from perflab.spec.fields import MAX_REPEATS
from perflab.spec.loading import cell_estimate, round_seconds
from perflab.store.results import Results
from perflab.units import format_duration


class AdaptiveRounds:
    """The adaptive loop of a Scheduler, which runs the cells (`_run_some`, `retries`)."""

    exp: Experiment
    results: Results

    def _run_some(
        self, cells: list[Cell], datasets: Datasets | None, workdir: Path, total: int
    ) -> list[dict[str, Any]]:
        raise NotImplementedError

    def retries(self, repeat: int, done: list[dict[str, Any]]) -> list[Cell]:
        raise NotImplementedError

    def run_adaptive(self, datasets: Datasets | None, workdir: Path, done: list[dict[str, Any]]) -> None:
        """repeats = "auto": rounds (randomized blocks, as Experiment.round orders them); after
        min_repeats rounds, a round repeats only the (variant, threads) groups whose 95% CI is
        still wider than target_ci (stop = "verdict": the variants whose comparison with the
        baseline has not crossed a sequential boundary, analyze/sequential.py, and their
        baseline), until none is left, max_repeats is reached or the next round would overrun time_budget
        (counted from this invocation's start). Cells already in `done` (a resumed run) are
        not run again; the rounds they belong to are replayed from the stored results."""
        spec = self.exp.file.experiment
        most, budget = max_rounds(self.exp), spec.budget_s
        started, ran = time.monotonic(), 0
        have = {row["key"] for row in done}
        pending: set[tuple[str, int]] | None = None  # None: every group
        stop = "every comparison has a verdict" if spec.stop_rule == sequential.STOP_VERDICT else "all targets met"
        repeat = 0
        while pending is None or pending:
            if repeat == most:
                by_budget = budget and "max_repeats" not in spec.model_fields_set
                stop = (
                    f"the {most} rounds the budget ({format_duration(budget or 0)}) holds are done"
                    if by_budget
                    else f"max_repeats ({most}) reached"
                )
                break
            cells = self._round(repeat + 1, pending, have, done)
            spent = time.monotonic() - started
            per_cell = spent / ran if ran else cell_estimate(self.exp.file)
            if budget and repeat >= spec.min_repeats and spent + per_cell * len(cells) > budget:
                stop = f"budget ({format_duration(budget)}) would be exceeded by the next round"
                break
            repeat += 1
            before = len(done)
            done += self._run_some(cells, datasets, workdir, len(done) + len(cells))
            again = self.retries(repeat, done)
            done += self._run_some(again, datasets, workdir, len(done) + len(again))
            ran += len(done) - before
            if repeat >= spec.min_repeats:
                pending, meta = self._look(done, repeat, None)
                self.results.set_meta(adaptive=meta)
        self.results.set_meta(adaptive=self._look(done, repeat, stop)[1])

    def _look(self, done: list[dict[str, Any]], repeat: int, stop: str | None) -> tuple[set, dict[str, Any]]:
        """After round `repeat`: the groups the next round runs, and meta.adaptive."""
        spec = self.exp.file.experiment
        most = max_rounds(self.exp)
        if spec.stop_rule == sequential.STOP_VERDICT:
            found = self._monitor(done, repeat)
            return sequential.pending(found), _sequential_meta(spec, self._design(), repeat, stop, found, most)
        targets = adaptive_targets(done, spec.target_ci)
        return {key for key, t in targets.items() if not t["met"]}, _adaptive_meta(spec, repeat, stop, targets, most)

    def _design(self) -> sequential.Design:
        spec = self.exp.file.experiment
        return sequential.Design(
            margin=spec.equivalence_margin,
            max_rounds=max_rounds(self.exp),
            min_rounds=spec.min_repeats,
            spending=spec.spending,
        )

    def _monitor(self, done: list[dict[str, Any]], repeat: int) -> list[sequential.Monitored]:
        axes = {axis: list(labels) for axis, labels in self.exp.file.variants.items()}
        baseline = {axis: labels[0] for axis, labels in axes.items()}
        meta = self.results.meta()
        slope, fixed = host_speed.calibrated_slope(meta), fixed_rate(meta)  # at a fixed rate: p99 watched
        return sequential.monitor(done, baseline, axes, self._design(), repeat, slope, fixed)

    def _round(
        self, repeat: int, pending: set[tuple[str, int]] | None, have: set[str], done: list[dict[str, Any]]
    ) -> list[Cell]:
        """The cells of round `repeat` not yet stored, numbered after the last stored one."""
        start = max((row["id"] for row in done), default=-1) + 1
        cells = [c for c in self.exp.round(repeat, only=pending) if c.key not in have]
        return [dataclasses.replace(c, order=start + i) for i, c in enumerate(cells)]


def max_rounds(exp: Experiment) -> int:
    """The most rounds an adaptive run plans for (its looks' information fractions): max_repeats
    when the file sets it or no budget applies; else the rounds the budget holds at the
    estimated round time (spec/loading.round_seconds), within [min_repeats, MAX_REPEATS]."""
    e = exp.file.experiment
    if e.budget_s is None or "max_repeats" in e.model_fields_set:
        return e.max_repeats
    return max(e.min_repeats, min(MAX_REPEATS, int(e.budget_s // round_seconds(exp.file))))


def _adaptive_meta(
    spec: ExperimentSection, rounds: int, stop: str | None, targets: dict[tuple[str, int], dict[str, Any]], most: int
) -> dict[str, Any]:
    return {
        "target_ci": spec.target_ci,
        **_rounds_meta(spec, rounds, stop, most),
        "groups": [{"variant": key, "threads": threads, **target} for (key, threads), target in targets.items()],
    }


def _rounds_meta(spec: ExperimentSection, rounds: int, stop: str | None, most: int) -> dict[str, Any]:
    """What every adaptive run's meta.adaptive says of its rounds, whichever rule stopped it."""
    return {
        "min_repeats": spec.min_repeats,
        "max_repeats": most,
        "time_budget_s": spec.budget_s,
        "rounds": rounds,
        "stop_reason": stop,
    }


def _sequential_meta(
    spec: ExperimentSection, design: sequential.Design, rounds: int, stop: str | None, found: list[sequential.Monitored], most: int
) -> dict[str, Any]:
    """meta.adaptive of stop = "verdict": the design and each comparison's verdict and stop round."""
    return {
        "stop": sequential.STOP_VERDICT,
        **sequential.design_meta(design),
        **_rounds_meta(spec, rounds, stop, most),
        "comparisons": [
            {
                "variant": m.variant,
                "threads": m.threads,
                "baseline": m.baseline,
                "verdict": m.track.verdict,
                "round": m.track.round,
                "looks": len(m.track.ns),
            }
            for m in found
        ],
    }
