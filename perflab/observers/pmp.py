"""Wall-clock stacks of every server thread, every interval (poor man's profiler, pt-pmp style).

Waits show up here (locks, condition variables, I/O, mprotect), unlike in perf's on-CPU
samples. Two tools: the resident libdw sampler (`pmp_sampler.py`, the default: symbols and
unwind tables loaded once; StackSampler here) and `eu-stack -p PID` run every interval (loads
them on every call; kept to compare, and the tool on a host: pmp_loop.LoopSampler). Both unwind
from the binaries' CFI (.eh_frame), so their stacks are complete even where frame pointers are
missing.

    with StackSampler(pid, workdir, interval=1.0) as pmp:   # tree=True: PID and every process it forked
        run_window()
    with StackSampler(pid, workdir, paused=True) as pmp:    # started, symbols loaded, not sampling
        warm_up(); pmp.resume(); run_window()               # what it covers begins at the first resume()
    stacks, timed, stats = pmp.fold()      # Counter, [(t, stack, 1)], FoldStats

eu-stack text (`eu-stack -m -p PID`), the input of `parse_eu_stack`:
    TID 30366:
    #0  0x00007f15ab0a3f16 __futex_abstimed_wait_common - /usr/lib/x86_64-linux-gnu/libc.so.6
    #2  0x000055e6d3c73f8d - /usr/sbin/mariadbd
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from perflab.errors import PerflabError
from perflab.observers.elf import FunctionStarts
from perflab.observers.perf_script import ROOTS, FoldStats
from perflab.places.proc import Child, guarded

TOOLS = ("libdw", "eu-stack")


def strip_params(name: str) -> str:
    """`mysqld_main(int, char**)` -> `mysqld_main`, as perf names functions; `operator()` stays."""
    if not name.endswith(")") or name.endswith("operator()"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return name[:i] if i > 0 else name
    return name


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled C++ names -> demangled without parameters (`c++filt -p`); identity without c++filt."""
    mangled = sorted({n for n in names if n.startswith("_Z")})
    if not mangled or shutil.which("c++filt") is None:
        return {}
    done = subprocess.run(
        guarded(["c++filt", "-p"]),
        input="\n".join(mangled) + "\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    out = done.stdout.splitlines()
    if done.returncode != 0 or len(out) != len(mangled):
        return {}
    return {m: d.replace(";", ":") for m, d in zip(mangled, out)}


class ModuleMap:
    """Absolute address -> (binary path, address relative to its load base), from /proc/PID/maps."""

    def __init__(self, maps_text: str, starts: Callable[[str], FunctionStarts] = FunctionStarts.load) -> None:
        self.starts = starts
        self.bases: dict[str, int] = {}
        for line in maps_text.splitlines():
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/") and int(parts[2], 16) == 0:
                start = int(parts[0].split("-")[0], 16)
                self.bases[parts[5]] = min(start, self.bases.get(parts[5], start))

    def name(self, addr: int, path: str) -> str:
        base = self.bases.get(path)
        return self.starts(path).name(addr - base) if base is not None else "[unknown]"


def parse_eu_stack(text: str, modules: ModuleMap, dsos: dict[str, str] | None = None) -> list[tuple[int, list[str]]]:
    """(tid, frames root first) per thread of one `eu-stack -m -p PID` output; fills `dsos`
    (frame name -> binary file name) when given."""
    threads: list[tuple[int, list[str]]] = []
    frames: list[str] = []
    for line in text.splitlines():
        if line.startswith("TID "):
            frames = []
            threads.append((int(line[4:].rstrip(":")), frames))
        elif line.startswith("#") and threads:
            parts = line.split(None, 2)
            if len(parts) < 2:
                continue
            rest = " " + (parts[2] if len(parts) > 2 else "")
            sym, sep, module = rest.rpartition(" - ")
            if not sep:
                sym, module = rest, ""
            sym, module = strip_params(sym.strip()).partition("@")[0], module.strip()
            if not sym:
                sym = modules.name(int(parts[1], 16), module) if module.startswith("/") else "[unknown]"
            sym = sym.replace(";", ":")
            frames.append(sym)
            if dsos is not None and module:
                dsos.setdefault(sym, os.path.basename(module))
    for _, fr in threads:
        fr.reverse()
    return threads


class StackSampler:
    """Samples the server's thread stacks every `interval` seconds for the window (the libdw sampler)."""

    tool = "libdw"

    def __init__(
        self,
        pid: int,
        workdir: Path,
        *,
        interval: float = 1.0,
        tree: bool = False,
        paused: bool = False,
    ) -> None:
        self.pid = pid
        self.tree = tree  # sample every process of pid's tree (a postmaster and its backends)
        self.processes: list[int] = []  # with tree: the members sampled, in order of appearance
        self.workdir = Path(workdir)
        self.interval = interval
        self.out = self.workdir / f"pmp-{pid}.txt"
        self.seconds = 0.0
        self.child: Child | None = None
        self.started_paused = paused
        self.waiting = paused  # started paused and not resumed yet: nothing covered so far
        self.dsos: dict[str, str] = {}
        self.exit_code: int | None = None
        self.sample_stats: list[tuple[int, float, float]] = []  # (threads, held ms, sample ms) per sample
        self._started = 0.0
        self.origin = 0.0  # CLOCK_MONOTONIC seconds of the rows' t = 0
        self.span = (0.0, 0.0)  # CLOCK_MONOTONIC seconds sampled

    def __enter__(self) -> StackSampler:
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable,
            "-m",
            "perflab.observers.pmp_sampler",
            str(self.pid),
            str(self.interval),
            str(self.out),
            *(["tree"] if self.tree else []),
            *(["paused"] if self.waiting else []),
        ]
        self._log = (self.workdir / f"pmp-{self.pid}.log").open("w", encoding="utf-8")
        self.child = Child(argv, stdout=self._log, env={**os.environ, "PYTHONPATH": _package_root()})
        self._wait_ready()
        self._started = time.monotonic()  # the span covered starts with the first sample
        return self

    def _wait_ready(self) -> None:
        """Until the sampler has opened the process (it then writes its header line)."""
        assert self.child is not None
        deadline = time.monotonic() + 30
        while not (self.out.is_file() and self.out.stat().st_size > 0):
            if self.child.poll() is not None or time.monotonic() > deadline:
                self.child.kill()
                self._log.close()
                tail = (self.workdir / f"pmp-{self.pid}.log").read_text(errors="replace").strip()[-400:]
                raise PerflabError(
                    f"the stack sampler did not start: {tail}",
                    "check ptrace permissions (kernel.yama.ptrace_scope) and `perflab doctor`",
                )
            time.sleep(0.01)

    def pause(self) -> None:
        """Stop sampling until resume() (bench/profile_overhead.py toggles it second by second)."""
        if self.child is not None:
            self.child.signal_group(signal.SIGUSR1)

    def resume(self) -> None:
        if self.waiting:  # the first resume of a sampler started paused: its span begins here
            self.waiting = False
            self._started = time.monotonic()
        if self.child is not None:
            self.child.signal_group(signal.SIGUSR2)

    def covered(self) -> tuple[float, float]:
        """CLOCK_MONOTONIC seconds the samples cover, after __exit__: from the first sample (the
        sampler's clock starts just before perflab sees it ready) or, started paused, from the
        first resume(), whose clock origin is long before."""
        start = self.span[0] if self.started_paused or not self.origin else min(self.origin, self.span[0])
        return start, self.span[1]

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self._started
        self.span = (self._started, self._started + self.seconds)
        if self.child is not None:
            try:
                self.exit_code = self.child.terminate(grace=10)  # SIGTERM: it finishes its sample, detaches
            finally:
                self.child.kill()
                self._log.close()

    def rows(self) -> list[tuple[float, int, list[str]]]:
        """(t, tid, frames root first) per thread per sample; t in seconds since `origin`."""
        log = self.workdir / f"pmp-{self.pid}.log"
        if not self.out.is_file() or self.exit_code not in (0, None):
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:] if log.exists() else []
            raise PerflabError(
                f"the stack sampler failed (exit {self.exit_code}): {' '.join(tail)[:400]}",
                "check ptrace permissions (kernel.yama.ptrace_scope) and `perflab doctor`",
            )
        rows, self.processes = [], []
        with self.out.open(encoding="utf-8") as f:
            for line in f:
                if line.startswith("#dso "):  # the binary's name may hold spaces: "x (deleted)"
                    _, name, dso = line.rstrip("\n").split(" ", 2)
                    self.dsos[name] = dso
                elif line.startswith("# pmp_sampler ") and " start=" in line:
                    self.origin = float(line.rsplit(" start=", 1)[1])
                elif line.startswith("#process "):
                    self.processes.append(int(line.split()[1]))
                elif line.startswith("#stat "):
                    _, _t, threads, held_ms, sample_ms = line.split()
                    self.sample_stats.append((int(threads), float(held_ms), float(sample_ms)))
                if line.startswith("#"):
                    continue
                t, tid, stack = line.rstrip("\n").split(" ", 2)
                rows.append((float(t), int(tid), stack.split(";")))
        return rows

    def fold(self) -> tuple[Counter, list[tuple[float, str, int]], FoldStats]:
        return fold_rows(self.rows(), self.dsos)

    def cost(self) -> dict[str, float] | None:
        """What sampling took from the server (libdw sampler only): thread time held stopped
        per second of window (an upper bound: a thread waiting anyway loses nothing), and per
        sample; read after fold()."""
        if not self.sample_stats or not self.seconds:
            return None
        held = sum(h for _, h, _ in self.sample_stats)
        return {
            "samples": len(self.sample_stats),
            "held_ms_per_s": round(held / self.seconds, 3),
            "held_ms_per_sample": round(held / len(self.sample_stats), 3),
            "sample_ms_mean": round(sum(s for _, _, s in self.sample_stats) / len(self.sample_stats), 3),
        }


def fold_rows(
    rows: list[tuple[float, int, list[str]]],
    dsos: dict[str, str] | None = None,
) -> tuple[Counter, list[tuple[float, str, int]], FoldStats]:
    """Folded stacks, the timed rows and statistics from per-thread samples (frames root first);
    `dsos` maps raw frame names to their binary."""
    names = demangle(f for _, _, frames in rows for f in frames)
    stacks: Counter = Counter()
    timed = []
    stats = FoldStats()
    for raw, dso in (dsos or {}).items():
        stats.dsos[strip_params(names.get(raw, raw))] = dso
    for t, _tid, frames in rows:
        named = [strip_params(names.get(f, f)) for f in frames]
        stack = ";".join(named)
        stacks[stack] += 1
        timed.append((t, stack, 1))
        stats.samples += 1
        stats.complete += bool(named) and named[0] in ROOTS
        stats.frames += len(named)
        for frame in named:
            if "+0x" in frame:
                stats.unnamed_frames += 1
            elif frame == "[unknown]":
                stats.unknown_frames += 1
    return stacks, timed, stats


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])
