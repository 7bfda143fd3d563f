"""The workload client of one cell: its command line (the workload tool's, workloads/), its
start, the warm-up, the deadline and its output (sysbench's here; another tool's in its module).

One sysbench process runs warm-up + window seconds with `--report-checkpoints=<warm-up>`,
so its statistics restart when the measured window starts and its summary covers the
window only. Output: the summary and the per-second intervals, each marked warm-up or not:
{"t": 12.0, "qps": 10342.5, ..., "warmup": 0}.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, BinaryIO

from perflab.errors import WorkloadError
from perflab.places.proc import Child, clean_env
from perflab.workloads import sysbench_output
from perflab.spec.schema import ExperimentFile


def window_seconds(spec: ExperimentFile) -> tuple[int, int]:
    """(warm-up, measured window) in whole seconds, as sysbench runs them."""
    e = spec.experiment
    return round(e.window_start), round(e.duration)


def start(
    command: list[str], out: Path, cpus: list[int] | None, env: dict[str, str] | None = None, stamped: bool = False
) -> Child:
    """The client started with its output in `out` (stdout and stderr interleaved), on `cpus`, in
    `env` (default: perflab's, cleaned; a client variant's: workloads/client_variant.py). `stamped`:
    each line prefixed with its arrival, in seconds since the launch ("  3.012 | ..."), for a
    tool whose reports carry no time (go-tpc); `drain(child)` once it has exited."""
    if not stamped:
        with out.open("w", encoding="utf-8") as sink:
            return Child(command, env=env or clean_env(), stdout=sink, cpus=cpus)
    child = Child(command, env=env or clean_env(), stdout=subprocess.PIPE, cpus=cpus)
    stamper = threading.Thread(target=_stamp, args=(child, out), name="client-stamp", daemon=True)
    stamper.start()
    _STAMPERS[child.pid] = stamper
    return child


_STAMPERS: dict[int, threading.Thread] = {}


def _stamp(child: Child, out: Path) -> None:
    assert child.popen.stdout is not None
    with out.open("w", encoding="utf-8") as sink, child.popen.stdout as pipe:
        for raw in pipe:
            sink.write(stamp(time.monotonic() - child.started, raw.decode("utf-8", errors="replace")))
            sink.flush()


def stamp(seconds: float, line: str) -> str:
    """A client's output line with its arrival, in seconds since its launch ("    3.012 | ...": gotpc's _STAMP)."""
    return f"{seconds:9.3f} | {line}"


def drain(child: Child, timeout: float = 10.0) -> None:
    """Wait for a stamped client's last lines to reach its output file."""
    stamper = _STAMPERS.pop(child.pid, None)
    if stamper is not None:
        stamper.join(timeout)


STARTED_LINE = b"Threads started!"  # sysbench's clock (its reports, its checkpoint) starts here


class StartWatch:
    """Waits in a thread of its own for the client's start (`until()`: its time.monotonic(), or
    WorkloadError), while perflab attaches its observers (seconds, with pmp): the warm-up and the
    window are timed from that moment, not from the process start. sysbench's is its "Threads
    started!" (every client thread connected, its per-second reports count from there:
    `wait_threads_started`); pgbench's, every client connected (workloads/pgbench.wait_connected).

        watch = StartWatch(functools.partial(wait_threads_started, out, child, 60))
        ...                                  # attach profilers, check the client's maps
        origin = watch.wait()                # time.monotonic() of its start
    """

    def __init__(self, until: Callable[[], float]) -> None:
        self.until = until
        self.seen: float | None = None
        self.error: WorkloadError | None = None
        self._thread = threading.Thread(target=self._watch, name="client-start", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        try:
            self.seen = self.until()
        except WorkloadError as exc:
            self.error = exc

    def wait(self) -> float:
        self._thread.join()
        if self.error is not None:
            raise self.error
        assert self.seen is not None
        return self.seen


def wait_threads_started(out: Path, child: Child, deadline_s: float) -> float:
    """time.monotonic() when "Threads started!" was written to `out` (polled every 10 ms; a poll
    late by a VM pause or a busy perflab is corrected by the file's mtime, `_written_at`); now if
    sysbench exits first (its output then says why); WorkloadError after `deadline_s`."""
    deadline = time.monotonic() + deadline_s
    seen = 0
    while time.monotonic() < deadline and child.poll() is None:
        position = max(0, seen - len(STARTED_LINE))  # the line may have been half written last time
        with out.open("rb") as f:
            f.seek(position)
            text = f.read()
            if STARTED_LINE in text:
                return max(child.started, _written_at(f, text.split(STARTED_LINE, 1)[1]))
        seen = position + len(text)
        time.sleep(0.01)
    if child.poll() is None:
        child.kill()
        raise WorkloadError(
            f"sysbench did not start its threads within {deadline_s:g} s (connecting them)",
            f"see {out}; a server refusing connections (max_connections), or raise experiment.timeout_margin",
        )
    return time.monotonic()


REPORT_LINE = re.compile(rb"^\[ (\d+(?:\.\d+)?)s \]", re.MULTILINE)


def _written_at(f: BinaryIO, after: bytes) -> float:
    """time.monotonic() when the threads started, from the output file's last write: the line
    itself, or the per-second report "[ Ns ]" written N s after it (sysbench's reports count from
    there). The file's mtime is CLOCK_REALTIME (to a jiffy), carried over to the monotonic clock."""
    now, real = time.monotonic(), time.time_ns()
    reports = [float(m) for m in REPORT_LINE.findall(after)]
    lag = (real - os.fstat(f.fileno()).st_mtime_ns) / 1e9 + (reports[-1] if reports else 0.0)
    return now - min(max(lag, 0.0), 3600.0)


def sleep_until(deadline: float, child: Child) -> None:
    while (left := deadline - time.monotonic()) > 0 and child.poll() is None:
        time.sleep(min(left, 0.5))


def window_began(child: Child, planned: float, name: str = "sysbench") -> None:
    """WorkloadError when the client had already ended, well, as perflab began its measured window
    (planned at `planned`, time.monotonic()): perflab itself was that late (a pause of this
    machine, a starved process), and the window's counters (CPU, faults, RSS, status) would cover
    none of the client's run while its own figures covered all of it. A failed cell is measured
    again where its variant has run well (docs/experiment.md, "repeats")."""
    if child.poll() == 0:  # ended well, its whole run done (one that failed says so itself: read_output)
        late = time.monotonic() - planned
        raise WorkloadError(
            f"perflab began the measured window {late:.1f} s late, after {name} had ended: "
            "the window's counters would cover none of its run",
            "a pause of this machine or a starved perflab (other processes on its CPUs); run again",
        )


def wait(child: Child, seconds: int, margin: float, name: str = "sysbench") -> int:
    """The cell's deadline: a stuck client `name` (or a server that stopped answering) is killed."""
    try:
        return child.wait(timeout=seconds + margin)
    except TimeoutError:
        child.kill()
        raise WorkloadError(
            f"timed out: {name} did not finish {seconds} s of work in {seconds + margin:.0f} s; killed",
            "a hung server or client; raise experiment.timeout_margin if the machine is just slow",
        ) from None


def read_output(out: Path, code: int, warmup: int) -> tuple[sysbench_output.Summary, list[dict[str, Any]]]:
    """The window's summary and the per-second intervals; WorkloadError if sysbench failed."""
    text = out.read_text(encoding="utf-8", errors="replace")
    summary = sysbench_output.parse_summary(text)
    overflow = sysbench_output.overflow(text)
    if overflow:
        raise WorkloadError(overflow, f"a lower [workload] rate, or more threads; full output: {out}")
    if code != 0 or summary is None:
        tail = "\n".join(text.strip().splitlines()[-10:])
        how = f"died: signal {-code} ({signal.Signals(-code).name})" if code < 0 else f"exited with code {code}"
        raise WorkloadError(f"sysbench {how}:\n{tail}", f"full output: {out}")
    summary = replace(summary, rate=sysbench_output.parse_rate(text, warmup))
    return summary, [_interval(iv, warmup) for iv in sysbench_output.parse_intervals(text)]


def _interval(iv: sysbench_output.Interval, warmup: int) -> dict[str, Any]:
    data = asdict(iv)
    data.pop("threads")
    data["warmup"] = int(iv.t <= warmup)
    return data
