"""Randomized blocks: every round runs every (variant, threads) once, in an order drawn from
the run's seed; the same seed gives the same order; --resume keeps the stored seed; adaptive
rounds keep the order of the groups they repeat; a bad --seed exits 2."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from pathlib import Path

import pytest

from perflab import spec
from perflab.analyze import summary
from perflab.cli.run import _resumable, order_line
from perflab.errors import UsageError
from perflab.report import profiles
from perflab.run import scheduler
from perflab.store.results import Results
from tests.conftest import perflab
from tests.unit.test_adaptive import SPEC as ADAPTIVE_SPEC
from tests.unit.test_adaptive import DrawingRunner
from tests.unit.test_stats import cell as stats_cell

MATRIX = """
[experiment]
name = "blocks"
design = "sequential"  # the scheduler\'s own loop, cells one at a time
repeats = 4
[workload]
threads = [1, 2]
[variants.alloc]
glibc = {}
jemalloc = {}
tcmalloc = {}
"""


def seeded(seed: int | None, text: str = MATRIX) -> spec.Experiment:
    return dataclasses.replace(spec.parse(text), seed=seed)


def test_each_round_is_a_block_of_every_cell_once() -> None:
    cells = seeded(7).cells()
    assert [c.order for c in cells] == list(range(24))
    assert [c.repeat for c in cells] == sorted(c.repeat for c in cells)  # rounds stay outermost
    for repeat in range(1, 5):
        block = [(c.variant_key, c.threads) for c in cells if c.repeat == repeat]
        assert sorted(block) == sorted(itertools.product(("alloc=glibc", "alloc=jemalloc", "alloc=tcmalloc"), (1, 2)))


def test_the_seed_decides_the_order_and_reproduces_it() -> None:
    def keys(seed: int | None) -> list[str]:
        return [c.key for c in seeded(seed).cells()]

    assert keys(7) == keys(7)
    assert keys(7) != keys(8)
    assert keys(None) == [c.key for c in spec.parse(MATRIX).cells()]  # no seed: the file's order
    rounds = [tuple(c.key.split("/r")[0] for c in seeded(7).cells() if c.repeat == r) for r in range(1, 5)]
    assert len(set(rounds)) > 1  # each round draws its own order


def test_no_variant_is_first_more_often_than_chance() -> None:
    # over many seeds, each of the 6 cells of a round comes first about 1/6 of the time
    firsts = Counter(seeded(seed).round(1)[0].key for seed in range(3000))
    assert len(firsts) == 6 and all(400 < n < 600 for n in firsts.values()), firsts


def test_an_adaptive_round_keeps_the_relative_order_of_the_groups_it_repeats() -> None:
    exp = seeded(11)
    full = [(c.variant_key, c.threads) for c in exp.round(5)]
    only = {("alloc=glibc", 1), ("alloc=tcmalloc", 2), ("alloc=jemalloc", 2)}
    kept = exp.round(5, start=30, only=only)
    assert [(c.variant_key, c.threads) for c in kept] == [k for k in full if k in only]
    assert [c.order for c in kept] == [30, 31, 32]


def test_adaptive_run_follows_the_seed_and_a_resume_replays_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    exp = seeded(3, ADAPTIVE_SPEC.format(max_repeats=6, budget=""))

    def run(directory: Path, done: list[dict]) -> list[dict]:
        with Results(directory, create=True) as results:
            runner = DrawingRunner(exp, results)
            monkeypatch.setattr(scheduler.time, "monotonic", lambda: runner.clock)
            scheduler.Scheduler(exp, results, runner=runner).run_adaptive(None, tmp_path, done)  # type: ignore[arg-type]
        return done

    full = run(tmp_path / "full", [])
    expected = [c.key for r in range(1, 4) for c in exp.round(r)]
    assert [c["key"] for c in full[:6]] == expected  # the seeded order of the first rounds
    resumed = run(tmp_path / "resumed", [dict(row) for row in full[:4]])
    assert [c["key"] for c in resumed] == [c["key"] for c in full]


def stored_run(directory: Path, seed: int | None) -> Path:
    with Results(directory, create=True) as results:
        results.set_meta(spec_text=MATRIX, status="interrupted", perflab_version=None)
        if seed is not None:
            results.set_meta(seed=seed)
    return directory


def test_resume_keeps_the_stored_seed(tmp_path: Path) -> None:
    directory = stored_run(tmp_path / "r", 1234)
    exp, stored = _resumable(directory, None)
    assert exp.seed == 1234 and stored == 0
    assert [c.key for c in exp.cells()] == [c.key for c in seeded(1234).cells()]
    assert _resumable(directory, 1234)[0].seed == 1234
    with pytest.raises(UsageError, match="was run with seed 1234") as info:
        _resumable(directory, 99)
    assert "drop --seed" in (info.value.hint or "")
    old, _ = _resumable(stored_run(tmp_path / "old", None), None)  # an older perflab: the file's order
    assert old.seed is None and "file's order" in order_line(None, True)
    assert "--seed 5 runs this order again" in order_line(5, False)


@pytest.mark.parametrize(
    ("value", "why"),
    [("-1", "negative"), ("abc", "not a whole number"), ("1.5", "not a whole number"), ("4294967296", "too large"),
     ("9" * 5000, "too large"), ("", "not a whole number")],
)  # fmt: skip
def test_bad_seed_exits_2_naming_the_option(tmp_path: Path, value: str, why: str) -> None:
    file = tmp_path / "m.toml"
    file.write_text(MATRIX, encoding="utf-8")
    done = perflab("run", str(file), "--check", "--seed", value)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--seed" in done.stderr and why in done.stderr and "0 to 4294967295" in done.stderr


def test_good_seed_is_accepted(tmp_path: Path) -> None:
    file = tmp_path / "m.toml"
    file.write_text(MATRIX, encoding="utf-8")
    for value in ("0", "4294967295"):
        done = perflab("run", str(file), "--check", "--seed", value)
        assert done.returncode == 0, done.stderr


def test_reports_list_groups_in_the_files_order_whatever_the_run_order() -> None:
    exp = seeded(5)
    axes = {"alloc": ["glibc", "jemalloc", "tcmalloc"]}
    cells = [stats_cell(c.order, c.variant, c.threads, 1000.0, repeat=c.repeat) for c in exp.cells()]
    assert cells[0]["variant"] != {"alloc": "glibc"} or cells[1]["variant"] != {"alloc": "jemalloc"}  # shuffled
    ordered = summary.groups(cells, {"alloc": "glibc"}, axes)
    assert [(g.threads, g.variant["alloc"]) for g in ordered] == [
        (t, a) for t in (1, 2) for a in ("glibc", "jemalloc", "tcmalloc")
    ]
    assert [g.baseline for g in ordered] == [True, False, False] * 2
    selectors = profiles._groups(cells, ordered)
    assert selectors[:2] == ["alloc=glibc/t1", "alloc=glibc/t2"]  # the baselines first: the differential's base
    assert selectors[2:] == ["alloc=jemalloc/t1", "alloc=tcmalloc/t1", "alloc=jemalloc/t2", "alloc=tcmalloc/t2"]
