"""[observe] alloc on a real mariadbd: per-transaction allocator calls by size class, the
allocator's own syscalls from the kernel, and sampled allocation stacks.

ORDER BY range queries allocate a sort buffer once per query (Filesort_buffer::alloc_sort_buffer,
1-2 MiB with sort_buffer_size = 2M): one such malloc per transaction. glibc serves it from its heap
once its dynamic mmap threshold has risen; with MALLOC_MMAP_THRESHOLD_ fixed at 64 KiB it mmaps and
munmaps it every time (the mechanism of reference report 002), which the kernel's syscall counts must
show."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import perflab
from tests.freezes import Freezes
from tests.integration.helpers import write_experiment

EXPERIMENT = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-alloc"
duration = "4s"
max_warmup = "3s"
repeats = 1

[dataset]
tables = 1
table_size = 10000

[workload]
test = "oltp_read_only"
threads = [2]

[workload.options]
range_size = 1000
point_selects = 0
simple_ranges = 0
sum_ranges = 0
distinct_ranges = 0
order_ranges = 1

[server_options]
sort_buffer_size = "2M"

[variants.allocator]
glibc = {}
glibc-mmap = { env = { MALLOC_MMAP_THRESHOLD_ = "65536" } }
jemalloc = { preload = "jemalloc" }

[observe]
alloc = { period = "256K" }
"""


@pytest.fixture(scope="module")
def freezes() -> Iterator[Freezes]:
    """The pauses of this VM while the module's run goes on (tests/freezes.py)."""
    with Freezes() as watched:
        yield watched


def low(freezes: Freezes, cell: dict) -> float:
    """One sort buffer per transaction, less what a pause at the window's start took from the counts:
    the counter's window begins once perflab has woken from the warm-up's sleep (the window's
    transactions are sysbench's own), so a pause of s seconds can cost s / 4 of them."""
    return 0.95 - freezes.in_cell(cell) / 4.0


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, freezes: Freezes) -> tuple[Path, dict[str, dict]]:
    tmp = tmp_path_factory.mktemp("alloc")
    for attempt in range(2):  # once more only when a cell's client was starved (`starved`)
        out = tmp / f"results{attempt}"
        done = perflab("run", str(write_experiment(tmp / "alloc.toml", EXPERIMENT)), "-o", str(out))
        assert done.returncode == 0, done.stdout + done.stderr
        cells = {cell["variant"]["allocator"]: cell for cell in json.loads(perflab("export", str(out)).stdout)["cells"]}
        if not starved(cells):
            break
    return out, cells


def starved(cells: dict[str, dict]) -> bool:
    """A cell whose paced client stalled (perflab's own stalls: seconds under half the cell's median,
    or, in results of before 2026-11-30, seconds with no report): its transactions are too few to be
    placed in the counter's span, so no figure per transaction holds for it. ci45 (2026-11-30): a
    glibc cell measured beside 1.88 cores of other load lost 2 of its 7 reports, ran 48 transactions
    at 14 a second against 200, and came out at 2.6 sort buffers a transaction."""
    return any(cell["stalls"] for cell in cells.values())


def sort_buffer_calls(cell: dict) -> float:
    """malloc calls per transaction of 1 MiB or more (the sort buffer)."""
    return sum(row["calls_per_txn"].get("malloc", 0) for row in cell["alloc"]["by_size_class"] if row["low"] >= 1 << 20)


@pytest.mark.parametrize("allocator", ["glibc", "glibc-mmap", "jemalloc"])
def test_one_sort_buffer_per_transaction(run, freezes: Freezes, allocator: str) -> None:
    _, cells = run
    cell = cells[allocator]
    assert cell["status"] == "ok", cell["error"]
    alloc = cell["alloc"]
    assert low(freezes, cell) <= sort_buffer_calls(cell) <= 1.1, (alloc["by_size_class"], freezes.pauses)
    calls = alloc["calls_per_txn"]
    assert calls["malloc"] > 1 and calls["new"] > 0
    assert abs(calls["free"] - calls["malloc"]) <= 0.05 * calls["malloc"]  # every buffer is given back
    by_class = sum(row["calls_per_txn"].get("malloc", 0) for row in alloc["by_size_class"])
    assert by_class == pytest.approx(calls["malloc"])
    assert alloc["bytes_per_txn"] >= 1 << 20
    assert alloc["dropped_samples"] == 0 and alloc["samples"] > 0
    # the counter forwards: the variant's allocator is still the one mapped and recorded
    assert ("jemalloc" if allocator == "jemalloc" else "libc.so") in cell["allocator_library"]


def test_a_fixed_mmap_threshold_mmaps_every_sort_buffer(run) -> None:
    _, cells = run
    fixed, dynamic = cells["glibc-mmap"]["alloc"], cells["glibc"]["alloc"]
    # two independent counts agree: the kernel sees an mmap and a munmap for every sort buffer, and
    # at most one for each allocation of 64 KiB or more the preload counted (glibc mmaps only what
    # its heap's top cannot serve)
    large = sum(sum(r["calls_per_txn"].get(op, 0) for op in ("malloc", "calloc", "realloc", "memalign"))
                for r in fixed["by_size_class"] if r["low"] >= 65536)  # fmt: skip
    calls = fixed["syscalls_per_txn"]
    assert sort_buffer_calls(cells["glibc-mmap"]) * 0.98 <= calls["munmap"] <= large * 1.02, (calls, large)
    assert calls["mmap"] == pytest.approx(calls["munmap"], rel=0.02)
    assert fixed["syscall_bytes_per_txn"]["munmap"] >= 1 << 20
    assert dynamic["syscalls_per_txn"]["munmap"] < 0.05, dynamic["syscalls_per_txn"]


def test_allocation_stacks_name_the_sort_buffer(run) -> None:
    out, cells = run
    profile = out / "profiles" / f"cell-{cells['glibc']['id']:04d}.alloc.folded"
    stacks = [line.rsplit(" ", 1) for line in profile.read_text().splitlines()]
    sort = [int(n) for stack, n in stacks if "alloc_sort_buffer" in stack and stack.endswith("malloc:1M-2M")]
    assert sort, "no sampled sort buffer"
    meta = json.loads(profile.with_suffix(".json").read_text())
    assert meta["source"] == "alloc" and meta["unit"] == "bytes"
    # the weighted bytes of the sort buffers agree with the counted ones, within sampling error
    counted = next(r for r in cells["glibc"]["alloc"]["by_size_class"] if r["low"] == 1 << 20)["bytes_per_txn"]
    estimated = sum(sort) / meta["transactions"]
    assert 0.7 < estimated / counted < 1.3


def test_alloc_verb_names_the_sort_buffer(run, freezes: Freezes) -> None:
    out, cells = run
    done = perflab("alloc", str(out), "allocator=glibc", "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["functions"][0]["function"] == "Filesort_buffer::alloc_sort_buffer", doc["functions"][:3]
    figures = {row["metric"]: row["per_txn"] for row in doc["figures"]}
    assert low(freezes, cells["glibc"]) <= figures["malloc_calls[1M-2M)"] <= 1.1
    text = perflab("alloc", str(out), "allocator=glibc")
    assert text.returncode == 0 and "Filesort_buffer::alloc_sort_buffer" in text.stdout


def test_diff_alloc_shows_the_syscalls(run) -> None:
    out, _ = run
    done = perflab("alloc", str(out), "allocator=glibc", "allocator=glibc-mmap", "--format", "json")
    assert done.returncode == 0, done.stderr
    old = perflab("diff", "--alloc", str(out), "allocator=glibc", "allocator=glibc-mmap", "--format", "json")
    assert old.returncode == 0 and json.loads(old.stdout) == json.loads(done.stdout)  # the old spelling too
    assert "deprecated: perflab diff --alloc DIR A B" in old.stderr and "deprecated" not in done.stderr
    rows = {row["metric"]: row for row in json.loads(done.stdout)["figures"]}
    assert rows["munmap_calls"]["a"] < 0.05 and rows["munmap_calls"]["b"] >= 0.95
    assert rows["munmap_calls"]["noise"] is None  # one repeat a side: no noise floor, never "beyond" it


def test_alloc_without_the_observer_says_how(tmp_path: Path) -> None:
    shutil.copytree(Path(__file__).resolve().parent.parent / "data" / "schema1", tmp_path / "old")
    done = perflab("alloc", str(tmp_path / "old"), "glibc")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no allocation figures stored" in done.stderr and "alloc = true" in done.stderr


def test_alloc_of_a_selection_without_a_settled_repeat_says_so(run, tmp_path: Path) -> None:
    out, _ = run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    with sqlite3.connect(copy / "results.db") as db:
        db.execute("UPDATE cells SET settled = 0")
    done = perflab("alloc", str(copy), "allocator=glibc")
    assert done.returncode == 2 and "no settled repeat with allocation figures" in done.stderr, done.stderr
