"""Are [observe] alloc's kernel-side syscall counts exact? perflab's SyscallRecorder against strace.

What: one real perflab cell (CellRunner.run) of oltp_read_only ORDER BY ranges with
sort_buffer_size 32M and MALLOC_MMAP_THRESHOLD_=65536 (glibc then mmaps and munmaps every
allocation of 64 KiB or more, the sort buffer among them, on every query; without the fixed
threshold glibc's dynamic one soon serves the buffer from the heap and the window has almost no
mmap calls to compare), 2 threads, [observe] alloc = { stacks = false }. Inside its measured window, on the cell's
own server:

  1. sysbench is stopped (SIGSTOP): the server goes idle, so the edges of the comparison see
     almost no calls;
  2. perflab's SyscallRecorder starts (perf's syscall tracepoints, enabled through its FIFO);
  3. `strace -c -f -e trace=mmap,munmap,mprotect,madvise,brk -p PID` attaches to every server
     thread (it says so on stderr) and follows the threads the server starts;
  4. sysbench continues for --seconds, then is stopped again, and the server drains;
  5. strace detaches (SIGINT) and writes its table; the recorder stops;
  6. sysbench continues and the cell ends as usual.

The recorder's interval contains strace's and differs from it only by idle edges, so the two
counts of each syscall must agree: the goal is within 1% for each of them (issue 11's
"Exactness"). strace slows the server a lot (every traced call stops it twice); that changes how
many calls there are, not whether both count the same ones.

Run: python3 bench/archive/alloc_exactness.py              # a 5 s comparison (about 1 minute)
     python3 bench/archive/alloc_exactness.py --quick      # 2 s, a smoke test
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: _common and the scripts imported below
import _common as C

from perflab import preflight, spec
from perflab.run import cell as cell_module
from perflab.run.cell import CellRunner
from perflab.observers.syscalls import SYSCALLS, SyscallRecorder
from perflab.servers.mysqld import Mysqld
from perflab.store.results import Results

EXPERIMENT = """
[experiment]
name = "bench-alloc-exactness"
duration = "{duration}s"
warmup = "2s"
repeats = 1
timeout_margin = "120s"

[dataset]
tables = 2
table_size = 20000

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
sort_buffer_size = "32M"

# a fixed mmap threshold (which also turns off glibc's dynamic one): every allocation of 64 KiB
# or more is an mmap and its free a munmap, so the window holds thousands of each to count
[variants.malloc]
mmap-64k = {{ env = {{ MALLOC_MMAP_THRESHOLD_ = "65536" }} }}

[observe]
alloc = {{ stacks = false }}
"""
GOAL = 0.01
DRAIN_S = 0.5  # after SIGSTOP of sysbench, for the queries in flight to end


def strace_counts(table: str) -> dict[str, int]:
    """Calls per syscall from `strace -c` output:
    % time     seconds  usecs/call     calls    errors syscall
     61.49    0.010334          10      1002           munmap"""
    counts = dict.fromkeys(SYSCALLS, 0)
    for line in table.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[-1] in counts and fields[3].isdigit():
            counts[fields[-1]] = int(fields[3])
    return counts


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    """sysbench (`pid`) stopped, so the server it drives goes idle; continued on exit."""
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(DRAIN_S)
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def strace_attached(server: int, out: Path) -> subprocess.Popen:
    argv = ["strace", "-c", "-f", "-e", "trace=" + ",".join(SYSCALLS), "-o", str(out), "-p", str(server)]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:  # "strace: Process 123 attached with 35 threads"
        if "attached" in line:
            return proc
    raise C.BenchError(f"strace never attached to {server}: {proc.wait()}")


def compare_window(server: int, client: int, seconds: float, work: Path) -> dict[str, tuple[int, int]]:
    """(strace, perflab) calls per syscall over one stretch of `seconds` of load."""
    table = work / "strace.txt"
    with stopped(client), SyscallRecorder(server, work) as recorder:
        tracer = strace_attached(server, table)
        try:
            os.kill(client, signal.SIGCONT)
            time.sleep(seconds)
            os.kill(client, signal.SIGSTOP)
            time.sleep(DRAIN_S)
        finally:
            tracer.send_signal(signal.SIGINT)  # detach and write the table
            tracer.wait(timeout=120)
    theirs, ours = strace_counts(table.read_text()), recorder.counts().calls
    return {name: (theirs[name], ours[name]) for name in SYSCALLS}


@contextlib.contextmanager
def compared_inside_the_window(seconds: float, work: Path, found: dict) -> Iterator[None]:
    """CellRunner's window (client.wait) with the comparison run at its start, on the cell's server."""
    servers: list[Mysqld] = []
    start, wait = Mysqld.start, cell_module.client.wait

    def start_and_remember(server: Mysqld, *args: object, **kwargs: object) -> None:
        start(server, *args, **kwargs)
        servers.append(server)

    def compare_then_wait(child, *args: object, **kwargs: object) -> int:  # noqa: ANN001 - a Child
        found.update(compare_window(servers[-1].pid, child.pid, seconds, work))
        return wait(child, *args, **kwargs)

    Mysqld.start = start_and_remember  # type: ignore[method-assign]
    cell_module.client.wait = compare_then_wait  # type: ignore[assignment]
    try:
        yield
    finally:
        Mysqld.start = start  # type: ignore[method-assign]
        cell_module.client.wait = wait  # type: ignore[assignment]


def run(seconds: float, work: Path) -> tuple[dict[str, tuple[int, int]], dict]:
    # the cell's own window outlasts the comparison, which stops and starts sysbench within it
    exp = spec.parse(EXPERIMENT.format(duration=int(seconds) + 8), "<exactness>")
    preflight.check(exp)
    found: dict[str, tuple[int, int]] = {}
    with Results(work / "results", create=True) as results:
        runner = CellRunner(exp, results)
        snapshot = runner.prepare(work)
        with compared_inside_the_window(seconds, work / "compare", found):
            (work / "compare").mkdir()
            row = runner.run(exp.cells()[0], snapshot, work)
    if row["status"] != "ok":
        raise C.BenchError(f"the cell failed: {row['error']}")
    return found, row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="load between strace's attach and detach")
    parser.add_argument("--quick", action="store_true", help="2 s of load, a smoke test")
    args = parser.parse_args()
    if shutil.which("strace") is None:
        raise C.BenchError("strace not found: apt-get install strace")
    seconds = 2.0 if args.quick else args.seconds
    with C.workdir() as work:
        found, row = run(seconds, work)
    rows, worst = [], 0.0
    for name, (theirs, ours) in found.items():
        diff = abs(ours - theirs) / max(theirs, 1)
        worst = max(worst, diff) if theirs or ours else worst
        rows.append([name, theirs, ours, ours - theirs, C.pct(diff)])
    C.say(C.table(["syscall", "strace -c", "perflab", "perflab - strace", "relative"], rows))
    txn = row["summary"]["transactions"]
    C.say(f"\ncell: {txn} transactions, {row['summary']['qps']:,.0f} QPS (strace attached for {seconds:.0f} s of it)")
    if found["munmap"][0] < 100:
        C.say("too few munmap calls to judge 1%: is sort_buffer_size 32M mmapping per query?")
    C.say(
        f"worst relative difference {worst:.3%}: goal <= {GOAL:.0%}: {'GOAL MET' if worst <= GOAL else 'GOAL MISSED'}"
    )
    C.final_json({name: {"strace": a, "perflab": b} for name, (a, b) in found.items()} | {"worst": worst})
    return 0


if __name__ == "__main__":
    sys.exit(main())
