"""Render time and size of the HTML and Markdown reports of a 100-cell matrix.

What: a synthetic results directory shaped like examples/allocators.toml cut to 100 cells
(5 allocators x 2 sort buffers x 2 thread counts x 5 repeats) with long windows (default
300 s of per-second reports per cell, plus warm-up), some stalls, one failed cell. Every cell
is cloned from a real stored cell (tests/data/report/tiny, recorded by
tests/data/regen_report.py) with synthetic per-second series, and its steady-state fields are
computed by perflab's own analysis, as a run stores them.
Measured: wall time of `perflab report DIR --html -o` and `--format markdown -o` as a user
runs them (a subprocess: Python start-up and imports included), median of 3; the HTML's size;
the largest number of points any chart draws (series are downsampled, table figures are not).
Goal: renders in seconds, HTML under a few MB.

Run: python3 bench/report_size.py                # 100 cells x 300 s windows
     python3 bench/report_size.py --seconds 1200 # 20-minute windows
Exit status: 0 when it measured (and the goal held), 1 otherwise.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perflab.analyze import steady
from perflab.store.results import Results

ALLOCATORS = {"glibc": 1.0, "jemalloc": 1.04, "tcmalloc": 0.93, "mimalloc": 1.02, "glibc-nommap": 1.01}
SORT_BUFFERS = {"32K": 1.0, "2M": 0.97}
THREADS = [1, 2]
REPEATS = 5
GOAL_SECONDS, GOAL_BYTES = 10.0, 5 * 2**20


def build(directory: Path, seconds: int) -> int:
    """The synthetic results directory; returns its cell count."""
    with _template(ROOT / "tests" / "data" / "report" / "tiny") as (meta, cell0):
        pass
    rng = random.Random(5)
    warm = 10
    with Results(directory, create=True) as results:
        axes = {"allocator": list(ALLOCATORS), "sort_buffer": list(SORT_BUFFERS)}
        exp = {
            **meta["experiment"],
            "name": "report-size",
            "duration": float(seconds),
            "warmup": float(warm),
            "repeats": REPEATS,
            "axes": axes,
            "workload": {**meta["experiment"]["workload"], "threads": THREADS},
        }
        spec = f'[experiment]\nname = "report-size"\nduration = "{seconds}s"\nwarmup = "{warm}s"\nrepeats = {REPEATS}\n'
        results.set_meta(**{**meta, "experiment": exp, "spec_text": spec, "cell_count": 100, "status": "complete"})
        cid = 0
        for r in range(1, REPEATS + 1):
            for t in THREADS:
                for a, fa in ALLOCATORS.items():
                    for s, fs in SORT_BUFFERS.items():
                        cell = _cell(cell0, cid, {"allocator": a, "sort_buffer": s}, t, r)
                        level = 9000 * t**0.8 * fa * fs * rng.gauss(1, 0.01)
                        intervals = _series(rng, level, warm, seconds, stall=(cid % 17 == 3))
                        if cid == 42:
                            cell.update(status="failed", error="server died: signal 11 (SIGSEGV)", summary=None)
                            results.commit_cell(cell, [], [])
                        else:
                            _finish(cell, intervals, warm, seconds, level, rng)
                            rss = [(float(i), int(9e7 * fs + 2e5 * i)) for i in range(seconds)]
                            results.commit_cell(cell, intervals, rss)
                        cid += 1
    return cid


class _template:
    """(meta, first cell) of the recorded tiny results, read from a copy (no WAL in tests/data)."""

    def __init__(self, path: Path) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="perflab-bench-")
        self.copy = Path(self.tmp.name) / "tiny"
        shutil.copytree(path, self.copy)

    def __enter__(self) -> tuple[dict, dict]:
        with Results(self.copy) as results:
            return results.meta(), results.cells()[0]

    def __exit__(self, *exc: object) -> None:
        self.tmp.cleanup()


def _cell(cell0: dict, cid: int, variant: dict, threads: int, repeat: int) -> dict:
    key = ",".join(f"{a}={lbl}" for a, lbl in variant.items()) + f"/t{threads}/r{repeat}"
    return {**cell0, "id": cid, "key": key, "variant": variant, "threads": threads, "repeat": repeat}


def _series(rng: random.Random, level: float, warm: int, seconds: int, stall: bool) -> list[dict]:
    out = []
    for t in range(1, warm + seconds + 1):
        qps = level * (0.6 + 0.4 * t / warm if t <= warm else 1) * rng.gauss(1, 0.02)
        if stall and warm + 50 <= t < warm + 53:
            qps *= 0.2
        out.append(
            {
                "t": float(t),
                "warmup": int(t <= warm),
                "tps": qps / 3,
                "qps": qps,
                "reads": qps / 3,
                "writes": 0.0,
                "other": qps * 2 / 3,
                "p95_ms": 2000 / qps * 10 * rng.gauss(1, 0.05),
                "errors_per_s": 0.0,
                "reconnects_per_s": 0.0,
            }
        )
    return out


def _finish(cell: dict, intervals: list[dict], warm: int, seconds: int, level: float, rng: random.Random) -> None:
    window = [iv["qps"] for iv in intervals if not iv["warmup"]]
    qps = statistics.fmean(window)
    p95 = statistics.fmean(iv["p95_ms"] for iv in intervals if not iv["warmup"])
    cell["summary"] = {
        **cell["summary"],
        "qps": qps,
        "tps": qps / 3,
        "transactions": int(qps / 3 * seconds),
        "queries": int(qps * seconds),
        "total_time_s": float(seconds),
        "latency_ms": {"min": 0.1, "avg": p95 / 2, "max": p95 * 4, "p50": p95 / 2, "p95": p95, "p99": p95 * 1.6},
    }
    cell["resources"] = {
        **cell["resources"],
        "rss_end_bytes": int(9e7 + 1e6 * rng.random()),
        "rss_peak_bytes": int(9.5e7),
    }
    cell["window_start_s"], cell["warmup_method"] = float(warm), None
    steady.complete(cell, intervals)


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "perflab", *argv], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=300, help="measured window of each cell (per-second reports)")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the results and reports in DIR (must not exist)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="perflab-bench-") as tmp:
        directory = Path(tmp) / "results"
        cells = build(directory, args.seconds)
        html, md = Path(tmp) / "report.html", Path(tmp) / "report.md"
        html_s = statistics.median(timed(["report", str(directory), "--html", "-o", str(html)]) for _ in range(3))
        md_s = statistics.median(
            timed(["report", str(directory), "--format", "markdown", "-o", str(md)]) for _ in range(3)
        )
        text = html.read_text(encoding="utf-8")
        points = max(
            len(re.findall(r"[ML]?[-\d.]+,[-\d.]+", d)) for d in re.findall(r'<path d="(M[^"]*)" fill="none"', text)
        )
        charts = text.count('class="chart"')
        size = html.stat().st_size
        print(
            f"{cells} cells x {args.seconds} s windows: HTML {size / 2**20:.2f} MiB ({charts} charts, at most {points} "
            f"points per line) in {html_s:.2f} s; Markdown + {len(list((Path(tmp) / 'report_files').iterdir()))} SVG "
            f"files in {md_s:.2f} s (median of 3, python start-up included)"
        )
        ok = html_s < GOAL_SECONDS and size < GOAL_BYTES
        if args.keep:
            shutil.copytree(tmp, args.keep)
        print(f"goal (under {GOAL_SECONDS:.0f} s, under {GOAL_BYTES / 2**20:.0f} MiB): {'met' if ok else 'NOT met'}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
