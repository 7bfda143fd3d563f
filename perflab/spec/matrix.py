"""The matrix: an experiment's cells, in run order: randomized blocks.

A cell is one combination of variant labels (one per axis), a thread count and a repeat.
Repeats are outermost: each round (a block, numbered by `repeat`) runs every (variant,
threads) once, so a slow drift of the machine touches every variant alike, and the analysis
can compare variants within a round (analyze/ratio.py). Inside a round the order is random,
drawn from the run's seed and the round's number (`block_order`), so no variant always runs
first (after a restore, on a cooler or hotter machine) and the same seed gives the same order
again (`perflab run --seed N`, and `--resume`, which keeps the stored seed). Without a seed
(`Experiment.seed` None: `run --check`, results of an older perflab) every round keeps the
file's order (A B C A B C). With a host axis (variants that set server_host), a round is one
block per host, the hosts in a drawn order too (`by_host`).

    exp.cells()[0].key  -> "alloc=glibc/t1/r1"          # alloc = glibc, jemalloc, tcmalloc
    dataclasses.replace(exp, seed=42).cells()[0].key  -> "alloc=jemalloc/t1/r1"
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perflab.spec.variant import merge, merge_client, merge_glibc, merge_host, merge_rate, merge_switches
from perflab.variants import variant_key

if TYPE_CHECKING:
    from perflab.spec.schema import ExperimentFile


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
    client_preload: str | None = None  # the workload client's own preload, env and libmariadb
    client_env: dict[str, str] = field(default_factory=dict)
    client_library: str | None = None
    aslr: bool = True  # False: the server runs under `setarch -R`
    prewarm: bool = False  # True: every table and index is read into the buffer pool first
    glibc: str | None = None  # a Debian suite whose libc6 and loader run the server; None: its own
    server_host: str | None = None  # the [hosts.NAME] its server runs on (a variant's, else the experiment's)
    client_host: str | None = None  # the [hosts.NAME] its client runs on (a variant's, else the experiment's)
    retry_of: int | None = None  # the id of the failed or unsettled cell this one measures again
    rate: int | None = None  # its client's arrival rate, transactions a second (a variant's, else [workload] rate)

    @property
    def variant_key(self) -> str:
        return variant_key(self.variant)

    @property
    def key(self) -> str:
        again = "" if self.retry_of is None else f"/retry-of-{self.retry_of}"
        return f"{self.variant_key}/t{self.threads}/r{self.repeat}{again}"


@dataclass(frozen=True)
class Experiment:
    source: str
    raw: dict[str, Any]
    file: ExperimentFile
    text: str = ""  # the file as written, stored with the results
    seed: int | None = None  # the order inside each round (block_order); None: the file's order
    design_reason: str = ""  # why the run has its design (spec/design.py choose)

    @property
    def name(self) -> str:
        return self.file.experiment.name

    def cells(self) -> list[Cell]:
        """All cells known in advance, in run order: repeats outermost, each round in its
        own order (block_order). With repeats = "auto", the first min_repeats rounds."""
        cells: list[Cell] = []
        for repeat in range(1, self.file.experiment.planned_repeats + 1):
            cells += self.round(repeat, start=len(cells))
        return cells

    def round(self, repeat: int, start: int = 0, only: set[tuple[str, int]] | None = None) -> list[Cell]:
        """One repeat of every (variant, threads), or of those in `only` ((variant_key,
        threads) pairs), in the round's order, numbered from `start`. The order is drawn over
        the whole round before `only` filters it, so an adaptive round that repeats a few
        groups keeps their relative order, whatever else ran."""
        spec = self.file
        combos = list(itertools.product(*(d.items() for d in spec.variants.values()))) or [()]
        axes = list(spec.variants)
        cells: list[Cell] = []
        for threads in spec.workload.threads:
            for combo in combos:
                variants, labels = [v for _, v in combo], [lbl for lbl, _ in combo]
                preload, env, options, wopts = merge(variants, labels)
                client_preload, client_env, client_library = merge_client(variants, labels)
                switches = {"aslr": spec.experiment.aslr, "prewarm": spec.experiment.prewarm}
                switches.update(merge_switches(variants, labels))
                cells.append(
                    Cell(
                        order=0,
                        variant=dict(zip(axes, labels)),
                        threads=threads,
                        repeat=repeat,
                        preload=preload,
                        env=env,
                        server_options={**spec.server_options, **options},
                        workload_options=wopts,
                        build=next((v.build for v in variants if v.build is not None), None),
                        glibc=merge_glibc(variants, labels),
                        server_host=merge_host(variants, labels, spec.experiment.server_host),
                        client_host=merge_host(variants, labels, spec.experiment.client_host, "client_host"),
                        client_preload=client_preload,
                        client_env=client_env,
                        client_library=client_library,
                        rate=merge_rate(variants, labels) or spec.workload.rate,
                        **switches,
                    )
                )
        ordered = by_host([cells[i] for i in block_order(len(cells), self.seed, repeat)], self.seed, repeat)
        kept = [c for c in ordered if only is None or (c.variant_key, c.threads) in only]
        return [dataclasses.replace(c, order=start + i) for i, c in enumerate(kept)]


MAX_SEED = 2**32 - 1


def block_order(size: int, seed: int | None, repeat: int) -> list[int]:
    """The order of a round's `size` cells (indices in the file's order): a permutation drawn
    from (seed, repeat) alone, the same on every machine and Python >= 3.11; the identity
    without a seed."""
    order = list(range(size))
    if seed is not None:
        random.Random(f"perflab-blocks/{seed}/{repeat}").shuffle(order)
    return order


def by_host(cells: list[Cell], seed: int | None, repeat: int) -> list[Cell]:
    """A round of a host axis (docs/hosts.md) as one block per server host: the hosts in an order
    drawn from (seed, repeat), each host's cells in their drawn order, so every host runs its
    whole round at once and a comparison on one host pairs cells measured close together."""
    hosts = list(dict.fromkeys(c.server_host for c in cells))
    if len(hosts) < 2:
        return cells
    if seed is not None:
        random.Random(f"perflab-hosts/{seed}/{repeat}").shuffle(hosts)
    rank = {host: i for i, host in enumerate(hosts)}
    return sorted(cells, key=lambda c: rank[c.server_host])  # stable: each host's order is kept
