"""The allocation counter (perflab_alloc.so) on a real program with known allocations, under
glibc and under each preloaded allocator: exact counts in the size classes the program uses,
the allocator's own behaviour unchanged (the program runs to its end), operator new counted
once (not again as the malloc that libstdc++'s new calls under glibc)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from perflab import allocators
from perflab.observers import alloc

PROGRAM = Path(__file__).resolve().parent.parent / "data" / "alloc" / "allocs.cc"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("alloc")
    exe = tmp / "allocs"
    subprocess.run(["g++", "-O0", "-pthread", "-o", str(exe), str(PROGRAM)], check=True)
    return exe, alloc.build(tmp / "cache")


def run(exe: Path, shim: Path, counters: Path, preload: Path | None) -> alloc.Counts:
    alloc.create(counters, slots=8)
    env = dict(os.environ, PERFLAB_ALLOC_FILE=str(counters), LD_PRELOAD=" ".join(str(p) for p in (shim, preload) if p))
    done = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return alloc.read(counters)


@pytest.mark.parametrize("allocator", ["glibc", "jemalloc", "tcmalloc", "mimalloc"])
def test_known_allocations_are_counted_exactly(built, tmp_path: Path, allocator: str) -> None:
    exe, shim = built
    preload = None if allocator == "glibc" else allocators.resolve(allocator)
    counts = run(exe, shim, tmp_path / "counters", preload)
    assert counts.calls["malloc"][20] == 2 * 37
    assert counts.bytes["malloc"][20] == 2 * 37 * 600000
    assert counts.calls["calloc"][19] == 2 * 11
    assert counts.calls["realloc"][26] == 2 * 5
    assert counts.calls["memalign"][24] == 2 * 7
    assert counts.calls["new"][22] == 2 * 13
    assert counts.calls["malloc"][22] == 0  # new[] counted once, not again as malloc
    assert counts.total_calls("delete") >= 2 * 13
    assert counts.total_calls("free") >= 2 * (37 + 11 + 1 + 7)
    assert counts.threads >= 2 and counts.overflow == 0


def test_threads_beyond_the_slots_share_one(built, tmp_path: Path) -> None:
    exe, shim = built
    counters = tmp_path / "counters"
    alloc.create(counters, slots=2)  # slot 0 is the shared one: the second thread overflows
    env = dict(os.environ, PERFLAB_ALLOC_FILE=str(counters), LD_PRELOAD=str(shim))
    subprocess.run([str(exe)], env=env, check=True, timeout=60)
    counts = alloc.read(counters)
    assert counts.overflow >= 1
    assert counts.calls["malloc"][20] == 2 * 37  # nothing lost


def test_without_a_counter_file_the_program_just_runs(built) -> None:
    exe, shim = built
    env = {k: v for k, v in os.environ.items() if k != "PERFLAB_ALLOC_FILE"} | {"LD_PRELOAD": str(shim)}
    assert subprocess.run([str(exe)], env=env, timeout=60, check=False).returncode == 0


def test_the_build_is_cached(built, tmp_path: Path) -> None:
    _, shim = built
    assert alloc.build(shim.parent) == shim


def test_sampled_stacks_estimate_the_bytes_and_name_the_caller(tmp_path: Path) -> None:
    exe = tmp_path / "allocs-nopie"  # absolute addresses, so addr2line can name them afterwards
    subprocess.run(["g++", "-O0", "-g", "-no-pie", "-pthread", "-o", str(exe), str(PROGRAM)], check=True)
    shim = alloc.build(tmp_path / "cache")
    counters = tmp_path / "counters"
    alloc.create(counters, slots=8, sample_capacity=4096)
    period = 1 << 20
    alloc.sample(counters, period)
    env = dict(os.environ, PERFLAB_ALLOC_FILE=str(counters), LD_PRELOAD=str(shim))
    subprocess.run([str(exe)], env=env, check=True, timeout=60)
    records, dropped = alloc.samples(counters, period)
    assert dropped == 0
    big = [r for r in records if r.op == "malloc" and r.size == 600000]
    estimate = sum(r.weight * r.size for r in big)
    # 74 calls of 600000 bytes, each sampled with P = 1 - exp(-600000 / 1 MiB) = 0.436: 32.3 +- 4.6 of
    # them (200 runs here, alone and beside five busy loops: 19 to 46). ci56 had 15, about one thread's
    # share: the message says whether records were written unfinished (depth 0, left out) or not at all
    assert 0.5 < estimate / (2 * 37 * 600000) < 1.5, (len(big), estimate, raw_records(counters))
    # every record of the 40 MB reallocs (always sampled at 1 MiB) is there
    assert sum(1 for r in records if r.op == "realloc" and r.size >= 40000000) == 2 * 5
    names = subprocess.run(
        ["addr2line", "-f", "-C", "-e", str(exe), *(hex(pc - 1) for pc in big[0].pcs)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "work()" in names


FORKS = r"""
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
/* a postmaster's way: the parent allocates, forks 3 children that each allocate 1000 blocks of
   300000 bytes (class 19) in a loop as fast as they can, side by side, then exits */
int main(void) {
    free(malloc(100));
    for (int c = 0; c < 3; c++)
        if (fork() == 0) {
            for (int i = 0; i < 1000; i++) free(malloc(300000));
            _exit(0);
        }
    for (int c = 0; c < 3; c++) wait(NULL);
    return 0;
}
"""


def test_forked_children_count_in_slots_of_their_own(tmp_path: Path) -> None:
    """A PostgreSQL backend is forked by its postmaster without exec: it counts too, in its own slot
    (in the parent's, two processes' plain stores would lose counts)."""
    source, exe = tmp_path / "forks.c", tmp_path / "forks"
    source.write_text(FORKS)
    subprocess.run(["cc", "-O0", "-o", str(exe), str(source)], check=True)
    counts = run(exe, alloc.build(tmp_path / "cache"), tmp_path / "counters", None)
    assert counts.calls["malloc"][19] == 3 * 1000 and counts.calls["malloc"][7] >= 1  # nothing lost
    assert counts.threads == 4, counts.threads  # the parent and each child: a slot each
    assert counts.total_calls("free") >= 3 * 1000


def raw_records(counters: Path) -> dict[str, int]:
    """The ring's records as written, by op and size (unfinished ones, depth 0, counted apart)."""
    words = alloc._words(counters)
    ring = words[alloc.ring_start(words) :]
    used = alloc.ring_used(words[: alloc.HEADER_WORDS])
    found: dict[str, int] = {}
    for op, size, depth, *_ in ring[: used * alloc.SAMPLE_WORDS].reshape(used, alloc.SAMPLE_WORDS).tolist():
        key = f"{alloc.OPS[op] if op < len(alloc.OPS) else op}:{size}{'' if depth else ':unfinished'}"
        found[key] = found.get(key, 0) + 1
    return found
