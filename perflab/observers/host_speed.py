"""[observe] host_speed: how fast the VM's vCPUs ran during a cell's window, from a canary.

Why: on the 2-vCPU VM perflab is developed on, the same cell's QPS varies 9% between server
restarts and drifts 7% over a session on an idle guest, and a register-only spin loop, timed
in its own thread CPU time, varies 2-4x over minutes: the vCPU itself runs slower at times (the
host's other tenants, its clock), which no counter inside the guest shows (steal was 0.3%).
Across cells, log QPS follows the canary's log speed (r = 0.88, slope 0.70 on
oltp_read_only; bench/archive/host_speed.py). analyze/host_speed.py uses the figure as a covariate
of the verdicts; docs/methodology.md#host-speed has the measurements.

What: host_speed.c (beside this file), compiled once per machine, spins about 1 ms of fixed
work, then chases pointers through a 1 MiB buffer (about 1 ms more), every PERIOD_MS on every
CPU perflab may run on, one thread pinned to each (about 1% of each vCPU), and prints the CPU
time each took. Preemption stops a thread's CPU clock, so a busy
guest does not change it. All CPUs, not one: this VM's two vCPUs change speed apart (10 s
medians of two pinned canaries: r = 0.07-0.62, bench/archive/vcpu_speeds.py), and the server and the
client run on both. The
cell's field:

    {"work_ns": 812000.0,        # the geometric mean over the CPUs of each one's median CPU ns
                                 # for the fixed work in the window (lower: faster)
     "per_cpu": {"0": 790000.0, "1": 834600.0},   # each CPU's median
     "samples": 100, "period_ms": 200,
     "spread": 0.07,             # (p90 - p10) / median of the window's samples, all CPUs
     "seconds": [[0, 805000.0], [1, 820000.0], ...],   # per second since the window's start:
                                                       # the geometric mean of the CPUs' medians
     "chase_ns": 1040000.0,      # the same for the pointer chase after each spin (cache and
     "chase_per_cpu": {"0": 990000.0, "1": 1092500.0}}  # memory latency; null: an older canary)

Two figures, not one: the spin times the core (its clock, a busy sibling), the chase the caches
and memory the host shares with its other tenants, which move apart (r = 0.65-0.67 between the
two over cells) and both move QPS; analyze/host_speed.py combines them with the weight a
`perflab calibrate --chase` measured (opt-in: the server's own use of the caches can move the
chase too; docs/methodology.md#host-speed).

    with HostSpeed(cache, log) as canary:     # started before the workload
        ...                                   # warm-up, window
    canary.fields(window_start, window_end)   # CLOCK_MONOTONIC seconds (time.monotonic())
"""

from __future__ import annotations

import math
import os
import statistics
from pathlib import Path
from typing import Any, Self

from perflab.errors import PerflabError
from perflab import cbuild
from perflab.places import Place, Process, Site
from perflab.places.here import HERE
from perflab.places.proc import clean_env

SOURCE = Path(__file__).with_name("host_speed.c")
PERIOD_MS = 200
MIN_SAMPLES = 5  # fewer in a window: no figure (a 1 s window has 5)


class HostSpeedError(PerflabError):
    """The canary could not be built or did not report."""


def build(cache: Path, static: bool = False) -> Path:
    """The canary, built here; `static`: linked statically (libc.a), for another host, whose C library
    may be older than this machine's (HostSpeed's `site`). Without libc.a, the dynamic build."""
    flags = ["-O2", "-Wall", "-pthread"]
    if static:
        try:
            return cbuild.compiled(
                SOURCE, cache, "perflab-canary-static", "", [*flags, "-static"], "the static host-speed canary",
                error=HostSpeedError,
            )  # fmt: skip
        except HostSpeedError:
            pass  # no static C library here (libc6-dev ships it): a host must run the dynamic one
    return cbuild.compiled(SOURCE, cache, "perflab-canary", "", flags, "the host-speed canary", error=HostSpeedError)


Sample = tuple[float, float, int, float]  # (monotonic seconds, work ns, CPU (-1: not pinned), chase ns (0: none))


def parse(text: str) -> list[Sample]:
    """One sample per complete line ("monotonic_s work_ns [cpu [chase_ns]]"); a partial last
    line is left out."""
    out = []
    for line in text.splitlines(keepends=True):
        parts = line.split()
        if not line.endswith("\n") or not 2 <= len(parts) <= 4:
            continue
        try:
            at, work = float(parts[0]), float(parts[1])
            cpu = int(parts[2]) if len(parts) >= 3 else -1
            chase = float(parts[3]) if len(parts) == 4 else 0.0
        except ValueError:
            continue
        if work > 0:
            out.append((at, work, cpu, max(chase, 0.0)))
    return out


def _geomean_of_medians(works_by_cpu: dict[int, list[float]], least: int) -> float | None:
    """The geometric mean over the CPUs of each one's median; CPUs with fewer than `least`
    samples are left out (None: none left)."""
    logs = [math.log(statistics.median(w)) for w in works_by_cpu.values() if len(w) >= least]
    return math.exp(statistics.fmean(logs)) if logs else None


def _medians(by_cpu: dict[int, list[float]]) -> dict[str, float]:
    """Each pinned CPU's median, of the CPUs with MIN_SAMPLES samples."""
    return {
        str(cpu): round(statistics.median(w), 1)
        for cpu, w in sorted(by_cpu.items())
        if cpu >= 0 and len(w) >= MIN_SAMPLES
    }


def window_fields(samples: list[Sample], start: float, end: float) -> dict[str, Any]:
    """The cell's `host_speed` from the canary's samples inside [start, end]."""
    inside = [(at - start, work, cpu) for at, work, cpu, _ in samples if start <= at <= end]
    works = sorted(work for _, work, _ in inside)
    fields: dict[str, Any] = {
        "work_ns": None,
        "per_cpu": {},
        "samples": len(works),
        "period_ms": PERIOD_MS,
        "spread": None,
        "seconds": [],
        "chase_ns": None,
        "chase_per_cpu": {},
    }
    chases: dict[int, list[float]] = {}
    for at, _, cpu, chase in samples:
        if chase > 0 and start <= at <= end:
            chases.setdefault(cpu, []).append(chase)
    chase_ns = _geomean_of_medians(chases, MIN_SAMPLES)
    if chase_ns is not None:
        fields.update(chase_ns=round(chase_ns, 1), chase_per_cpu=_medians(chases))
    by_cpu: dict[int, list[float]] = {}
    by_second: dict[int, dict[int, list[float]]] = {}
    for t, work, cpu in inside:
        by_cpu.setdefault(cpu, []).append(work)
        by_second.setdefault(math.floor(t), {}).setdefault(cpu, []).append(work)
    work_ns = _geomean_of_medians(by_cpu, MIN_SAMPLES)
    if work_ns is None:
        return fields
    median = statistics.median(works)
    deciles = statistics.quantiles(works, n=10)
    fields.update(
        work_ns=round(work_ns, 1),
        per_cpu=_medians(by_cpu),
        spread=round((deciles[-1] - deciles[0]) / median, 4),
        seconds=[[s, round(_geomean_of_medians(c, 1) or 0.0, 1)] for s, c in sorted(by_second.items())],
    )
    return fields


_tried: dict[tuple[str, str], str | None] = {}  # (a place's name, the canary there) -> None: it runs; else why not


class HostSpeed:
    """The canary as a child process for one cell, its samples in `log` (here). `site`: where the
    server runs, when not here: the canary runs there (built statically: any host's C library runs
    it, copied there once per run and tried once: a host that cannot run it fails the cell with its
    loader's words), on the CPUs `cpus` the server may use there, its lines stamped with that place's
    wall clock (`-r`) into a file in `site.dir`, fetched into `log` for `fields`, whose window is put
    on that clock with `site.clock`'s readings first."""

    def __init__(
        self,
        cache: Path,
        log: Path,
        period_ms: int = PERIOD_MS,
        cpus: list[int] | None = None,
        site: Site | None = None,
    ) -> None:
        self.site = site or Site(HERE, log.parent)
        self.binary = build(cache, static=site is not None)
        self.log = log
        self.period_ms = period_ms
        self.cpus = sorted(os.sched_getaffinity(0)) if cpus is None else cpus  # where the server and client run
        self.there = self.site.dir / log.name if site is not None else log  # its samples, where it runs
        self._child: Process | None = None
        self._stopped = False
        self._died: int | None = None  # its exit code when it had ended on its own before the stop

    def __enter__(self) -> Self:
        place = self.site.place
        program = place.install(self.binary)
        if program != str(self.binary):  # a copy there (another host's C library): tried once first
            _runs(place, program)
        stamps = ["-r"] if self.site.clock is not None else []  # the place's wall clock: aligned in fields()
        argv = [program, *stamps, str(self.period_ms), *map(str, self.cpus)]
        self._child = place.spawn(argv, self.there, env=clean_env())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._child is not None:
            self._died = self._child.poll()  # None: it still ran, as it should until now
            self._stopped = True
            self._child.kill()

    def fields(self, start: float, end: float) -> dict[str, Any]:
        """The window's figure (after the canary stopped, or while it runs); HostSpeedError if it
        died on its own, before it was stopped (its output says why): its samples would then stop
        short of the window's end, a figure of part of it that the verdicts adjust by."""
        if self.site.clock is not None:
            try:
                self.site.place.fetch(self.there, self.log)
            except (OSError, PerflabError) as exc:
                raise HostSpeedError(
                    f"the canary's samples{self.site.place.where} could not be fetched: {exc}", f"its file there: {self.there}"
                ) from exc
            offset = self.site.clock.require().monotonic(0.0)  # a wall-clock time there -> this machine's, +offset
            start, end = start - offset, end - offset  # the window on that place's wall clock
        text = self.log.read_text(encoding="ascii", errors="replace")
        died = self._died if self._stopped else self._child.poll() if self._child is not None else None
        if died is not None:
            tail = text.strip().splitlines()[-1:] or ["no output"]
            raise HostSpeedError(
                f"the host-speed canary exited with code {died} before it was stopped: {tail[0]}",
                f"see {self.log}; or set host_speed = false under [observe]",
            )
        return window_fields(parse(text), start, end)


def _runs(place: Place, program: str) -> None:
    """`program` there, once it has run there without arguments (its usage, exit 2); HostSpeedError
    when it cannot (a C library older than this machine's: the loader says which)."""
    key = (place.name, program)
    if key not in _tried:
        done = place.run([program], timeout=60)
        said = (done.stdout + done.stderr).strip()
        _tried[key] = None if done.status == 2 and "usage:" in said else f"(exit {done.status}) {said[-400:]}"
    why = _tried[key]
    if why is not None:
        glibc = place.run(["getconf", "GNU_LIBC_VERSION"]).stdout.strip() or "an unknown C library"
        raise HostSpeedError(
            f"the host-speed canary built here does not run{place.where} {why}",
            f"it has {glibc}: install libc6-dev here (its libc.a makes the canary static), "
            "or set host_speed = false under [observe] (`perflab docs hosts`)",
        )
