"""Why a stall or an unsettled warm-up: the stacks that grow most during it.

Input: an open results directory (cells and their profiles). For every cell with a detected
stall (profiles of phase "stall") or a warm-up that ran into its window (unsettled; phase
"warmup"), and every profiler and target (server, client) that has both that phase's profile
and the window's: the functions whose self samples grow most from the window to the phase,
with their noise floor (analyze/profile_noise.py; one profile a side, so the floor is the
sampling noise alone), largest significant growth first.

Per second of wall time, not per transaction: a stall has next to no transactions (per
transaction everything grows without bound), and what the threads do during it is a rate in
time. A pmp sample is one thread's stack, so pmp samples per second x the interval = threads
in that function on average; perf samples per second / frequency = CPUs busy in it. A stall
inside the window is part of the window's profile too, which understates its growth.

    explain(results)[0] -> Explanation(cell_id=3, key="client=glibc/t1024/r1", phase="stall",
        span="0-13 s", source="pmp", target="client", seconds=13.0,
        rows=[Growth("mprotect", dso="libc.so.6", window=0.4, phase=310.2, noise=12.1), ...])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perflab.analyze import profile_diff, profile_select
from perflab.errors import PerflabError

ROWS = 5  # functions shown per profile


@dataclass(frozen=True)
class Growth:
    function: str
    dso: str | None
    window: float  # self samples per second over the measured window
    phase: float  # ... during the stall or warm-up
    noise: float  # half-width of the change's simultaneous 95% interval

    @property
    def delta(self) -> float:
        return self.phase - self.window


@dataclass
class Explanation:
    cell_id: int
    key: str
    phase: str  # stall | warmup
    span: str  # "4-6 s" (seconds since the workload started)
    source: str  # perf | pmp
    target: str  # server | client
    seconds: float  # of the phase the profile covers
    rows: list[Growth] = field(default_factory=list)


def _phases(cell: dict[str, Any]) -> list[tuple[str, str]]:
    """(phase, span) worth explaining in `cell`: its stalls, an unsettled warm-up."""
    out = []
    stalls = cell.get("stalls") or []
    if stalls:
        out.append(("stall", ", ".join(f"{s['start_s']:.0f}-{s['end_s']:.0f} s" for s in stalls)))
    if cell.get("settled") in (False, 0):
        out.append(("warmup", f"0-{cell.get('window_start_s') or 0:.0f} s"))
    return out


def explain(results: Any, rows: int = ROWS) -> list[Explanation]:
    """Every explainable stall and unsettled warm-up of `results` (a Results), cell by cell."""
    profiles = results.profiles()
    if not profiles:
        return []
    out = []
    for cell in results.cells():
        if cell["status"] != "ok":
            continue
        mine = [p for p in profiles if p["cell_id"] == cell["id"]]
        for phase, span in _phases(cell):
            for p in mine:
                if p["phase"] == phase and p["samples"] and p["seconds"]:
                    found = _explain(results, cell, p, span, rows)
                    if found is not None:
                        out.append(found)
    return out


def _explain(results: Any, cell: dict[str, Any], prof: dict[str, Any], span: str, rows: int) -> Explanation | None:
    pick = {"cell_id": cell["id"], "source": prof["source"], "target": prof["target"]}
    try:
        window = profile_select.select(results, **pick, phase="measured")
        during = profile_select.select(results, **pick, phase=prof["phase"])
    except PerflabError:  # no window profile to compare with
        return None
    a, _, _ = profile_select.load(results, window, per="second")
    b, _, _ = profile_select.load(results, during, per="second")
    diffs = profile_diff.diff(a, b).rows(limit=None, by="self")
    grown = [r for r in diffs if r["significant"] and r["delta_self_per_txn"] > 0][:rows]
    return Explanation(
        cell["id"],
        cell["key"],
        prof["phase"],
        span,
        prof["source"],
        prof["target"],
        prof["seconds"],
        [
            Growth(r["function"], r["dso"], r["a_self_per_txn"], r["b_self_per_txn"], r["noise_self_per_txn"])
            for r in grown
        ],
    )


def sentence(e: Explanation) -> str:
    """One line for the reports: what grew, per second, with its noise floor."""
    what = f"cell {e.cell_id} {e.key}, {'stall' if e.phase == 'stall' else 'unsettled warm-up'} {e.span}"
    head = f"{what}, {e.source} {e.target} ({e.seconds:.1f} s sampled)"
    if not e.rows:
        return f"{head}: no function grows beyond its noise floor"
    grew = "; ".join(f"{g.function} {g.window:.3g} -> {g.phase:.3g}/s (±{g.noise:.2g})" for g in e.rows)
    return f"{head}: {grew}"


INTRO = (
    "Stacks that grow most during stalls and unsettled warm-ups, against the measured window: self "
    "samples per second of wall time (not per transaction: a stall has next to none); pmp samples = "
    "threads in that function x interval, perf samples = CPU time. ± is the noise floor of the change "
    "(simultaneous 95%, sampling noise); only growth beyond it is listed."
)
