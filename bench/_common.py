"""Shared helpers of the bench/ scripts: statistics, tables, the machine's load, clean-up.

Not a benchmark itself. The scripts import it as `_common` (python3 puts bench/ on sys.path
when it runs bench/NAME.py).

Work directories are created on /dev/shm with the prefix "plbench-", not "perflab-", so
that integration tests that look for leftover "perflab-" processes do not count ours.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perflab.observers.resources import machine_busy_s, process_cpu_s  # noqa: E402

TMPFS = Path("/dev/shm")
PREFIX = "plbench-"

# two-sided 95% Student t critical values, df = 1..30 (beyond: normal 1.96)
_T95 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


class BenchError(Exception):
    """A real error: the benchmark could not measure (not a missed goal)."""


def cli(*args: str) -> str:
    """`perflab ARGS` as a user runs it, from this checkout; its stdout, or BenchError with its stderr's tail."""
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "perflab", *args], check=False, capture_output=True, text=True, cwd=root
    )
    if done.returncode != 0:
        raise BenchError(f"perflab {args[0]} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.stdout


# ----------------------------------------------------------------------------- statistics


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values)


def stdev(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) if len(values) >= 2 else None


def cv(values: Sequence[float]) -> float | None:
    """Coefficient of variation, stdev / mean (sample stdev, as perflab's report)."""
    sd = stdev(values)
    return None if sd is None else sd / statistics.fmean(values)


def t95(n: int) -> float:
    df = n - 1
    return _T95[df - 1] if 1 <= df <= len(_T95) else 1.96


def ci95(values: Sequence[float]) -> tuple[float, float] | None:
    """95% confidence interval of the mean (Student t); None with fewer than 2 values."""
    sd = stdev(values)
    if sd is None:
        return None
    m = statistics.fmean(values)
    half = t95(len(values)) * sd / math.sqrt(len(values))
    return m - half, m + half


def upper(k: int, n: int) -> float:
    """One-sided 95% Clopper-Pearson upper bound of a rate seen k times in n."""
    from scipy.stats import beta  # scipy is perflab's own dependency; imported where it is used

    return 1.0 if k == n else float(beta.ppf(0.95, k + 1, n - k))


def rnd(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def pct(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value * 100:.{digits}f}%"


# ----------------------------------------------------------------------------- output


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain fixed-width table: first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


def say(text: str = "") -> None:
    print(text, flush=True)


def final_json(data: dict[str, Any]) -> None:
    """The one machine-readable line, always the last line of stdout."""
    print(json.dumps(data, sort_keys=False, separators=(",", ":")), flush=True)


def other_cpu_cores(cells: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """Mean and max of the cells' other_cpu_cores (what else the machine ran in their windows)."""
    found = [(c.get("resources") or {}).get("other_cpu_cores") for c in cells]
    found = [x for x in found if x is not None]
    return {"mean": rnd(mean(found), 3), "max": rnd(max(found), 3)} if found else {"mean": None, "max": None}


# ----------------------------------------------------------------------------- experiments

READ_ONLY = """\
[experiment]
name = "{name}"
duration = "{duration}s"
{warmup_lines}
repeats = {rounds}

[dataset]
tables = {tables}
table_size = {table_size}

[workload]
test = "oltp_read_only"
threads = [2]
options = {{ rand_type = "uniform" }}
"""


def read_only_experiment(name: str, cfg: dict[str, Any], rest: str) -> str:
    """An experiment file of the A/B benches: oltp_read_only at 2 threads with uniform keys, a
    fixed warm-up (or cfg warmup "auto" with its max_warmup: perflab's default), `cfg`'s duration,
    rounds and dataset, then `rest` (its variants, [observe])."""
    cfg = dict(cfg)
    warmup, most = cfg.pop("warmup"), cfg.pop("max_warmup", None)
    lines = f'warmup = "{warmup}s"'
    if warmup == "auto":
        lines = 'warmup = "auto"' + (f'\nmax_warmup = "{most}s"' if most is not None else "")
    return READ_ONLY.format(name=name, warmup_lines=lines, **cfg) + "\n" + rest


# ----------------------------------------------------------------------------- machine


def _processes(name: str) -> list[tuple[int, str]]:
    """(pid, cmdline) of live processes whose command name is `name`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        state = stat[stat.rindex(")") + 2]
        if comm == name and state != "Z":
            found.append((int(entry), cmdline))
    return found


@dataclass(frozen=True)
class CpuMark:
    """A point in time with the machine's busy CPU and our own CPU (this process, its reaped
    children, and the live processes named), to tell how much CPU *others* used between two."""

    t: float
    busy_s: float  # user+nice+system+irq+softirq of all CPUs, /proc/stat
    ours_s: float


def cpu_mark(live_pids: Sequence[int] = ()) -> CpuMark:
    ours = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        ours += usage.ru_utime + usage.ru_stime
    ours += sum(process_cpu_s(pid) for pid in live_pids)
    return CpuMark(time.monotonic(), machine_busy_s(), ours)


def foreign_cores(a: CpuMark, b: CpuMark) -> float | None:
    """CPU used by everything but us between two marks, in cores (0 = idle, 2 = both CPUs)."""
    wall = b.t - a.t
    if wall <= 0:
        return None
    return max(0.0, ((b.busy_s - a.busy_s) - (b.ours_s - a.ours_s)) / wall)


class Machine:
    """What else the machine was doing: load average and foreign servers/clients at the start
    and the end, and the CPU others used over the whole run (foreign = not ours: not this
    process or its children; processes not under one of our work directories)."""

    def __init__(self) -> None:
        self.ours: list[str] = []
        self.start = self._sample()
        self.mark = cpu_mark()
        self.end: dict[str, Any] | None = None

    def _sample(self) -> dict[str, Any]:
        ours = tuple(self.ours)
        foreign = {
            name: sorted(pid for pid, cmd in _processes(name) if not any(o in cmd for o in ours))
            for name in ("mariadbd", "sysbench")
        }
        return {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "loadavg": [round(x, 2) for x in os.getloadavg()],
            "foreign_mariadbd": len(foreign["mariadbd"]),
            "foreign_sysbench": len(foreign["sysbench"]),
            "cpus": len(os.sched_getaffinity(0)),
        }

    def finish(self) -> dict[str, Any]:
        self.end = self._sample()
        cores = foreign_cores(self.mark, cpu_mark())
        return {"start": self.start, "end": self.end, "foreign_cpu_cores": rnd(cores, 3)}

    @staticmethod
    def describe(info: dict[str, Any]) -> str:
        s, e = info["start"], info["end"]
        cores = info["foreign_cpu_cores"]
        text = (
            f"machine: {s['cpus']} CPUs; other processes used {cores:.2f} cores on average during the run; "
            f"load average {s['loadavg'][0]} at start, {e['loadavg'][0]} at end; other mariadbd/sysbench "
            f"running: {s['foreign_mariadbd']}/{s['foreign_sysbench']} at start, "
            f"{e['foreign_mariadbd']}/{e['foreign_sysbench']} at end"
        )
        if cores is not None and cores > BUSY_CORES:
            text += "\nWARNING: the machine was not idle; these figures include other people's load"
        return text


BUSY_CORES = 0.05  # foreign CPU above this (in cores) and a run is not on an idle machine


def leftovers(marker: str) -> list[tuple[int, str]]:
    """mariadbd and sysbench processes whose command line contains `marker` (our work dir)."""
    return [p for name in ("mariadbd", "sysbench") for p in _processes(name) if marker in p[1]]


@contextlib.contextmanager
def workdir(machine: Machine | None = None) -> Iterator[Path]:
    """A fresh directory on /dev/shm, removed at the end whatever happens. Any mariadbd or
    sysbench still running from it then is ours: it is killed, and that is an error."""
    path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=TMPFS if TMPFS.is_dir() else None))
    if machine is not None:
        machine.ours.append(str(path))
    stray: list[tuple[int, str]] = []
    try:
        yield path
    finally:
        stray = leftovers(str(path))
        for pid, _ in stray:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(path, ignore_errors=True)
    if stray:
        raise BenchError(f"processes left running under {path} (killed): {stray}")


def _as_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main_guard(run: Any) -> None:
    """Run `run()`; exit 0 when it measured (goal met or not), 1 on a real error, 130 on
    interruption. SIGTERM/SIGHUP become KeyboardInterrupt so every `finally` runs."""
    signal.signal(signal.SIGTERM, _as_interrupt)
    signal.signal(signal.SIGHUP, _as_interrupt)
    try:
        run()
    except KeyboardInterrupt:
        print("interrupted: everything this benchmark started has been stopped", file=sys.stderr)
        sys.exit(130)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except Exception as exc:  # a PerflabError or a bug: a real error either way
        message = getattr(exc, "message", None) or str(exc)
        hint = getattr(exc, "hint", None)
        print(f"error: {type(exc).__name__}: {message}" + (f"\nhint: {hint}" if hint else ""), file=sys.stderr)
        if not hasattr(exc, "message"):
            raise
        sys.exit(1)
