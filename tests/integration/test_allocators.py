"""Allocator honesty on real cells: tcmalloc and mimalloc are really mapped into mariadbd and
recorded with their path and package version; a glibc cell maps no other allocator (perflab's
own LD_PRELOAD does not leak into the server, and a cell that maps one anyway fails with the
documented message); a misspelled sysbench option gets a "did you mean".

One run of 4 cells (~25 s) serves every assert about allocators. The server's /proc/PID/maps
is read by the test itself while each cell runs, independently of perflab's own check.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from perflab import allocators, spec
from perflab.run.cell import CellRunner
from perflab.run.workdir import work_dir
from perflab.store.results import Results
from tests.conftest import ROOT, perflab
from tests.integration.helpers import perflab_children, write_experiment

JEMALLOC = str(allocators.resolve("jemalloc"))

SPEC = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-alloc"
duration = "2s"
warmup = "1s"
repeats = 1

[dataset]
tables = 1
table_size = 1000

[workload]
threads = [2]

[variants.allocator]
glibc = {{}}
tcmalloc = {{ preload = "tcmalloc" }}
mimalloc = {{ preload = "mimalloc" }}
"""
# The spec refuses LD_* in env (docs/trust-experiment-files.md), so a glibc cell whose server maps
# another allocator anyway (a plugin, a build's own loader) is made here past the spec: its cell's env
# holds LD_AUDIT, an rtld-audit module that needs tcmalloc, which ld.so loads (into its own
# namespace) before mariadbd's main. What the proof reads is the server's maps, however it got there.
AUDIT_SOURCE = "#include <link.h>\nunsigned int la_version(unsigned int v) { return v; }\n"


def package(name: str) -> str:
    version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", name], capture_output=True, text=True, check=True)
    return f"{name} {version.stdout}"


def audit_module(tmp: Path) -> Path:
    (tmp / "audit.c").write_text(AUDIT_SOURCE, encoding="utf-8")
    lib = tmp / "libaudit-tcmalloc.so"
    tcmalloc = str(allocators.resolve("tcmalloc"))
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp / "audit.c"), "-Wl,--no-as-needed", tcmalloc], check=True
    )
    return lib


def watch_maps(proc: subprocess.Popen, out: Path) -> dict[str, set[str]]:
    """While perflab runs: per cell directory (cell-NNNN), the allocator libraries its mariadbd maps."""
    seen: dict[str, set[str]] = {}
    while proc.poll() is None:
        workdir = _workdir(out)
        for pid, cmdline in perflab_children(workdir) if workdir else []:
            if "mariadbd" not in cmdline.split()[0] or "/cell-" not in cmdline:
                continue
            cell = cmdline.split("/cell-")[1][:4]
            try:
                libs = allocators.mapped_libraries(pid)
            except OSError:
                continue
            seen.setdefault(cell, set()).update(p for p in libs if "malloc" in os.path.basename(p))
        time.sleep(0.1)
    return seen


def _workdir(out: Path) -> str | None:
    try:
        db = sqlite3.connect(f"file:{out / 'results.db'}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'workdir'").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return json.loads(row[0]) if row else None


@pytest.fixture(scope="module")
def alloc_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict[str, set[str]], str]:
    tmp = tmp_path_factory.mktemp("alloc")
    spec = write_experiment(tmp / "alloc.toml", SPEC.format())
    out = tmp / "results"
    # perflab itself runs with jemalloc preloaded, as from a shell that set LD_PRELOAD
    env = {**os.environ, "LD_PRELOAD": JEMALLOC}
    proc = subprocess.Popen(
        [sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = watch_maps(proc, out)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stdout + stderr
    exported = perflab("export", str(out))
    assert exported.returncode == 0, exported.stderr
    return json.loads(exported.stdout), seen, stderr


def cell(doc: dict, label: str) -> dict:
    (found,) = [c for c in doc["cells"] if c["variant"]["allocator"] == label]
    return found


@pytest.mark.parametrize(
    ("label", "package_name"), [("tcmalloc", "libtcmalloc-minimal4"), ("mimalloc", "libmimalloc2.0")]
)
def test_preloaded_allocator_is_mapped_and_recorded(alloc_run, label: str, package_name: str):
    doc, seen, _ = alloc_run
    c = cell(doc, label)
    assert c["status"] == "ok", c["error"]
    real = os.path.realpath(allocators.resolve(label))
    assert c["preload"] == label and c["allocator_library"] == real
    assert c["allocator_version"] == package(package_name)
    assert real in seen[f"{c['id']:04d}"]  # in the server's own maps, as the test read them
    assert c["summary"]["qps"] > 0


def test_glibc_cell_maps_no_other_allocator(alloc_run):
    doc, seen, _ = alloc_run
    c = cell(doc, "glibc")
    assert c["status"] == "ok", c["error"]
    assert c["preload"] is None and os.path.basename(c["allocator_library"]).startswith("libc.so")
    assert c["allocator_version"] == f"{os.confstr('CS_GNU_LIBC_VERSION')} ({package('libc6')})"
    # perflab ran with LD_PRELOAD=jemalloc; the server did not inherit it
    assert seen[f"{c['id']:04d}"] == set()


def test_glibc_cell_that_maps_another_allocator_fails(tmp_path: Path):
    exp = spec.load(write_experiment(tmp_path / "audit.toml", SPEC.split("[variants.allocator]")[0]))
    with Results(tmp_path / "results", create=True) as results, work_dir() as workdir:
        runner = CellRunner(exp, results)
        snapshot = runner.prepare(workdir)
        shared = Path(tempfile.mkdtemp(dir=workdir))
        shared.chmod(0o755)  # where the server's account (mysql) reads it
        audit = audit_module(shared)
        cell = dataclasses.replace(exp.cells()[0], env={"LD_AUDIT": str(audit)})
        row = runner.run(cell, snapshot, workdir)
        stored = results.cells()
        intervals = results.intervals(stored[0]["id"])
    assert row["status"] == "failed"
    assert row["error"] == "glibc malloc requested but tcmalloc is mapped"
    assert row.get("summary") is None and intervals == []  # failed before the workload
    assert [c["status"] for c in stored] == ["failed"] and stored[0]["error"] == row["error"]


def test_misspelled_sysbench_options_get_did_you_mean(tmp_path: Path):
    spec = write_experiment(
        tmp_path / "typo.toml",
        """
        [experiment]
design = "sequential"  # what this test checks runs one server at a time
repeats = 3  # a fixed number of rounds (the default before 2026-11-27)
        name = "typo"

        [workload]
        test = "oltp_read_only"
        options = { rang_size = 100, order_rangs = 1, zzzz = 1 }

        [variants.query]
        distinct = { workload_options = { distinct_range = 1 } }
        """,
    )
    done = perflab("run", str(spec), "-o", str(tmp_path / "out"), "--check")
    assert done.returncode == 2, done.stdout + done.stderr
    err = done.stderr
    assert "4 problems" in err and "Traceback" not in err
    for where, hint in [
        ("workload.options.rang_size", "did you mean range_size,"),
        ("workload.options.order_rangs", "did you mean order_ranges"),
        ("variants.query.distinct.workload_options.distinct_range", "did you mean distinct_ranges"),
        ("workload.options.zzzz", "see `sysbench oltp_read_only help`"),
    ]:
        line = f"{where}: expected an option of sysbench oltp_read_only, found unknown option"
        assert line in err, err
        assert hint in err.split(line, 1)[1].splitlines()[1], err  # the hint is the problem's next line
    assert not (tmp_path / "out").exists()
