"""Folded stacks on disk: the profile format between the run, analyze and report stages.

Format `perflab-folded/1`, one profile = two files under `DIR/profiles/`:

  cell-0003.perf.folded   FlameGraph's folded stacks, root first, one unique stack per line,
                          sorted, count last (FlameGraph, inferno and speedscope read it as is):
      __clone3;start_thread;do_command;dispatch_command;my_hash_sort_simple 42
  cell-0003.perf.json     what the counts mean: {"format": "perflab-folded/1", "source": "perf",
                          "window": "measured", "target": "server", "samples", "seconds", "transactions",
                          "frequency_hz" | "interval_s", "dsos": {function: dso}, "quality": {...}}

Frame names: the function as the profiler symbolised it (C++ demangled, without argument
lists for perf); kernel functions end in `_[k]` (FlameGraph's convention, coloured apart by
flamegraph renderers); a function of a stripped binary that has no symbol is named by its
binary and the start of the function that contains the address, `mariadbd+0x8a5f00` (stable
across samples, runs and processes, so it aggregates and diffs); `[unknown]` when even the
binary is unknown. pmp profiles also keep a timed file, `cell-0003.pmp.timed`, one line per
thread stack sample: `<seconds since window start> <stack> <count>`, so a profile can be cut
by time.
The client's profiles (sysbench, `target = "client"`) insert `.client`, and other phases than the
measured window their name: `cell-0003.pmp.client.warmup.folded`, `cell-0003.perf.stall.folded`.

Format history:
  perflab-folded/1  first version.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FORMAT = "perflab-folded/1"
KERNEL_MARK = "_[k]"

Stacks = Counter  # stack string (frames joined by ';', root first) -> samples


def base(directory: Path, cell_id: int, source: str, window: str = "measured", target: str = "server") -> Path:
    """`cell-0003.perf`, `cell-0003.pmp.client`, `cell-0003.perf.client.stall`, ..."""
    suffix = ("" if target == "server" else f".{target}") + ("" if window == "measured" else f".{window}")
    return Path(directory) / "profiles" / f"cell-{cell_id:04d}.{source}{suffix}"


def write(path_base: Path, stacks: Stacks, meta: dict[str, Any], timed: Iterable[tuple[float, str, int]] = ()) -> Path:
    """Write `<base>.folded`, `<base>.json` (and `<base>.timed` if `timed` has rows); return the .folded path."""
    path_base.parent.mkdir(parents=True, exist_ok=True)
    folded = path_base.with_name(path_base.name + ".folded")
    with folded.open("w", encoding="utf-8") as out:
        for stack in sorted(stacks):
            if stacks[stack] > 0:
                out.write(f"{stack} {stacks[stack]}\n")
    rows = list(timed)
    if rows:
        with path_base.with_name(path_base.name + ".timed").open("w", encoding="utf-8") as out:
            for t, stack, count in rows:
                out.write(f"{t:.3f} {stack} {count}\n")
    meta = {"format": FORMAT, **meta, "samples": sum(stacks.values())}
    path_base.with_name(path_base.name + ".json").write_text(
        json.dumps(meta, indent=1, sort_keys=True), encoding="utf-8"
    )
    return folded


def parse_line(line: str) -> tuple[str, int] | None:
    """`a;b;c 12` -> ("a;b;c", 12); None for a blank or malformed line."""
    stack, _, count = line.rstrip("\n").rpartition(" ")
    if not stack or not count.isdigit():
        return None
    return stack, int(count)


def read(folded: Path) -> Stacks:
    stacks: Stacks = Counter()
    with Path(folded).open(encoding="utf-8") as f:
        for line in f:
            parsed = parse_line(line)
            if parsed:
                stacks[parsed[0]] += parsed[1]
    return stacks


def read_meta(folded: Path) -> dict[str, Any]:
    path = Path(folded)
    return json.loads(path.with_name(path.name.removesuffix(".folded") + ".json").read_text(encoding="utf-8"))


def read_timed(folded: Path, start: float | None = None, end: float | None = None) -> Stacks:
    """The samples of a .timed file with start <= t < end (seconds since the window start)."""
    path = Path(folded)
    stacks: Stacks = Counter()
    with path.with_name(path.name.removesuffix(".folded") + ".timed").open(encoding="utf-8") as f:
        for line in f:
            t, _, rest = line.partition(" ")
            if (start is not None and float(t) < start) or (end is not None and float(t) >= end):
                continue
            parsed = parse_line(rest)
            if parsed:
                stacks[parsed[0]] += parsed[1]
    return stacks


def is_kernel(frame: str) -> bool:
    return frame.endswith(KERNEL_MARK)
