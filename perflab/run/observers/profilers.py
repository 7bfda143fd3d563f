"""The profilers of a cell's measured window, as one context manager, and their results.

    with Profilers(spec.observe, server.pid, rundir) as prof:    # nothing if none configured
        run_window()
    prof.store(results, cell_id, transactions, window_s)        # profiles/ + the profiles table

Each profile is stored with the transactions of the span it covers (the window's count
scaled by the profiler's share of the window: perf starts a few tenths of a second after the
window does), so analyses can divide by it, and with its stack quality: what the server
binary offers (symbols, debug info, frame pointers), what the samples show (stacks that
reach a thread's entry point, frames without a name) and what to do about it.
"""

from __future__ import annotations

import functools
import os
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from perflab.analyze.alloc import callers
from perflab.run.observers.alloc.tracer import AllocTracer
from perflab.run.observers.elf import inspect
from perflab.run.observers.perf import FoldStats, PerfRecorder
from perflab.run.observers.pmp import StackSampler, demangle
from perflab.run.observers.pmp_sampler import Symbolizer
from perflab.spec import ObserveSection
from perflab.store import folded
from perflab.store.results import Results

TOP_N = 20
# measured on this project's 2-vCPU VM (docs/benchmarks.md); quoted in the remedy
DWARF_COST_NOTE = "costs far more than fp (each sample copies 16 KiB of stack; see docs/benchmarks.md)"


class Profilers:
    def __init__(self, observe: ObserveSection, pid: int, workdir: Path) -> None:
        self.observe = observe
        self.pid = pid
        self.workdir = Path(workdir)
        self.perf: PerfRecorder | None = None
        self.pmp: StackSampler | None = None
        self._stack = ExitStack()
        self.binary = _exe(pid)

    def __enter__(self) -> Profilers:
        try:
            # perf first: its start-up takes tenths of a second; the sampler then stops first, at
            # the window's end, and does not sample the idle server while perf writes its file
            if self.observe.perf is not None:
                perf = self.observe.perf
                self.perf = self._stack.enter_context(
                    PerfRecorder(self.pid, self.workdir, frequency=perf.frequency, call_graph=perf.call_graph)
                )
            if self.observe.pmp is not None:
                self.pmp = self._stack.enter_context(
                    StackSampler(self.pid, self.workdir, interval=self.observe.pmp.interval, tool=self.observe.pmp.tool)
                )
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def store(self, results: Results, cell_id: int, transactions: int, window_s: float) -> list[dict[str, Any]]:
        """Fold every profile, write it under profiles/, reference it in results.db."""
        rows = []
        save = functools.partial(self._save, results, cell_id, transactions, window_s)
        if self.perf is not None:
            started = time.monotonic()
            stacks, stats = self.perf.fold()
            perf = {"frequency_hz": self.perf.frequency, "call_graph": self.perf.call_graph}
            rows.append(save("perf", stacks, stats, self.perf.seconds, **perf, fold_s=time.monotonic() - started))
        if self.pmp is not None:
            stacks, timed, stats = self.pmp.fold()
            pmp = {"interval_s": self.pmp.interval, "call_graph": self.pmp.tool, "sampler_cost": self.pmp.cost()}
            rows.append(save("pmp", stacks, stats, self.pmp.seconds, **pmp, timed=timed))
        return rows

    def _save(
        self,
        results: Results,
        cell_id: int,
        transactions: int,
        window_s: float,
        source: str,
        stacks: Counter,
        stats: FoldStats,
        seconds: float,
        *,
        timed: list | None = None,
        fold_s: float | None = None,
        sampler_cost: dict | None = None,
        **settings: Any,
    ) -> dict[str, Any]:
        share = min(1.0, seconds / window_s) if window_s else 1.0
        txn = round(transactions * share, 1)
        quality = stack_quality(self.binary, source, settings.get("call_graph"), stats)
        sample_us = 1e6 / settings["frequency_hz"] if "frequency_hz" in settings else 1e6 * settings["interval_s"]
        top = _top_functions(stacks, stats, txn, sample_us)
        base = folded.base(results.dir, cell_id, source)
        meta = {
            "source": source,
            "window": "measured",
            "seconds": round(seconds, 3),
            "transactions": txn,
            "window_transactions": transactions,
            "pid": self.pid,
            "binary": self.binary,
            "dsos": stats.dsos,
            "quality": quality,
            "fold_s": None if fold_s is None else round(fold_s, 3),
            "sampler_cost": sampler_cost,
            **settings,
        }
        path = folded.write(base, stacks, meta, timed or ())
        row = {
            "cell_id": cell_id,
            "source": source,
            "phase": "measured",
            "path": str(path.relative_to(results.dir)),
            "samples": stats.samples,
            "seconds": round(seconds, 3),
            "transactions": txn,
            "window_transactions": transactions,
            "quality": quality,
            "top": top,
            "frequency_hz": settings.get("frequency_hz"),
            "interval_s": settings.get("interval_s"),
            "call_graph": settings.get("call_graph"),
        }
        results.commit_profile(row)
        return row


def store_alloc(results: Results, cell_id: int, transactions: int, tracer: AllocTracer, pid: int) -> dict[str, Any]:
    """The sampled allocation stacks as a profile of source "alloc": folded, weighted in bytes
    requested, the leaf frame being the call and its size class (`malloc:32M-64M`)."""
    names = Symbolizer(pid)
    try:
        mangled = tracer.stacks(lambda pcs: _own_frames_dropped(names, pcs))
        dsos = dict(names.dsos)
    finally:
        names.close()
    readable = demangle(frame for stack in mangled for frame in stack.split(";"))
    stacks: Counter = Counter()
    for stack, size in mangled.items():
        stacks[";".join(readable.get(f, f) for f in stack.split(";"))] += size
    dsos = {readable.get(f, f): d for f, d in dsos.items()}
    by_function = callers(stacks)
    top = [
        {
            "function": f,
            "dso": dsos.get(f),
            "bytes": n,
            "bytes_per_txn": round(n / transactions, 1) if transactions else None,
        }
        for f, n in by_function.most_common(TOP_N)
    ]
    meta = {
        "source": "alloc",
        "window": "measured",
        "unit": "bytes",
        "period": tracer.spec.period,
        "seconds": round(tracer.seconds, 3),
        "transactions": transactions,
        "window_transactions": transactions,
        "pid": pid,
        "binary": _exe(pid),
        "dsos": dsos,
    }
    path = folded.write(folded.base(results.dir, cell_id, "alloc"), stacks, meta)
    row = {
        "cell_id": cell_id,
        "source": "alloc",
        "phase": "measured",
        "path": str(path.relative_to(results.dir)),
        "samples": len(tracer.records()[0]),
        "seconds": round(tracer.seconds, 3),
        "transactions": transactions,
        "window_transactions": transactions,
        "call_graph": "backtrace",
        "quality": None,
        "top": top,
    }
    results.commit_profile(row)
    return row


def _own_frames_dropped(names: Symbolizer, pcs: list[int]) -> list[str]:
    """Frame names root first (return addresses: the call is the byte before), the counter's own left out."""
    frames = [names.name(pc - 1) for pc in reversed(pcs)]
    return [f for f in frames if not names.dsos.get(f, "").startswith("perflab_alloc")]


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


def _exe(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


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
                "remedy": f"install {name}'s debug symbols under /usr/lib/debug/.build-id (Debian: the -dbgsym package "
                "of the debian-debug archive, e.g. mariadb-server-core-dbgsym; or DEBUGINFOD_URLS="
                "https://debuginfod.debian.net, which perf and libdw query) or use a build with -g; "
                "perflab then shows their names",
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
                "or a server built with -fno-omit-frame-pointer (about 1% slower, see reference report 004), "
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
