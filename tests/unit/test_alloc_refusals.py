"""[observe] alloc's bad input and faults that need no server: a variant that preloads the counter
itself or sets its file (refused in the spec, at the key), a preload the counter cannot stand in
front of (refused before the run), and a full ring of sampled stacks (a warning with its remedy in
`perflab report` and `perflab alloc`, from a stored row)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from perflab import allocators, elf, preflight, spec
from perflab.analyze import alloc as allocs
from perflab.errors import SpecError
from perflab.spec.observe import AllocObserve
from perflab.store.results import Results
from tests.conftest import perflab

HEAD = '[experiment]\nname = "t"\n'
JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
TINY = Path(__file__).resolve().parent.parent / "data" / "report" / "tiny"


def shared_library(tmp: Path, name: str, source: str, *flags: str) -> Path:
    (tmp / f"{name}.c").write_text(source)
    out = tmp / f"{name}.so"
    subprocess.run(["cc", "-shared", "-fPIC", *flags, "-o", str(out), str(tmp / f"{name}.c")], check=True)
    return out


def problems(text: str) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        spec.parse(text, "bad.toml")
    return {p.path: p.render() for p in info.value.problems}


@pytest.mark.parametrize("samples", [0, 1023, (1 << 22) + 1, "64K"])
def test_the_ring_size_is_bounded(samples: object) -> None:
    with pytest.raises(ValidationError, match="samples"):
        AllocObserve(samples=samples)
    assert AllocObserve(samples=1024).samples == 1024 and AllocObserve().samples == 65536


def test_a_variant_may_not_set_the_counters_file() -> None:
    found = problems(HEAD + '[variants.v]\nx = { env = { PERFLAB_ALLOC_FILE = "/dev/shm/x" } }\n')
    text = found["variants.v.x.env.PERFLAB_ALLOC_FILE"]
    assert "no PERFLAB_ALLOC_FILE in env (perflab sets it)" in text and "alloc = true under [observe]" in text


@pytest.mark.parametrize("how", ["file name", "soname", "symbol"])
def test_a_variant_may_not_preload_the_counter(tmp_path: Path, how: str) -> None:
    if how == "file name":  # any library under the counter's name
        lib = tmp_path / "perflab_alloc-0123.so"
        shutil.copy(JEMALLOC, lib)
    elif how == "soname":
        lib = shared_library(tmp_path, "libcounter", "int x;\n", "-Wl,-soname,perflab_alloc.so")
    else:  # a renamed copy still exports the counter's symbol
        lib = shared_library(tmp_path, "librenamed", f'const char {allocators.TRACER_SYMBOL}[] = "perflab-alloc/1";\n')
    assert allocators.is_alloc_tracer(lib)
    found = problems(HEAD + f'[variants.allocator]\ncounted = {{ preload = "{lib}" }}\n')
    text = found["variants.allocator.counted.preload"]
    assert "expected an allocator, not perflab's allocation counter" in text
    assert "alloc = true under [observe]" in text and "count every call twice" in text


def test_real_allocators_are_not_the_counter() -> None:
    for name in ("jemalloc", "tcmalloc", "mimalloc"):
        assert not allocators.is_alloc_tracer(allocators.resolve(name))
    assert spec.parse(HEAD + f'[variants.a]\nje = {{ preload = "{JEMALLOC}" }}\n').cells()


def test_dynamic_names_of_real_and_odd_files(tmp_path: Path) -> None:
    soname, names = elf.dynamic_names(JEMALLOC)
    assert soname == "libjemalloc.so.2" and {"malloc", "free", "calloc", "realloc"} <= names
    mariadbd = elf.dynamic_names(Path("/usr/sbin/mariadbd"))
    assert mariadbd is not None and "malloc" not in mariadbd[1]  # it calls glibc's (undefined here)
    (tmp_path / "text").write_text("hello\n")
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes(JEMALLOC.read_bytes()[:100])
    assert elf.dynamic_names(tmp_path / "text") is None and elf.dynamic_names(truncated) is None
    assert allocators.missing_entry_points(tmp_path / "text") is None


def test_a_preload_that_is_no_allocator_is_refused_with_observe_alloc(tmp_path: Path) -> None:
    half = shared_library(
        tmp_path, "libhalf", "#include <stddef.h>\nvoid *malloc(size_t n) { (void)n; return NULL; }\nint free;\n"
    )
    assert allocators.missing_entry_points(half) == ["calloc", "realloc"]  # `int free` is no function, but defined
    none = shared_library(tmp_path, "libnone", "int answer(void) { return 42; }\n")
    text = HEAD + f'[variants.allocator]\nnone = {{ preload = "{none}" }}\nje = {{ preload = "jemalloc" }}\n'
    with pytest.raises(SpecError) as info:
        preflight.check(spec.parse(text + "[observe]\nalloc = true\n"))
    found = {p.path: p for p in info.value.problems}
    problem = found["variants.allocator.none.preload"]
    assert "defines no malloc, free, calloc, realloc" in problem.found and "leave out [observe] alloc" in problem.hint
    assert "variants.allocator.je.preload" not in found
    try:  # without [observe] alloc, nothing is forwarded: no such problem
        preflight.check(spec.parse(text))
    except SpecError as exc:
        assert "variants.allocator.none.preload" not in {p.path for p in exc.problems}


def test_the_counter_source_exports_the_symbol_perflab_knows_it_by() -> None:
    source = (Path(allocators.__file__).parent / "observers" / "alloc" / "perflab_alloc.c").read_text()
    assert f"const char {allocators.TRACER_SYMBOL}[]" in source


# ------------------------------------------------------------------ the sample ring full


def dropped_row(cell: dict, dropped: int) -> dict:
    alloc = {
        "calls_per_txn": {"malloc": 12.0, "calloc": 0.0, "realloc": 1.0, "free": 13.0, "memalign": 0.0, "new": 4.0,
                          "delete": 4.0},
        "bytes_per_txn": 2097152.0,
        "syscalls_per_txn": None,
        "by_size_class": [],
        "samples": 65536,
        "dropped_samples": dropped,
        "period": 4096,
    }  # fmt: skip
    return {**cell, "alloc": alloc}


@pytest.fixture()
def dropping(tmp_path: Path) -> Path:
    """The recorded tiny run, its cells traced; cell 1 dropped 196,608 sampled stacks."""
    out = tmp_path / "dropping"
    shutil.copytree(TINY, out)
    with Results(out) as results:
        for cell in results.cells():
            row = dropped_row(cell, 196608 if cell["id"] == 1 else 0)
            results.commit_cell(row, results.intervals(cell["id"]), results.rss_samples(cell["id"]))
    return out


def test_the_warning_names_the_cells_and_a_period_that_fits() -> None:
    cells = [{"id": i, "status": "ok", "alloc": dropped_row({}, d)["alloc"]} for i, d in enumerate((0, 196608))]
    text = allocs.dropped_samples(cells)
    assert text is not None and "1 cell(s) dropped sampled allocation stacks" in text and "cells 1;" in text
    # 4x as many samples as the ring holds: at 8x the period the same window fills half of it
    assert allocs.suggested_period(4096, 65536, 196608) == 32768 and 'period = "32K" (now 4K)' in text
    # or a ring that holds the 262,144 samples twice over
    assert allocs.suggested_samples(65536, 196608) == 524288 and "samples = 524288 (now 65536;" in text
    assert allocs.suggested_samples(1 << 22, 1 << 24) == 1 << 22  # the largest ring the spec takes
    assert allocs.dropped_samples([{**c, "alloc": {**c["alloc"], "dropped_samples": 0}} for c in cells]) is None


def test_report_and_alloc_warn_of_dropped_samples(dropping: Path) -> None:
    report = perflab("report", str(dropping))
    assert report.returncode == 0, report.stderr
    assert "dropped sampled allocation stacks" in report.stdout and 'period = "32K"' in report.stdout
    doc = json.loads(perflab("report", str(dropping), "--format", "json").stdout)
    (finding,) = [f for f in doc["findings"] if f["kind"] == "alloc-dropped"]
    assert finding["level"] == "warning" and finding["cells"] == [1]
    shown = perflab("alloc", str(dropping), "allocator=jemalloc", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    (warning,) = json.loads(shown.stdout)["warnings"]
    assert "Remedy: a larger period under [observe] alloc" in warning
    assert "warning:" in shown.stderr and "dropped sampled allocation stacks" in shown.stderr
    clean = perflab("alloc", str(dropping), "allocator=glibc", "--format", "json")  # its cells dropped none
    assert json.loads(clean.stdout)["warnings"] == [] and "warning" not in clean.stderr


def test_threads_started_in_the_window_are_a_warning_in_report_and_alloc(tmp_path: Path) -> None:
    """An autovacuum worker forked in one cell's window (a 40 s window, 2026-11-30: 2.34 mallocs and
    3.53 frees a transaction there, 2.00 each in the backends) is named, so its figures are not read as the allocator's."""
    cells = [{"id": i, "status": "ok", "alloc": {**dropped_row({}, 0)["alloc"], "threads_started": n,
                                                   "started_calls_share": share}}
             for i, (n, share) in enumerate(((0, 0.0), (2, 0.05), (1, 0.45)))]  # fmt: skip
    text = allocs.started_in_window(cells)
    assert text is not None and "2 cell(s) had threads or processes start" in text, text
    assert "(cells 1, 2; most: cell 2, 1, 45.0% of its calls)" in text, text  # the largest share named
    assert allocs.started_in_window([{**c, "alloc": {**c["alloc"], "threads_started": 0}} for c in cells]) is None
    # MySQL 9.7's two background threads started in a window: 0.008% of its calls move no figure
    quiet = [{**c, "alloc": {**c["alloc"], "started_calls_share": 0.00008}} for c in cells]
    assert allocs.started_in_window(quiet) is None and allocs.started_cells(cells) == (1, 2)
    assert allocs.started_in_window([{"id": 0, "status": "ok", "alloc": dropped_row({}, 0)["alloc"]}]) is None  # older runs
    out = tmp_path / "started"
    shutil.copytree(TINY, out)
    with Results(out) as results:
        for cell in results.cells():
            row = dropped_row(cell, 0)
            row["alloc"]["threads_started"] = 1 if cell["id"] == 1 else 0
            results.commit_cell(row, results.intervals(cell["id"]), results.rss_samples(cell["id"]))
    doc = json.loads(perflab("report", str(out), "--format", "json").stdout)
    (finding,) = [f for f in doc["findings"] if f["kind"] == "alloc-started"]
    assert finding["level"] == "warning" and finding["cells"] == [1] and 'autovacuum = "off"' in finding["text"]
    shown = perflab("alloc", str(out), "allocator=jemalloc", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert any("start within the window" in w for w in json.loads(shown.stdout)["warnings"]), shown.stdout
    clean = perflab("alloc", str(out), "allocator=glibc", "--format", "json")
    assert json.loads(clean.stdout)["warnings"] == [], clean.stdout
