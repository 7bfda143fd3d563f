"""`perf script` text -> folded stacks (perflab-folded/1, store/folded.py), per phase, with how
complete and how well named the stacks were (observers/perf.py records what this reads).

`perf script -F tid,ip,sym,dso` prints, per sample, a header line then one line per frame,
leaf first (user addresses are relative to their binary), and a blank line:
    mariadbd 30391
    \t          8a78c9 [unknown] (/usr/sbin/mariadbd)
    \tffffffff82265df3 schedule ([kernel.kallsyms])
A frame perf could not name is named from its binary's function starts (observers/elf.py).

    stacks, stats = fold_perf_script(open("script.txt"))   # Counter({"start_thread;...;schedule[k]": 12}), FoldStats
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from perflab.observers.elf import FunctionStarts
from perflab.store.folded import KERNEL_MARK

# Frames a complete stack starts from; a stack whose root is anything else was cut short.
ROOTS = frozenset(
    {
        "start_thread",
        "__clone3",
        "__clone",
        "clone",
        "clone3",
        "_start",
        "__libc_start_main",
        "__libc_start_call_main",
        "ret_from_fork_k",
        "ret_from_fork" + KERNEL_MARK,
    }
)
KERNEL_DSOS = ("[kernel.kallsyms]", "[guest.kernel.kallsyms]")


@dataclass
class FoldStats:
    samples: int = 0
    complete: int = 0  # stacks that reach a thread's entry point
    unnamed_frames: int = 0  # frames named binary+0xSTART (no symbol)
    frames: int = 0
    unknown_frames: int = 0  # no binary either
    dsos: dict[str, str] = field(default_factory=dict)


StartsLoader = Callable[[str], FunctionStarts]


class FrameNamer:
    """Turns one `perf script` frame line into a frame name, caching by line text. `starts`
    gives a binary's function starts (tests pass recorded ones)."""

    def __init__(self, starts: StartsLoader = FunctionStarts.load) -> None:
        self.starts = starts
        self.cache: dict[str, tuple[str, str, int]] = {}  # line -> (frame, dso, kind 0 named/1 unnamed/2 unknown)

    def __call__(self, line: str) -> tuple[str, str, int]:
        hit = self.cache.get(line)
        if hit is None:
            hit = self.cache[line] = self._name(line)
        return hit

    def _name(self, line: str) -> tuple[str, str, int]:
        addr, _, rest = line.strip().partition(" ")
        sym, _, dso = rest.rpartition(" (")
        dso = dso.removesuffix(")")
        if not sym:  # no "(dso)" part
            sym, dso = rest, "[unknown]"
        sym = sym.replace(";", ":")
        if dso in KERNEL_DSOS:
            return sym + KERNEL_MARK, "[kernel]", 0
        if sym != "[unknown]":
            return sym, os.path.basename(dso), 0
        if dso.startswith("/"):
            try:
                return self.starts(dso).name(int(addr, 16)), os.path.basename(dso), 1
            except ValueError:
                pass
        return "[unknown]", dso, 2


def fold_perf_script(lines: Iterable[str], starts: StartsLoader = FunctionStarts.load) -> tuple[Counter, FoldStats]:
    """Folded stacks (root first) and statistics from `perf script -F tid,ip,sym,dso` text."""
    return fold_perf_phases(lines, None, starts).get(MEASURED) or (Counter(), FoldStats())


PhasesAt = Callable[[float], tuple[str, ...]]
MEASURED = "measured"


def fold_perf_phases(
    lines: Iterable[str], phases_at: PhasesAt | None = None, starts: StartsLoader = FunctionStarts.load
) -> dict[str, tuple[Counter, FoldStats]]:
    """Per phase, folded stacks (root first) and statistics from `perf script -F tid,time,ip,sym,dso`
    text: `phases_at(t)` names the phases a sample taken at `t` (the header's time) belongs to;
    without it every sample is "measured" (and the text needs no time field).

    The hot loop does one dict lookup per frame line: a line's text maps to a frame number
    (perf prints the same line for the same address), a sample is a tuple of numbers, and
    names, binaries and statistics are worked out once per unique stack at the end.
    """
    namer = FrameNamer(starts)
    index: dict[str, int] = {}
    table: list[tuple[str, str, int]] = []
    counts: dict[tuple[tuple[str, ...], tuple[int, ...]], int] = {}
    frames: list[int] = []
    phases: tuple[str, ...] = (MEASURED,)
    get = index.get
    for line in lines:
        if line[:1] == "\t":
            i = get(line)
            if i is None:
                i = index[line] = len(table)
                table.append(namer(line))
            frames.append(i)
            continue
        if frames:  # a blank line or the next header ends the sample
            key = (phases, tuple(reversed(frames)))
            counts[key] = counts.get(key, 0) + 1
            frames.clear()
        if phases_at is not None and line.strip():  # "27048 24280.313358: ": the time ends the header
            phases = phases_at(float(line.split()[-1].rstrip(":")))
    if frames:
        key = (phases, tuple(reversed(frames)))
        counts[key] = counts.get(key, 0) + 1
    by_phase: dict[str, dict[tuple[int, ...], int]] = {}
    for (names, stack), n in counts.items():
        for phase in names:
            into = by_phase.setdefault(phase, {})
            into[stack] = into.get(stack, 0) + n
    return {phase: _summarise(c, table) for phase, c in by_phase.items()}


def _summarise(counts: dict[tuple[int, ...], int], table: list[tuple[str, str, int]]) -> tuple[Counter, FoldStats]:
    stacks: Counter = Counter()
    stats = FoldStats()
    kinds = [0, 0, 0]
    for key, n in counts.items():
        stacks[";".join(table[i][0] for i in key)] += n
        stats.samples += n
        stats.complete += n if table[key[0]][0] in ROOTS else 0
        for i in key:
            kinds[table[i][2]] += n
    for frame, dso, _kind in table:
        stats.dsos.setdefault(frame, dso)
    stats.frames, stats.unnamed_frames, stats.unknown_frames = sum(kinds), kinds[1], kinds[2]
    return stacks, stats
