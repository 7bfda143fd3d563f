"""How long a profile takes to become results, against `perf report` on the same perf.data.

What: for perf recordings of a busy mariadbd of about N and 4N samples (N = 250,000 by
default: ~1,000,000 at the large size), the seconds from the end of the measured window to
stored folded stacks and per-function tables, i.e. what a cell does after its window:
PerfRecorder.fold() (`perf script --pid -F tid,ip,sym,dso` streamed into the Python folder),
store/folded.write(), and the per-function table (analyze/profile.py). The baseline is
`perf report --stdio --pid PID` on the same perf.data (its default call-graph report, output
to /dev/null). Both are run `--repeats` times, alternating; the ratio of medians is reported,
with perf script's share of perflab's time, and seconds per million samples at both sizes
(linear growth means equal figures).

How: one dataset and one mariadbd (2 tables x 20k rows) under sysbench oltp_read_only with
2 threads, recorded by PerfRecorder (system-wide, fp call graphs) at a high frequency
(--frequency, default 20 kHz) for as long as the sample count needs.

Run: python3 bench/fold_speed.py              # ~3-5 minutes
     python3 bench/fold_speed.py --samples 50000 --repeats 1   # a smoke test
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import _common as C

from perflab.analyze.profile import Merged, Profile
from perflab.servers import dataset, mysqld_dataset
from perflab.observers.perf import PerfRecorder
from perflab.places.proc import Child, clean_env
from perflab.workloads import sysbench
from perflab.servers.mysqld import Mysqld
from perflab.store import folded

TABLES, TABLE_SIZE, THREADS = 2, 20000, 2
OPTIONS = {"rand_type": "uniform"}


def record(server: Mysqld, work: Path, samples: int, frequency: int) -> PerfRecorder:
    seconds = max(3, round(samples / (frequency * 1.0)))  # the server keeps about one CPU busy
    argv = sysbench.argv(
        "oltp_read_only",
        "run",
        socket=server.socket,
        tables=TABLES,
        table_size=TABLE_SIZE,
        threads=THREADS,
        seconds=seconds + 2,
        options=OPTIONS,
    )
    rec = PerfRecorder(server.pid, work / f"rec-{samples}", frequency=frequency)
    with Child(argv, env=clean_env()) as child:
        time.sleep(1)
        with rec:
            time.sleep(seconds)
        child.wait(120)
    return rec


def perflab_post(rec: PerfRecorder, out: Path) -> dict[str, float]:
    t0 = time.monotonic()
    stacks, stats = rec.fold()
    t1 = time.monotonic()
    folded.write(out, stacks, {"source": "perf", "dsos": stats.dsos})
    Merged([Profile.from_stacks(stacks, transactions=1.0, sample_us=1.0, dsos=stats.dsos)]).rows(limit=50)
    t2 = time.monotonic()
    return {"total_s": t2 - t0, "fold_s": t1 - t0, "store_table_s": t2 - t1, "samples": stats.samples}


def perf_script_only(rec: PerfRecorder) -> float:
    t0 = time.monotonic()
    subprocess.run(rec.script_argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=3600)
    return time.monotonic() - t0


def perf_report(rec: PerfRecorder) -> float:
    t0 = time.monotonic()
    subprocess.run(
        ["perf", "report", "--stdio", "-i", str(rec.data), "--pid", str(rec.pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=3600,
    )
    return time.monotonic() - t0


def measure(rec: PerfRecorder, work: Path, repeats: int) -> dict[str, Any]:
    ours, theirs, script = [], [], []
    info: dict[str, float] = {}
    for i in range(repeats):
        first, second = (perflab_post, perf_report) if i % 2 == 0 else (perf_report, perflab_post)
        for step in (first, second):
            if step is perflab_post:
                info = perflab_post(rec, work / f"folded-{i}")
                ours.append(info["total_s"])
            else:
                theirs.append(perf_report(rec))
        script.append(perf_script_only(rec))
    med = statistics.median
    return {
        "samples": info["samples"],
        "perf_data_mb": rec.data.stat().st_size / 2**20,
        "perflab_s": med(ours),
        "perflab_min_max": [min(ours), max(ours)],
        "perf_report_s": med(theirs),
        "perf_report_min_max": [min(theirs), max(theirs)],
        "perf_script_s": med(script),
        "ratio": med(ours) / med(theirs),
        "perflab_s_per_m_samples": med(ours) / info["samples"] * 1e6,
        "perf_report_s_per_m_samples": med(theirs) / info["samples"] * 1e6,
    }


RATE = Path("/proc/sys/kernel/perf_event_max_sample_rate")


def run(args: argparse.Namespace) -> None:
    # the kernel lowers this limit when sampling interrupts take long (they will at 20 kHz);
    # put it back so the benchmark leaves the machine as it found it
    rate = RATE.read_text()
    try:
        measure_all(args)
    finally:
        if RATE.read_text() != rate:
            C.say(f"perf_event_max_sample_rate was lowered by the kernel to {RATE.read_text().strip()}; restored")
            RATE.write_text(rate)


def measure_all(args: argparse.Namespace) -> None:
    machine = C.Machine()
    sizes = [args.samples, 4 * args.samples]
    got = []
    with C.workdir(machine) as work:
        snap = mysqld_dataset.prepare(
            work,
            sysbench.Prepare("oltp_read_only", TABLES, TABLE_SIZE, OPTIONS),
            server_options={},
            log=work / "prepare.txt",
        )
        dataset.restore(snap, work / "srv" / "data")
        with Mysqld(work / "srv", work / "srv" / "data", {"innodb_buffer_pool_size": snap.buffer_pool}) as server:
            for size in sizes:
                rec = record(server, work, size, args.frequency)
                got.append(measure(rec, work, args.repeats))
                C.say(f"size {size}: {got[-1]}")
    info = machine.finish()
    rows = [
        [
            f"{g['samples']:,}",
            f"{g['perf_data_mb']:.0f}",
            f"{g['perflab_s']:.1f}",
            f"{g['perflab_min_max'][0]:.1f}-{g['perflab_min_max'][1]:.1f}",
            f"{g['perf_script_s']:.1f}",
            f"{g['perf_report_s']:.1f}",
            f"{g['perf_report_min_max'][0]:.1f}-{g['perf_report_min_max'][1]:.1f}",
            f"{g['ratio']:.2f}",
            f"{g['perflab_s_per_m_samples']:.1f}",
            f"{g['perf_report_s_per_m_samples']:.1f}",
        ]
        for g in got
    ]
    C.say(f"\nmedians of {args.repeats} runs, alternating; perflab = fold (perf script + parse) + store + table")
    C.say(
        C.table(
            [
                "samples",
                "perf.data MB",
                "perflab s",
                "min-max",
                "of which perf script s",
                "perf report s",
                "min-max",
                "ratio",
                "perflab s/M samples",
                "perf report s/M samples",
            ],
            rows,
        )
    )
    growth = got[1]["perflab_s_per_m_samples"] / got[0]["perflab_s_per_m_samples"]
    C.say(f"growth: per-sample time at 4x the samples is {growth:.2f}x the small size's (1.0 = linear)")
    C.say(C.Machine.describe(info))
    C.final_json({"bench": "fold_speed", "sizes": got, "growth_per_sample": round(growth, 3), "machine": info})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=250_000, help="the small size; the large one is 4x")
    ap.add_argument("--frequency", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    C.main_guard(lambda: run(args))


if __name__ == "__main__":
    main()
