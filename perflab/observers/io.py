"""[observe] io: the storage's I/O and the server's, once a second, from the workload's start.

Per sample (`t` in the workload's seconds, as intervals and stalls; counters, cumulative):
- `disk.reads`, `disk.read_bytes`, `disk.writes`, `disk.write_bytes`, `disk.flushes`: the
  storage's block device in /proc/diskstats (the whole device: every process on it counts;
  nothing on tmpfs, which has none);
- the server's own counters (`Kind.io_counters`: `innodb.*`, `binlog.*` or `pg.*`);
- `sys.fsync`, `sys.fdatasync`: the server's calls (its whole process tree), from the kernel's
  syscall tracepoints (a `perf record` of the window, as the allocator's syscalls: observers/syscalls.py).

/proc/diskstats, one line per device (sectors are 512 bytes whatever the device's block size):
    254       0 vda 915592 45511 28886282 1230782 1150099 612777 292568752 629888 5 170700 ... 352502 12586
    major minor name reads merged sectors_read ms writes merged sectors_written ms ... flushes flush_ms

    with IoSampler(dev="254:0", server_counters=lambda: kind.io_counters(server), origin=origin) as io:
        run()
    io.samples -> [(-0.4, {"disk.writes": 1150099.0, ...}), (0.6, {...}), ...]
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from perflab.errors import Problem
from perflab.observers.perf import PerfRecorder
from perflab.places import Clock, Place
from perflab.places.here import HERE

DISKSTATS = Path("/proc/diskstats")
SECTOR = 512
FSYNCS = ("fsync", "fdatasync")
Sample = tuple[float, dict[str, float]]


@dataclass(frozen=True)
class DiskCounters:
    reads: int
    read_bytes: int
    writes: int
    write_bytes: int
    flushes: int  # 0 on kernels before 5.5 (no flush fields)

    def named(self) -> dict[str, float]:
        return {f"disk.{k}": float(v) for k, v in self.__dict__.items()}


def parse_diskstats(text: str, dev: str) -> DiskCounters | None:
    """The counters of device `dev` ("major:minor") in /proc/diskstats' text; None if absent."""
    major, _, minor = dev.partition(":")
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 14 and f[0] == major and f[1] == minor:
            flushes = int(f[18]) if len(f) >= 20 else 0
            return DiskCounters(int(f[3]), int(f[5]) * SECTOR, int(f[7]), int(f[9]) * SECTOR, flushes)
    return None


def local_diskstats() -> str:
    return DISKSTATS.read_text(encoding="ascii")


class IoSampler:
    """Samples the disk `dev` (None: no block device, tmpfs) and `server_counters()` every
    `interval` seconds in a thread, with times relative to `origin` (time.monotonic()).
    `diskstats()`: the text of the /proc/diskstats `dev` is in (a server host's: observers/beside.py)."""

    def __init__(
        self,
        dev: str | None,
        server_counters: Callable[[], dict[str, float]],
        origin: float,
        interval: float = 1.0,
        diskstats: Callable[[], str] = local_diskstats,
    ) -> None:
        self.dev = dev
        self.server_counters = server_counters
        self.origin = origin
        self.interval = interval
        self.diskstats = diskstats
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="io-sampler", daemon=True)

    def sample(self) -> None:
        values: dict[str, float] = {}
        if self.dev is not None:
            disk = parse_diskstats(self.diskstats(), self.dev)
            values.update(disk.named() if disk else {})
        values.update(self.server_counters())
        self.samples.append((round(time.monotonic() - self.origin, 3), values))

    def _loop(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            self.sample()
            due += self.interval
            self._stop.wait(max(0.0, due - time.monotonic()))

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.sample()  # the end of what was covered


def fsync_events() -> list[str]:
    """perf record's options for the fsync tracepoints (here, and on a server host)."""
    return ["-e", ",".join(f"syscalls:sys_enter_{name}" for name in FSYNCS)]


class FsyncRecorder(PerfRecorder):
    """`perf record` of fsync and fdatasync, system-wide, kept for the server's process tree, here or
    on a server's host (`place`, `clock`: PerfRecorder's)."""

    def __init__(self, pid: int, workdir: Path | str, place: Place = HERE, clock: Clock | None = None) -> None:
        super().__init__(pid, Path(workdir) / "fsyncs", place=place, clock=clock)  # apart from the allocator's

    def events(self) -> list[str]:
        return fsync_events()

    def times(self) -> dict[str, list[float]]:
        """Every call of the server's tree per syscall, on this machine's CLOCK_MONOTONIC; `lost` counts
        the runs of events perf lost (the counts are then too low)."""
        pids = self._pids(self.descendants())
        text = self._perf(["perf", "script", "-i", str(self.data), "--pid", pids, "-F", "time,event"], "script")
        here = self.on_this_clock()
        return {name: [here(t) for t in at] for name, at in parse_times(text.splitlines()).items()}


_TIMED = re.compile(r"(\d+\.\d+):\s+syscalls:sys_enter_(\w+):")


def parse_times(lines: Iterable[str]) -> dict[str, list[float]]:
    """`perf script -F time,event` lines -> {syscall: [time, ...]}:
    `  12345.678901: syscalls:sys_enter_fdatasync: `"""
    out: dict[str, list[float]] = {name: [] for name in FSYNCS}
    for line in lines:
        match = _TIMED.search(line)
        if match and match.group(2) in out:
            out[match.group(2)].append(float(match.group(1)))
    return out


def add_calls(samples: list[Sample], calls: dict[str, list[float]], origin: float) -> None:
    """Each sample gains `sys.NAME`: the calls made up to its time (cumulative, as the others)."""
    for name, times in calls.items():
        at = sorted(t - origin for t in times)
        i = 0
        for t, values in samples:
            while i < len(at) and at[i] <= t:
                i += 1
            values[f"sys.{name}"] = float(i)


def between(samples: list[Sample], start: float, end: float) -> dict[str, float]:
    """Growth of every counter from the last sample at or before `start` to the first at or after
    `end` (the span the samples cover around [start, end])."""
    before = [s for s in samples if s[0] <= start] or samples[:1]
    after = [s for s in samples if s[0] >= end] or samples[-1:]
    if not before or not after:
        return {}
    (_, a), (_, b) = before[-1], after[0]
    return {k: b[k] - a[k] for k in a if k in b}


LEVELS = ("innodb.checkpoint_age", "innodb.pages_dirty", "innodb.page_size")  # values now, not counters


def fields(samples: list[Sample], start: float, end: float, transactions: int) -> dict[str, Any]:
    """The cell's `resources.io`: every counter per transaction over the window [start, end]
    (workload seconds), the levels' means inside it, and the window's bytes per second."""
    grown = between(samples, start, end)
    if not grown or not transactions:
        return {"per_txn": {}, "levels": {}, "samples": len(samples)}
    per_txn = {k: round(v / transactions, 6) for k, v in sorted(grown.items()) if k not in LEVELS}
    inside = [v for t, v in samples if start <= t <= end]
    levels = {}
    for name in LEVELS:
        values = [v[name] for v in inside if name in v]
        if values:
            levels[name] = round(sum(values) / len(values), 1)
    seconds = max(end - start, 1e-9)
    rates = {f"{k}_per_s": round(grown[k] / seconds, 1) for k in ("disk.read_bytes", "disk.write_bytes") if k in grown}
    return {"per_txn": per_txn, "levels": levels, "rates": rates, "samples": len(samples)}


def stall_io(samples: list[Sample], start: float, end: float) -> dict[str, float]:
    """What grew during a stall [start, end): the figures its finding names (report/io_findings.py)."""
    grown = between(samples, start, end)
    keep = (
        "disk.write_bytes",
        "disk.read_bytes",
        "disk.flushes",
        "sys.fsync",
        "sys.fdatasync",
        "innodb.log_bytes_written",
        "innodb.pages_flushed",
        "pg.checkpoints",
        "pg.checkpoint_write_bytes",
        "pg.wal_bytes",
        "pg.buffers_backend_fsync",
    )
    out = {k: grown[k] for k in keep if grown.get(k)}
    if "innodb.checkpoint_age" in grown and "innodb.log_bytes_written" in grown:
        # age = LSN - checkpoint LSN: the checkpoint advanced by the redo written less the age's growth
        advanced = grown["innodb.log_bytes_written"] - grown["innodb.checkpoint_age"]
        out.update({"innodb.checkpointed_bytes": advanced} if advanced > 0 else {})
    page = next((v["innodb.page_size"] for _, v in reversed(samples) if "innodb.page_size" in v), None)
    if "innodb.pages_flushed" in out and page:
        out["innodb.flushed_bytes"] = out["innodb.pages_flushed"] * page
    return out


def io_problems(wanted: bool) -> list[Problem]:
    """[observe] io counts the server's fsyncs with `perf record` of syscall tracepoints."""
    if not wanted or shutil.which("perf") is not None:
        return []
    return [
        Problem(
            "observe.io",
            "perf installed (the server's fsyncs: syscall tracepoints)",
            "missing",
            "apt-get install linux-perf (or `make setup`); or [observe] io = false (on by default on a disk)",
        )
    ]


class IoObserver:
    """[observe] io around a cell's workload: the sampler from before the workload starts to its
    end, the fsync recorder over the same span; `fields(spans)` once both have stopped. `recorder`:
    another with FsyncRecorder's interface (its `times()` on this machine's CLOCK_MONOTONIC): the
    server host's (observers/beside.py)."""

    def __init__(
        self,
        dev: str | None,
        server_counters: Callable[[], dict[str, float]],
        pid: int,
        workdir: Path,
        recorder: Any = None,
        diskstats: Callable[[], str] = local_diskstats,
    ) -> None:
        self.started = time.monotonic()
        self.sampler = IoSampler(dev, server_counters, self.started, diskstats=diskstats)
        self.recorder = recorder if recorder is not None else FsyncRecorder(pid, workdir)

    def __enter__(self) -> Self:
        self.started = self.sampler.origin = time.monotonic()
        self.recorder.__enter__()
        try:
            self.sampler.__enter__()
        except BaseException:
            self.recorder.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.sampler.__exit__(*exc)
        finally:
            self.recorder.__exit__(*exc)

    def fields(self, workload: float, window: float, end: float, transactions: float) -> dict[str, Any]:
        """{"fields": the cell's resources.io, "samples": the series in the workload's seconds}
        (`workload`, `window`, `end`: CLOCK_MONOTONIC times of its t = 0, window start and end)."""
        add_calls(self.sampler.samples, self.recorder.times(), self.started)
        shift = workload - self.started
        samples = [(round(t - shift, 3), values) for t, values in self.sampler.samples]
        out = fields(samples, window - workload, end - workload, int(transactions))
        out["lost_chunks"] = self.recorder.lost
        return {"fields": out, "samples": samples, "window_s": window - workload}


def into_row(row: dict[str, Any], io: dict[str, Any] | None, status: list[Sample]) -> list[Sample]:
    """A measured cell's row gains `resources.io` and each stall its `io` (what grew in it);
    returns the cell's samples to store: `status` and the I/O series (names disk.*, sys.*, ...),
    on status's clock: seconds since the measured window began (the warm-up's are negative)."""
    if io is None:
        return status
    row["resources"]["io"] = io["fields"]
    for stall in row.get("stalls") or []:
        stall["io"] = stall_io(io["samples"], stall["start_s"], stall["end_s"])
    return [*status, *((round(t - io["window_s"], 3), values) for t, values in io["samples"])]
