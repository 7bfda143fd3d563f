"""The matrix: an experiment's cells, in interleaved run order.

A cell is one combination of variant labels (one per axis), a thread count and a repeat.
Repeats are outermost, so variants interleave (A B C A B C) and a slow drift of the machine
touches them all alike.

    exp.cells()[0].key  -> "alloc=glibc/t1/r1"
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perflab.variants import variant_key

if TYPE_CHECKING:
    from perflab.spec.schema import ExperimentFile, Variant


@dataclass(frozen=True)
class Cell:
    """One run of the matrix: a combination of variant labels, a thread count, a repeat."""

    order: int  # position in the interleaved run order, from 0
    variant: dict[str, str]  # axis -> label
    threads: int
    repeat: int  # from 1
    preload: str | None
    env: dict[str, str]
    server_options: dict[str, Any]
    workload_options: dict[str, Any] = field(default_factory=dict)  # the variants' own, over workload.options
    build: str | None = None  # a [builds.NAME]; None: the installed server

    @property
    def variant_key(self) -> str:
        return variant_key(self.variant)

    @property
    def key(self) -> str:
        return f"{self.variant_key}/t{self.threads}/r{self.repeat}"


@dataclass(frozen=True)
class Experiment:
    source: str
    raw: dict[str, Any]
    file: ExperimentFile
    text: str = ""  # the file as written, stored with the results

    @property
    def name(self) -> str:
        return self.file.experiment.name

    def cells(self) -> list[Cell]:
        """All cells known in advance, in run order: repeats outermost, so variants
        interleave (A B C A B C). With repeats = "auto", the first min_repeats rounds."""
        cells: list[Cell] = []
        for repeat in range(1, self.file.experiment.planned_repeats + 1):
            cells += self.round(repeat, start=len(cells))
        return cells

    def round(self, repeat: int, start: int = 0, only: set[tuple[str, int]] | None = None) -> list[Cell]:
        """One repeat of every (variant, threads), or of those in `only` ((variant_key,
        threads) pairs), numbered from `start`."""
        spec = self.file
        combos = list(itertools.product(*(d.items() for d in spec.variants.values()))) or [()]
        axes = list(spec.variants)
        cells: list[Cell] = []
        for threads in spec.workload.threads:
            for combo in combos:
                variants = [v for _, v in combo]
                preload, env, options, wopts = merge(variants, [lbl for lbl, _ in combo])
                cell = Cell(
                    order=start + len(cells),
                    variant=dict(zip(axes, (lbl for lbl, _ in combo))),
                    threads=threads,
                    repeat=repeat,
                    preload=preload,
                    env=env,
                    server_options={**spec.server_options, **options},
                    workload_options=wopts,
                    build=next((v.build for v in variants if v.build is not None), None),
                )
                if only is None or (cell.variant_key, threads) in only:
                    cells.append(cell)
        return cells


def merge(variants: list[Variant], labels: list[str]) -> tuple[str | None, dict, dict, dict]:
    """Combine one variant per axis; two axes setting the same thing differently is an error."""
    preload: str | None = None
    env: dict[str, str] = {}
    options: dict[str, Any] = {}
    wopts: dict[str, Any] = {}
    builds = {v.build for v in variants if v.build is not None}
    if len(builds) > 1:
        raise ValueError(f"variants {labels} name two builds ({', '.join(sorted(builds))})")
    for variant, label in zip(variants, labels):
        if variant.preload is not None:
            if preload is not None and preload != variant.preload:
                raise ValueError(f"variants {labels} set preload twice ({preload}, {variant.preload})")
            preload = variant.preload
        for target, source, what in (
            (env, variant.env, "env"),
            (options, variant.server_options, "server_options"),
            (wopts, variant.workload_options, "workload_options"),
        ):
            for key, val in source.items():
                if key in target and target[key] != val:
                    raise ValueError(f"variants {labels} set {what}.{key} to both {target[key]!r} and {val!r}")
                target[key] = val
    return preload, env, options, wopts
