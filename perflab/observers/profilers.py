"""The profilers of a cell, as one context manager, and their results.

    with Profilers(spec.observe, server.pid, rundir) as prof:  # perf starts (not yet recording)
        prof.workload_starting()            # perf (warmup = true) records
        start_client()
        prof.workload_started(client_pid)   # pmp attaches to the client (warmup = false: paused)
        sleep_through_warmup()
        prof.window_started()               # the others begin (pmp: resumed)
        run_window()
    prof.store(results, cell_id, spans)     # profiles/ + the profiles table, per target and phase
    prof.fields(spans)                      # {"host_speed": ...} with [observe] host_speed

Targets: the server (mariadbd) and the client (sysbench, attached once ld.so has mapped its
libraries). With `tree=True` (PostgreSQL: a postmaster forking one backend per connection) the
server target is the server's process tree: perf folds the samples of the postmaster and every
process it forked during the recording, pmp samples every member each tick; each is one profile.
Phases (observers/phases.py): the measured window, the warm-up and the seconds of detected
stalls, each a profile of its own, cut by time from one recording per profiler.
Each profile is stored with the transactions of the span it covers (so analyses can divide
by them), its seconds (stalls: per second is the fair basis, they have few transactions) and
its stack quality: what the binary offers (symbols, debug info, frame pointers), what the
samples show (stacks that reach a thread's entry point, frames without a name) and what to do.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Self

from perflab import debuginfo, servers
from perflab.errors import PerflabError
from perflab.observers.elf import FunctionStarts, inspect
from perflab.observers.host_speed import HostSpeed
from perflab.observers.io import IoObserver
from perflab.observers.perf import PerfRecorder
from perflab.observers.perf_script import FoldStats
from perflab.observers.phases import MEASURED, PHASES, Spans
from perflab.observers.pmp import StackSampler, fold_rows
from perflab.observers.pmp_loop import LoopSampler
from perflab.places import Site
from perflab.places.here import HERE
from perflab.spec.observe import ObserveSection
from perflab.store import folded
from perflab.store.results import Results

TOP_N = 20
DBGSYM = {name: package for kind in servers.every() for name, package in kind.dbgsym.items()}  # Debian's
# measured on this project's 2-vCPU VM (docs/benchmarks.md); quoted in the remedy
DWARF_COST_NOTE = "costs far more than fp (each sample copies 16 KiB of stack; see `perflab docs benchmarks`)"


class Profilers:
    def __init__(
        self,
        observe: ObserveSection,
        pid: int | None,
        workdir: Path,
        *,
        tree: bool = False,
        io: IoObserver | None = None,
        site: Site | None = None,
        own_clock: bool = False,
    ) -> None:
        """`pid`: the server's; None for the client alone (its pid comes with workload_started).
        `site`: where the profiled processes run: here (the default, in `workdir`), or a host (its
        place, a directory there, its clock: these profilers read it themselves with `own_clock`,
        else the window's RSS sampler does)."""
        self.observe = observe
        self.io = io  # [observe] io: the storage's and the server's I/O (observers/io.py)
        self.tree = tree  # the server target is its process tree (PostgreSQL's backends)
        self.site = site or Site(HERE, Path(workdir))
        self.own_clock = self.site.clock if own_clock else None  # the host's clock these profilers read
        self.pids = {"server": pid} if pid is not None else {}
        self.workdir = Path(workdir)  # here: the cell's directory (host_speed's canary beside it)
        self.perf: PerfRecorder | None = None
        self.pmp: dict[str, Any] = {}  # target -> its StackSampler (or LoopSampler there)
        self.canary: HostSpeed | None = None  # [observe] host_speed
        self._stack = ExitStack()
        self.binaries = {"server": self.site.place.program(pid)} if pid is not None else {}
        self.inspect: dict[str, str | None] = {}  # a target's binary as a file here, when not `binaries`' path

    @classmethod
    def shared(
        cls,
        observe: ObserveSection,
        pids: dict[str, int],
        workdir: Path,
        perf: PerfRecorder,
        site: Site | None = None,
        tree: bool = False,
    ) -> Profilers:
        """The profiles of `pids` (a server and its client) from a recording made for several
        (an interleaved group's: observers/seats.py) at `site` (here, or a server's host), to
        store(); nothing to enter."""
        profilers = cls(observe, None, workdir, site=site, tree=tree)
        targets = observe.perf.targets if observe.perf is not None else []  # a client elsewhere is not read
        profilers.pids = dict(pids)
        profilers.binaries = {t: profilers.site.place.program(pid) for t, pid in pids.items() if t in targets}
        profilers.perf = perf
        return profilers

    def __enter__(self) -> Self:
        if self.observe.host_speed:  # built once per run, beside the cells' directories
            canary = HostSpeed(self.workdir.parent / "canary-build", self.workdir / "host-speed.txt")
            self.canary = self._stack.enter_context(canary)
        if self.io is not None:  # from before the workload: its start-up writes are the cell's too
            self._stack.enter_context(self.io)
        # perf first, not recording: its start-up (reading every process's maps) takes tenths of
        # a second, before the workload; it then records system-wide and is folded per process
        perf, site = self.observe.perf, self.site
        if perf is not None:
            named = next(iter(self.pids.values()), os.getpid())  # its file's name
            recorder = PerfRecorder(
                named, site.dir, frequency=perf.frequency, call_graph=perf.call_graph, enabled=False,
                place=site.place, clock=site.clock, starts=site.starts,
            )  # fmt: skip
            self.perf = self._stack.enter_context(recorder)
        return self

    def workload_starting(self) -> None:
        """Right before the client starts: perf (system-wide) and the server's sampler begin the
        warm-up's profiles (pmp's start-up and its first sample, loading mariadbd's symbols, take
        tenths of a second: with pmp warmup = false the sampler starts too, paused, so that cost
        stays out of the window and its profile covers the whole window)."""
        if self.own_clock is not None:
            self.own_clock.begin()  # before perf's first sample; again at the exit
        perf = self.observe.perf
        if self.perf is not None and perf is not None and perf.warmup and not self.perf.enabled:
            self.perf.resume()
        self._begin(warmup=True)

    def workload_started(self, client: Any = None) -> None:
        """The workload runs (and its client, a process or its pid where it runs, has its libraries
        mapped): the warm-up's samplers begin."""
        client_pid = getattr(client, "pid", client)
        if client_pid is not None:
            self.pids["client"] = client_pid
            self.binaries["client"] = self.site.place.program(client_pid)
        self._begin(warmup=True)

    def window_started(self) -> None:
        self._begin(warmup=False)

    def _begin(self, warmup: bool) -> None:
        try:
            perf, pmp = self.observe.perf, self.observe.pmp
            if self.perf is not None and perf is not None and not self.perf.enabled and (perf.warmup or not warmup):
                self.perf.resume()
            if pmp is not None:
                for target in pmp.targets:
                    if target not in self.pmp and target in self.pids:
                        tree = self.tree and target == "server"
                        paused = warmup and not pmp.warmup  # a window-only profile: ready, not yet sampling
                        sampler = self._sampler(self.pids[target], pmp.interval, pmp.tool, tree, paused)
                        self.pmp[target] = self._stack.enter_context(sampler)
                if not warmup:
                    for sampler in self.pmp.values():
                        if sampler.waiting:
                            sampler.resume()
        except BaseException:
            self._stack.close()
            raise

    def _sampler(self, pid: int, interval: float, tool: str, tree: bool, paused: bool) -> Any:
        site = self.site
        if site.loop or tool == "eu-stack":  # eu-stack where the process runs, its samples on the place's clock
            return LoopSampler(site.place, pid, site.clock, interval, site.starts or FunctionStarts.load, tree, paused)
        return StackSampler(pid, self.workdir, interval=interval, tree=tree, paused=paused)

    def __exit__(self, *exc: object) -> None:
        try:
            if self.own_clock is not None:
                with contextlib.suppress(PerflabError):  # a host that dropped off: its profiles cannot be cut
                    self.own_clock.finish()  # before perf's stop takes its seconds
        finally:
            self._stack.close()

    def remove(self) -> None:
        self.site.remove()

    def fields(self, spans: Spans) -> dict[str, Any]:
        """The cell's fields from observers that are not profiles: `host_speed` over the window."""
        out: dict[str, Any] = {"host_speed": self.canary.fields(spans.window, spans.end)} if self.canary else {}
        if self.io is not None:  # popped by the cell (run/cell.py): resources.io and the series
            out["io"] = self.io.fields(spans.workload, spans.window, spans.end, spans.window_transactions)
        return out

    def store(self, results: Results, cell_id: int, spans: Spans) -> list[dict[str, Any]]:
        """Fold every profile per target and phase, write it under profiles/, reference it in results.db."""
        if self.site.local is not None:  # the stack quality inspects a host's binary as a file here
            self.inspect = {t: self.site.local(b) if b else None for t, b in self.binaries.items()}
        rows = []
        save = functools.partial(self._save, results, cell_id, spans)
        if self.perf is not None and self.observe.perf is not None:
            settings = {"frequency_hz": self.perf.frequency, "call_graph": self.perf.call_graph}
            for target in self.observe.perf.targets:
                if target not in self.pids:
                    continue
                started = time.monotonic()
                pids = self.perf.descendants(self.pids[target]) if self.tree and target == "server" else None
                folds = self.perf.fold_phases(pids or self.pids[target], spans.phases_at)
                extra: dict[str, Any] = {**settings, "fold_s": time.monotonic() - started, "processes": pids}
                for phase in _phases(spans, self.perf.span):
                    stacks, stats = folds.get(phase) or (Counter(), FoldStats())
                    rows.append(save("perf", target, phase, stacks, stats, self.perf.span, **extra))
        for sampled, sampler in self.pmp.items():
            rows.extend(self._store_pmp(save, spans, sampled, sampler))
        return rows

    def _store_pmp(self, save: Any, spans: Spans, target: str, sampler: Any) -> list[dict[str, Any]]:
        rows = sampler.rows()
        settings = {"interval_s": sampler.interval, "call_graph": sampler.tool, "sampler_cost": sampler.cost()}
        settings["processes"] = sampler.processes or None
        span = sampler.covered()
        out = []
        for phase in _phases(spans, span):
            begin = spans.start(phase, span)
            mine = [
                (round(sampler.origin + t - begin, 3), tid, frames)
                for t, tid, frames in rows
                if phase in spans.phases_at(sampler.origin + t)
            ]
            stacks, timed, stats = fold_rows(mine, sampler.dsos)
            out.append(save("pmp", target, phase, stacks, stats, span, **settings, timed=timed))
        return out

    def _save(
        self,
        results: Results,
        cell_id: int,
        spans: Spans,
        source: str,
        target: str,
        phase: str,
        stacks: Counter,
        stats: FoldStats,
        span: tuple[float, float],
        *,
        timed: list | None = None,
        fold_s: float | None = None,
        sampler_cost: dict | None = None,
        processes: list[int] | None = None,
        **settings: Any,
    ) -> dict[str, Any]:
        seconds = spans.seconds(phase, span)
        txn = round(spans.transactions(phase, span), 1)
        binary = self.binaries.get(target)
        quality = stack_quality(self.inspect.get(target, binary), source, settings.get("call_graph"), stats)
        sample_us = 1e6 / settings["frequency_hz"] if "frequency_hz" in settings else 1e6 * settings["interval_s"]
        top = _top_functions(stacks, stats, txn, sample_us)
        common = {
            "source": source,
            "phase": phase,
            "target": target,
            "seconds": round(seconds, 3),
            "transactions": txn,
            "window_transactions": spans.window_transactions,
            "quality": quality,
            **settings,
        }
        meta = {
            **common,
            "window": phase,
            "pid": self.pids[target],
            "processes": processes,  # a process tree's profile: every pid it holds samples of
            "binary": binary,
            "dsos": stats.dsos,
            "fold_s": None if fold_s is None else round(fold_s, 3),
            "sampler_cost": sampler_cost,
            "connect_s": round(spans.workload - spans.started, 3) if spans.started else None,  # threads connecting
            # what the profiler recorded, in seconds of the workload's clock (0: its threads started;
            # a pmp sampler attaching late explains a warm-up profile shorter than the warm-up)
            "recorded_s": [round(span[0] - spans.workload, 3), round(span[1] - spans.workload, 3)],
        }
        path = folded.write(folded.base(results.dir, cell_id, source, phase, target), stacks, meta, timed or ())
        row = {
            **common,
            "cell_id": cell_id,
            "path": str(path.relative_to(results.dir)),
            "samples": stats.samples,
            "top": top,
            "frequency_hz": settings.get("frequency_hz"),
            "interval_s": settings.get("interval_s"),
        }
        results.commit_profile(row)
        return row


def _phases(spans: Spans, span: tuple[float, float]) -> list[str]:
    """The phases a profiler that ran over `span` saw: the window always (even if empty), the others if any."""
    return [p for p in PHASES if p == MEASURED or spans.seconds(p, span) > 0]


def _top_functions(stacks: Counter, stats: FoldStats, txn: float, sample_us: float) -> list[dict[str, Any]]:
    """The TOP_N functions by self samples (leaf frames), per transaction."""
    leaves: Counter = Counter()
    for stack, count in stacks.items():
        leaves[stack.rsplit(";", 1)[-1]] += count
    return [
        {
            "function": f,
            "dso": stats.dsos.get(f),
            "self_samples": n,
            "self_per_txn": round(n / txn, 6) if txn else None,
            "self_us_per_txn": round(n * sample_us / txn, 3) if txn else None,
        }
        for f, n in leaves.most_common(TOP_N)
    ]


def stack_quality(binary: str | None, source: str, mode: str | None, stats: FoldStats) -> dict[str, Any]:
    """What the stacks can be trusted for, in figures and words, with the remedy."""
    info = inspect(binary) if binary and os.path.isfile(binary) else None
    name = os.path.basename(binary) if binary else "the server"
    complete = 100.0 * stats.complete / stats.samples if stats.samples else None
    unnamed = 100.0 * stats.unnamed_frames / stats.frames if stats.frames else None
    notes = []
    if info is not None and not info.symtab and not info.debug_info:
        notes.append(
            {
                "problem": f"{name} is stripped and no debug symbols were found: "
                f"only its {info.dynsym_functions} exported functions have names; "
                f"the other {max(0, info.eh_frame_functions - info.dynsym_functions)} "
                f"(static functions) appear as {name}+0xSTART (the function's start address, from "
                f".eh_frame_hdr), {unnamed or 0:.0f}% of the frames here",
                "remedy": debuginfo.remedy(Path(binary or name), DBGSYM.get(name, DBGSYM["mariadbd"])),
            }
        )
    if source == "perf" and mode == "fp" and info is not None and (info.fp_fraction or 0) < 0.9:
        notes.append(
            {
                "problem": f"frame-pointer call graphs: only {100 * (info.fp_fraction or 0):.0f}% of "
                f"{name}'s functions set up a frame pointer (and glibc's do not), "
                "so callers are skipped or stacks cut short: "
                f"{complete or 0:.0f}% of the samples reach a thread's entry point",
                "remedy": f'call_graph = "dwarf" (unwinds from copied stacks; {DWARF_COST_NOTE}), '
                "or a server built with -fno-omit-frame-pointer "
                "(no cost resolved here: `perflab docs builds#measured-here`), "
                "or pmp stacks, "
                "which unwind from .eh_frame",
            }
        )
    return {
        "binary": info.to_dict() if info else None,
        "stacks_complete_pct": None if complete is None else round(complete, 1),
        "unnamed_frames_pct": None if unnamed is None else round(unnamed, 1),
        "unknown_frames": stats.unknown_frames,
        "notes": notes,
    }
