"""Issue 12's real-run figures from one long experiment: the A/A false-verdict rate, the smallest
calibrated effect a 10-minute two-variant experiment calls, and the paired against the Welch
interval on the same rounds.

What: one `perflab run` as a user runs it: oltp_read_only, 2 threads, 2 tables x 50k rows, a
fixed 5 s warm-up (--warmup), 10 s windows (--duration), a fresh server per cell, ROUNDS randomized blocks
(seeded) of these variants, all with tests/data/calibrated/slow_malloc.so preloaded (so the preload's own
cost is on every side) and `[observe] alloc` counting calls (both sides pay it alike):
  - `none` (0 ns a call): the baseline; `same`: identical to it (an A/A pair);
  - `slowN`: N ns of CPU burnt per malloc/calloc/realloc call, for each N of --ns.
Then, from the stored cells alone (analyze/sequential.replay and ratio.estimate, the code
`perflab run` and `perflab compare` use):
  1. the full run's estimate of each variant against `none`: ratio, paired and Welch 95%
     intervals and their width ratio (the paired-vs-unpaired figure on real runs);
  2. resampled 10-minute two-variant experiments: a 10-minute budget holds M rounds of two
     cells (M from the measured wall time per cell); RESAMPLES times, M rounds are drawn with
     replacement from the real ones and replayed through the adaptive design that `repeats =
     "auto"`, `stop = "verdict"`, max_repeats = M runs (O'Brien-Fleming alpha spending), and
     through a fixed M-round protocol. Per variant: the share called faster / slower /
     equivalent / inconclusive, and the mean rounds to a verdict;
     - for `same`, its log-ratios are first centred on zero (the null is true by construction;
       uncentred, one run's chance offset would count as an effect): the false faster/slower
       rate of the design under this machine's real noise, its tails included;
     - for `slowN`, uncentred: the power at the effect the run measured (a plug-in estimate);
  3. disjoint real A/A experiments: the rounds cut into consecutive blocks of 5 and of M, each
     judged as its own run (few, but no resampling at all);
  4. the time to a correct `slower` for each slow variant: the adaptive design's mean wall time
     over its share of `slower`, against the fixed protocol of 3 rounds of 60 s windows (drawn as
     3 of the real rounds, judged by Welch as perflab judges 3 rounds; its wall time from this
     run's per-cell overhead plus 60 s), and their ratio (the issue's goal: <= 1/3).
The sensitivity figure: the smallest setting called `slower` in >= 80% of the resampled
10-minute experiments, stated as its measured effect (the QPS ratio), with the nominal one beside
it: the shim's burn (calls per transaction x N) over the CPU the machine spends per transaction,
server and client (`nominal()`: the client shares the two vCPUs; the server-bound figure, over the
server's CPU alone, is shown beside it and overstates the effect).

With --design interleaved the run is `design = "interleaved"` (run/interleave.py): each round's
servers run at once, their clients taking 1 s turns (--slice: another turn, "250ms").
`[observe] alloc` is then off (it is refused there), so the burn is the variant's extra server
CPU per transaction over the baseline's; every server of a round shares the turns, so a pair's
two turns are len(variants) turns apart, not one as in a two-variant experiment (conservative for the design).

Honest limits: resamples of one run share its rounds, so the rates carry that run's own chance
(the disjoint blocks show it); a 10-minute experiment of two variants has its rounds closer in
time than this run's rounds of 2 + len(ns) variants, which favours the paired estimate a
little here (a slower drift between the two cells of a pair); other_cpu_cores is shown per
variant: figures from a busy machine are not this machine's noise.

With --calibrated-slope B the adjusted figures use the slope B, fixed (as a run does when a
`perflab calibrate` of its host and workload measured the slope), instead of a slope fitted on
each experiment's own rounds; --chase-weight W weighs the canary's chase in as a calibration's
`host_speed.chase_weight` does, --steal-weight W the host's steal time as its `steal_weight` does.
With --calibrate-on K the first K rounds calibrate, as `perflab calibrate` fits its host-speed
figure (analyze/host_slope.calibrate: the chase and the steal weighed in when resolved; --weigh
limits what may be), and only the later rounds are judged, with that figure fixed: a calibration
out of sample, from the same hour. With --host-speed the run has `[observe] host_speed` on, and
every figure above is given again as perflab judges such a run (analyze/host_speed.py): adjusted for the host's speed, the slope
refitted on each resampled experiment's own cells (at every look for the adaptive design), the
A/A pair centred on its adjusted estimate; beside it the canary's difference between each
variant and the baseline (a variant that moved the canary itself would show there).

Run: python3 bench/fidelity.py --results DIR              # the figures to quote (~40 minutes), idle machine
     python3 bench/fidelity.py --host-speed --results DIR # the same with the host-speed covariate
     python3 bench/fidelity.py --analyse DIR             # again from a kept results directory, no run
     python3 bench/fidelity.py --analyse DIR --calibrate-on 15   # steal and canary, calibrated on 15 rounds
     python3 bench/fidelity.py --quick                   # smoke test (~3 minutes)
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import _common as C

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perflab.analyze import compare, host_slope, host_speed, ratio, sequential, summary, verdict
from tests.data.calibrated.build import ENV, build

BUDGET_S = 600  # the 10-minute two-variant experiment
RESAMPLES = 2000
SENSITIVE = 0.8  # the share of experiments a setting must be called `slower` in
FIXED_ROUNDS, FIXED_WINDOW_S, WINDOW_S = 3, 60, 10  # the fixed protocol of the issue; this run's window
BASE, SAME = "none", "same"

CALIBRATED: dict[str, Any] | None = None  # --calibrated-slope: judged as a run planned with such a calibration
CALIBRATE_ON = 0  # --calibrate-on K: the first K rounds calibrate (CALIBRATED), the others are judged
WEIGH: set[str] = {"chase", "steal"}  # --weigh: what --calibrate-on may weigh in beside the spin

REST = """\
[variants.effect]
{variants}

[observe]
{alloc}host_speed = {host_speed}
"""
ALLOC = "alloc = { stacks = false, syscalls = false }\n"


def settings(args: argparse.Namespace) -> dict[str, Any]:
    cfg = {"duration": 10, "warmup": 5, "tables": 2, "table_size": 50_000, "rounds": args.rounds or 30}
    if args.quick:
        cfg = {"duration": 3, "warmup": 2, "tables": 1, "table_size": 2000, "rounds": args.rounds or 6}
    if args.duration:
        cfg["duration"] = args.duration
    if args.warmup:
        cfg["warmup"] = args.warmup if args.warmup == "auto" else int(args.warmup)
    if args.max_warmup is not None:
        if cfg["warmup"] != "auto":
            raise SystemExit("--max-warmup goes with --warmup auto")
        cfg["max_warmup"] = args.max_warmup
    return {**cfg, "ns": [int(x) for x in args.ns.split(",") if x], "copies": args.copies}


def spec_text(cfg: dict[str, Any], lib: Path, host_speed: bool = False, design: str = "sequential",
              slice_s: str | None = None) -> str:
    def variant(name: str, ns: int, extra: str = "") -> str:
        return f'{name} = {{ preload = "{lib}", env = {{ {ENV} = "{ns}"{extra} }} }}'

    # the same server, a name apart (the env values have one length: the stack starts alike)
    lines = [variant(BASE, 0, ', PERFLAB_AA = "0"')]
    lines += [variant(copy_name(i), 0, f', PERFLAB_AA = "{i}"') for i in range(1, cfg["copies"])]
    lines += [variant(f"slow{ns}", ns) for ns in cfg["ns"]]
    cfg = {k: v for k, v in cfg.items() if k not in ("ns", "copies")}
    interleaved = design == "interleaved"  # no [observe] alloc there (spec/design.py): nominal() uses the CPU
    alloc = "" if interleaved else ALLOC
    rest = REST.format(variants="\n".join(lines), host_speed=str(host_speed).lower(), alloc=alloc)
    text = C.read_only_experiment("fidelity", cfg, rest)
    turns = f'slice = "{slice_s}"\n' if slice_s else ""
    return text.replace("[experiment]\n", f'[experiment]\ndesign = "{design}"\n{turns}', 1)


def copy_name(i: int) -> str:
    return SAME if i == 1 else f"{SAME}{i}"


def is_copy(name: str) -> bool:
    """`same`, `same2`, ...: identical to the baseline (--copies), a name apart."""
    return name == SAME or (name.startswith(SAME) and name[len(SAME):].isdigit())


def calibration(slope: float, chase_weight: float = 0.0, steal_weight: float = 0.0) -> dict[str, Any]:
    """CALIBRATED as a `perflab calibrate` that measured this slope (and weights) gives it."""
    return {"slope": slope, "r": None, "rounds": None, "created_at": "--calibrated-slope",
            "chase_weight": chase_weight or None, "steal_weight": steal_weight or None}  # fmt: skip


def calibrated_on(cells: list[dict[str, Any]], rounds: int, weigh: set[str]) -> dict[str, Any] | None:
    """--calibrate-on K: the host-speed figure `perflab calibrate` would store from the first K
    rounds' cells (analyze/host_slope.calibrate; the chase and the steal weighed in when `weigh`
    names them and their slopes are resolved), dated as such; None: no slope."""
    first = [c for c in cells if c["repeat"] <= rounds]
    found = host_slope.calibrate(first, chase="chase" in weigh, steal="steal" in weigh)
    return found and {**found, "created_at": f"--calibrate-on {rounds}"}


def by_round(cells: list[dict[str, Any]]) -> dict[str, dict[int, float]]:
    """QPS of every settled ok cell, per variant and round."""
    out: dict[str, dict[int, float]] = {}
    for c in cells:
        if c["status"] == "ok" and c.get("settled") not in (False, 0) and (c.get("summary") or {}).get("qps"):
            out.setdefault(c["variant"]["effect"], {})[c["repeat"]] = c["summary"]["qps"]
    return out


def of(cells: list[dict[str, Any]], variant: str) -> list[dict[str, Any]]:
    return [c for c in cells if c["variant"]["effect"] == variant]


def cell_seconds(doc: dict[str, Any]) -> float:
    """Wall time per cell: the mean of the cells' own spans (restore, start, warm-up, window and
    stop: a run's cells follow each other without a gap), not the run's span over its cells, which
    counts the pause of a run that was resumed. An interleaved cell's span is its group's (the
    servers that ran at once): its share is the span over the group's size."""
    cells = [c for c in doc["cells"] if c.get("started_at") and c.get("ended_at")]
    return C.mean([(datetime.fromisoformat(c["ended_at"]) - datetime.fromisoformat(c["started_at"])).total_seconds()
                   / len((c.get("design") or {}).get("group") or [c]) for c in cells])  # fmt: skip


def interval(est: ratio.Estimate) -> tuple[float, float] | None:
    return (est.low, est.high) if est.has_interval and est.low is not None else None


def full_run(base: dict[int, float], other: dict[int, float]) -> dict[str, Any]:
    chosen, welch, why = ratio.estimate(base, other)
    paired = ratio.paired(base, other)
    (judged,) = verdict.judge([chosen], higher_is_better=True)
    p, w = interval(paired), interval(welch)
    return {
        "ratio": C.rnd(chosen.ratio), "verdict": judged.verdict, "method": why, "rounds": paired.n,
        "paired": p and [C.rnd(x) for x in p], "welch": w and [C.rnd(x) for x in w],
        "width_paired_over_welch": C.rnd((p[1] - p[0]) / (w[1] - w[0]), 3) if p and w else None,
    }  # fmt: skip


def experiment(base: dict[int, float], other: dict[int, float], rounds: list[int]) -> tuple[str, int, str, float]:
    """One resampled experiment on these rounds (in order, repeats allowed): the adaptive verdict
    and its round, the fixed protocol's verdict, and paired/Welch width at the end."""
    b = {i + 1: base[r] for i, r in enumerate(rounds)}
    o = {i + 1: other[r] for i, r in enumerate(rounds)}
    (track,) = sequential.replay([(b, o)], sequential.Design(max_rounds=len(rounds)), len(rounds))
    chosen, welch, _ = ratio.estimate(b, o)
    (fixed,) = verdict.judge([chosen], higher_is_better=True)
    p, w = interval(chosen) if chosen.method == ratio.PAIRED else None, interval(welch)  # paired when it can be
    width = (p[1] - p[0]) / (w[1] - w[0]) if p and w else math.nan
    return track.verdict, track.round or len(rounds), fixed.verdict, width


def adjusted_experiment(pairs: list[tuple[dict[str, Any], dict[str, Any]]], name: str) -> tuple[str, int, str, float]:
    """experiment() as perflab judges a run with [observe] host_speed: these (base, other) cell
    pairs renumbered as rounds 1..m of a two-variant run, the slope refitted on the cells so far
    at each look (sequential.monitor) and on all of them for the fixed protocol."""
    cells = []
    for i, (b, o) in enumerate(pairs):
        cells += [{**b, "id": 2 * i, "repeat": i + 1}, {**o, "id": 2 * i + 1, "repeat": i + 1}]
    axes = {"effect": [BASE, name]}
    design = sequential.Design(max_rounds=len(pairs))
    (found,) = sequential.monitor(cells, {"effect": BASE}, axes, design, len(pairs), CALIBRATED)
    groups = summary.groups(cells, {"effect": BASE}, axes)
    fit = host_speed.fit(cells, "qps", CALIBRATED)
    row = compare.compare_groups(groups[0], groups[1], "qps", "variant", adjust=fit)
    (fixed,) = compare.judged([row])
    est = row.estimate
    width = math.nan
    if est is not None and est.method == ratio.PAIRED and row.welch_ci_low and est.low:
        width = (est.high - est.low) / (row.welch_ci_high - row.welch_ci_low)
    return found.track.verdict, found.track.round or len(pairs), fixed.verdict, width


def centred_cells(cells: list[dict[str, Any]], name: str) -> dict[int, tuple[dict, dict]]:
    """round -> (base cell, `name` cell); for the A/A pair, `name`'s QPS and its canary's speed
    both shifted so that their full-run mean log-ratios against the baseline are exactly 0 (the
    null made exact for the covariate too: else each resample's refitted slope times the run's
    chance offset in speed would count as an effect)."""
    base = {c["repeat"]: c for c in of(cells, BASE) if _usable(c)}
    other = {c["repeat"]: c for c in of(cells, name) if _usable(c)}
    pairs = {r: (base[r], other[r]) for r in sorted(set(base) & set(other))}
    if not is_copy(name):
        return pairs

    def shift(path: tuple[str, str]) -> float | None:
        logs = [math.log(o[path[0]][path[1]] / b[path[0]][path[1]]) for b, o in pairs.values()
                if (b.get(path[0]) or {}).get(path[1]) and (o.get(path[0]) or {}).get(path[1])]  # fmt: skip
        return math.exp(-C.mean(logs)) if logs else None

    qps = shift(("summary", "qps"))
    canary = {name: shift(("host_speed", name)) for name in ("work_ns", "chase_ns")}  # the chase: since 2026-11-25
    steals = [steal_of(o) - steal_of(b) for b, o in pairs.values()
              if steal_of(b) is not None and steal_of(o) is not None]  # fmt: skip
    steal = C.mean(steals) if steals else 0.0  # steal is additive (cores): its difference taken out, not a ratio
    out = {}
    for r, (b, o) in pairs.items():
        moved = {**o, "summary": {**o["summary"], "qps": o["summary"]["qps"] * (qps or 1.0)}}
        for name, factor in canary.items():
            if factor and (o.get("host_speed") or {}).get(name):
                moved["host_speed"] = {**moved["host_speed"], name: o["host_speed"][name] * factor}
        if steal_of(o) is not None:
            moved["resources"] = {**o["resources"], "steal_cpu_cores": steal_of(o) - steal}
        out[r] = (b, moved)
    return out


def steal_of(c: dict[str, Any]) -> float | None:
    value = (c.get("resources") or {}).get("steal_cpu_cores")
    return float(value) if isinstance(value, int | float) else None


def _usable(c: dict[str, Any]) -> bool:
    return c["status"] == "ok" and c.get("settled") not in (False, 0) and bool((c.get("summary") or {}).get("qps"))


def resampled_cells(cells: list[dict[str, Any]], name: str, m: int, seed: int) -> dict[str, Any]:
    """resampled() with the host-speed adjustment: the same draws of rounds (the same seed)."""
    pairs = centred_cells(cells, name)
    rounds = sorted(pairs)
    rng = random.Random(seed)
    return tally(lambda: adjusted_experiment([pairs[rng.choice(rounds)] for _ in range(m)], name))


def full_run_adjusted(cells: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The full run of `name` against the baseline as perflab reports it with the canary: the
    adjusted and unadjusted ratio and interval, and the canary's balance between the sides (a
    variant that moved the canary itself would show here)."""
    pair = [c for c in cells if c["variant"]["effect"] in (BASE, name)]
    fit = host_speed.fit(pair, "qps", CALIBRATED)
    axes = {"effect": [BASE, name]}
    groups = summary.groups(pair, {"effect": BASE}, axes)
    (row,) = compare.judged([compare.compare_groups(groups[0], groups[1], "qps", "variant", adjust=fit)])
    out = {"adjusted": row.adjusted, "adjustment": row.adjustment, "ratio": C.rnd(row.ratio), "verdict": row.verdict,
           "ci": [C.rnd(row.ci_low), C.rnd(row.ci_high)],
           "unadjusted": [C.rnd(row.unadjusted_ratio), C.rnd(row.unadjusted_ci_low), C.rnd(row.unadjusted_ci_high)]}  # fmt: skip
    if fit is not None:
        diff, p = fit.balance(groups[0].cells, groups[1].cells)
        out.update(slope=C.rnd(fit.slope, 3), r=C.rnd(fit.r, 3), canary_difference=C.rnd(math.exp(diff) - 1, 4),
                   canary_p=C.rnd(p, 4) if p is not None else None)  # fmt: skip
    return out


def resampled(base: dict[int, float], other: dict[int, float], m: int, centre: bool, seed: int) -> dict[str, Any]:
    rounds = sorted(set(base) & set(other))
    if centre:  # the A/A null made exact: the pair's mean log-ratio taken out
        shift = math.exp(-C.mean([math.log(other[r] / base[r]) for r in rounds]))
        other = {r: q * shift for r, q in other.items()}
    rng = random.Random(seed)
    return tally(lambda: experiment(base, other, [rng.choice(rounds) for _ in range(m)]))


def tally(one: Callable[[], tuple[str, int, str, float]]) -> dict[str, Any]:
    """RESAMPLES resampled experiments (`one` draws and judges one: adaptive verdict, its round,
    fixed verdict, paired/Welch width): the share of each verdict, the mean stop round, the
    median width ratio."""
    adaptive: Counter[str] = Counter()
    fixed: Counter[str] = Counter()
    stops, ran, widths = [], [], []
    for _ in range(RESAMPLES):
        v, at, f, width = one()
        adaptive[v] += 1
        fixed[f] += 1
        ran.append(at)
        if v != verdict.INCONCLUSIVE:
            stops.append(at)
        if not math.isnan(width):
            widths.append(width)
    share = lambda c: {k: round(c[k] / RESAMPLES, 4) for k in verdict.VERDICTS}
    return {"adaptive": share(adaptive), "fixed": share(fixed), "mean_stop_round": C.rnd(C.mean(stops), 2) if stops
            else None, "mean_rounds": C.rnd(C.mean(ran), 2),
            "width_paired_over_welch": C.rnd(statistics.median(widths), 3) if widths else None}  # fmt: skip


def fixed_3x60(base: dict[int, float], other: dict[int, float], seed: int) -> dict[str, float]:
    """The fixed protocol the issue measures against (3 rounds of 60 s windows, judged as perflab
    judges 3 rounds: Welch), approximated by 3 rounds drawn with replacement from the real
    cells (10 s windows unless --duration): its share of each verdict. A 60 s window only shrinks the window's share of a cell's
    variance (restarts dominate here), so this understates its precision a little."""
    rounds = sorted(set(base) & set(other))
    rng = random.Random(seed)
    found: Counter[str] = Counter()
    for _ in range(RESAMPLES):
        picked = [rng.choice(rounds) for _ in range(FIXED_ROUNDS)]
        b = {i + 1: base[r] for i, r in enumerate(picked)}
        o = {i + 1: other[r] for i, r in enumerate(picked)}
        (judged,) = verdict.judge([ratio.estimate(b, o)[0]], higher_is_better=True)
        found[judged.verdict] += 1
    return {k: round(found[k] / RESAMPLES, 4) for k in verdict.VERDICTS}


def time_to_correct(row: dict[str, Any], cell_s: float, adjusted: bool) -> dict[str, Any] | None:
    """Expected wall time to a correct `slower` (a protocol's mean time over its share of correct
    verdicts: the time if it is repeated until it gets one), adaptive 10-minute design against
    the fixed 3 x 60 s protocol, and their ratio (the issue's goal: <= 1/3)."""
    res = (row["adjusted"] if adjusted else row)["resampled"]
    fixed_share = row["fixed_3x60"]["slower"]
    adaptive_s = res["mean_rounds"] * 2 * cell_s
    fixed_s = FIXED_ROUNDS * 2 * (FIXED_WINDOW_S + cell_s - WINDOW_S)
    if not res["adaptive"]["slower"]:
        return None
    out = {"adaptive_s": round(adaptive_s / res["adaptive"]["slower"]), "fixed_share": fixed_share}
    if fixed_share:
        out.update(fixed_s=round(fixed_s / fixed_share), ratio=C.rnd(adaptive_s / res["adaptive"]["slower"]
                                                                     / (fixed_s / fixed_share), 3))  # fmt: skip
    return out


def disjoint(base: dict[int, float], other: dict[int, float], size: int) -> list[str]:
    """Verdicts of consecutive blocks of `size` rounds, each judged as its own fixed run."""
    rounds = sorted(set(base) & set(other))
    blocks = [rounds[i : i + size] for i in range(0, len(rounds) - size + 1, size)]
    return [experiment(base, other, block)[2] for block in blocks]


def server_cpu(c: dict[str, Any]) -> float | None:
    """A cell's server CPU per transaction, µs."""
    return (c.get("resources") or {}).get("server_cpu_us_per_txn")


def client_cpu(c: dict[str, Any]) -> float | None:
    """A cell's client (sysbench) CPU per transaction, µs."""
    return (c.get("client") or {}).get("cpu_us_per_txn")


def nominal(cells: list[dict[str, Any]], variant: str, ns: int) -> tuple[float | None, float | None]:
    """(machine-bound, server-bound) nominal slowdowns of `variant` from the CPU per transaction.

    The shim's burn is extra server CPU per transaction (measured: the variant's server CPU less
    the baseline's; without alloc counts, with [observe] alloc: calls x ns). Server-bound: the
    slowdown if the server's CPU alone set the pace, 1 - server / (server + burn). Machine-bound:
    the client shares the two vCPUs, which the workload keeps busy, so the pace is set by the
    machine's CPU per transaction, 1 - (server + client) / (server + client + burn): the burn is
    a smaller share of it. Measured on four interleaved runs (docs/methodology.md), the measured
    effect matched the machine-bound figure (2.1% against 2.1%, 2.8% against 2.8%), not the
    server-bound one (2.8%, 3.6%)."""

    def mean_of(name: str, value: Any) -> float | None:
        found = [value(c) for c in cells if c["status"] == "ok" and c["variant"]["effect"] == name]
        found = [x for x in found if x is not None]
        return C.mean(found) if found else None

    cpu = mean_of(BASE, server_cpu)
    if not any(c.get("alloc") for c in cells):  # --design interleaved: the burn is the variant's extra CPU
        slow = mean_of(variant, server_cpu)
        burn = slow - cpu if cpu and slow else None
    else:
        calls = mean_of(variant, lambda c: sum(((c.get("alloc") or {}).get("calls_per_txn") or {}).get(op, 0)
                                               for op in ("malloc", "calloc", "realloc")))  # fmt: skip
        burn = calls * ns / 1000 if calls is not None else None
    if not cpu or burn is None:
        return None, None
    machine = cpu + (mean_of(BASE, client_cpu) or 0.0)  # no client figure: the server-bound one
    return 1 - machine / (machine + burn), 1 - cpu / (cpu + burn)


def analyse(doc: dict[str, Any]) -> dict[str, Any]:
    cells = doc["cells"]
    cell_s = cell_seconds(doc)
    global CALIBRATED
    calibrated = None
    if CALIBRATE_ON:  # the first rounds calibrate, the rest are judged with it fixed (out of sample)
        CALIBRATED = calibrated = calibrated_on(cells, CALIBRATE_ON, WEIGH)
        cells = [c for c in cells if c["repeat"] > CALIBRATE_ON]
    qps = by_round(cells)
    steals = [s for c in cells if (s := steal_of(c)) is not None]
    m = max(sequential.Design.min_rounds, int(BUDGET_S // (2 * cell_s)))
    base = qps[BASE]
    out: dict[str, Any] = {"cell_s": round(cell_s, 1), "rounds_in_10_min": m, "resamples": RESAMPLES,
                           "failed_or_unsettled": sum(1 for c in cells if c["status"] != "ok"
                                                      or c.get("settled") in (False, 0)),
                           "calibrated": CALIBRATED, "calibrate_on": CALIBRATE_ON,
                           "steal_cpu_cores": C.rnd(C.mean(steals), 3) if steals else None,
                           "rounds_judged": len({c["repeat"] for c in cells}), "variants": {}}  # fmt: skip
    if CALIBRATE_ON and calibrated is None:
        raise C.BenchError(f"--calibrate-on {CALIBRATE_ON}: those rounds fit no host-speed slope")
    for name in sorted(qps, key=lambda n: (not is_copy(n), int(n[4:]) if n.startswith("slow") else 0, n)):
        if name == BASE:
            continue
        ns = int(name[4:]) if name.startswith("slow") else 0
        machine, server = nominal(cells, name, ns)
        row = {"ns": ns, "full": full_run(base, qps[name]), "nominal_effect": C.rnd(machine),
               "nominal_server_effect": C.rnd(server),
               "resampled": resampled(base, qps[name], m, centre=is_copy(name), seed=ns + 7),
               "other_cpu_cores": C.other_cpu_cores(of(cells, name))}  # fmt: skip
        if any(c.get("host_speed") for c in of(cells, name)):
            row["adjusted"] = {"full": full_run_adjusted(cells, name),
                               "resampled": resampled_cells(cells, name, m, seed=ns + 7)}  # fmt: skip
        if not is_copy(name):
            row["fixed_3x60"] = fixed_3x60(base, qps[name], seed=ns + 11)
            row["time_to_correct"] = time_to_correct(row, cell_s, adjusted=False)
            if "adjusted" in row:
                row["time_to_correct_adjusted"] = time_to_correct(row, cell_s, adjusted=True)
        if is_copy(name):
            row["disjoint"] = {
                "5": Counter(disjoint(base, qps[name], 5)),
                str(m): Counter(disjoint(base, qps[name], m)),
            }
        out["variants"][name] = row
    out["other_cpu_cores"] = C.other_cpu_cores(of(cells, BASE))
    slow = [(n, r) for n, r in out["variants"].items() if not is_copy(n)]
    called = [(n, r) for n, r in slow if r["resampled"]["adaptive"]["slower"] >= SENSITIVE]
    out["sensitivity"] = (
        {"variant": called[0][0], "measured_effect": C.rnd(1 - called[0][1]["full"]["ratio"]),
         "nominal_effect": called[0][1]["nominal_effect"]} if called else None
    )  # fmt: skip
    adjusted = [(n, r) for n, r in slow if r.get("adjusted")]
    if adjusted:
        called = [(n, r) for n, r in adjusted if r["adjusted"]["resampled"]["adaptive"]["slower"] >= SENSITIVE]
        out["sensitivity_adjusted"] = (
            {"variant": called[0][0], "measured_effect": C.rnd(1 - called[0][1]["adjusted"]["full"]["ratio"]),
             "nominal_effect": called[0][1]["nominal_effect"]} if called else None
        )  # fmt: skip
    return out


def show(out: dict[str, Any]) -> None:
    C.say(f"{out['cell_s']} s a cell: a 10-minute two-variant experiment holds {out['rounds_in_10_min']} rounds; "
          f"{out['resamples']} resamples each of {out['rounds_judged']} rounds; failed or unsettled cells: "
          f"{out['failed_or_unsettled']}; steal {out['steal_cpu_cores']} cores on average")  # fmt: skip
    cal = out.get("calibrated")
    if cal:
        C.say(f"host speed fixed ({cal['created_at']}): slope {cal['slope']} ± {cal.get('se')}, r {cal.get('r')}, "
              f"chase weight {cal.get('chase_weight')}, steal weight {cal.get('steal_weight')}; a run would "
              + (f"not use it: {why}" if (why := host_slope.usable_slope(cal)) else "use it"))  # fmt: skip
    rows = []
    for name, r in out["variants"].items():
        f, a, x = r["full"], r["resampled"]["adaptive"], r["resampled"]["fixed"]
        rows.append([
            name, f"{C.pct(r['nominal_effect'], 1)} / {C.pct(r.get('nominal_server_effect'), 1)}",
            f"{f['ratio']:.3f} {f['verdict']}",
            f["paired"] and f"[{f['paired'][0]:.3f}-{f['paired'][1]:.3f}]",
            f["welch"] and f"[{f['welch'][0]:.3f}-{f['welch'][1]:.3f}]", f["width_paired_over_welch"],
            f"{C.pct(a['slower'], 1)} / {C.pct(a['faster'], 1)} / {C.pct(a['equivalent'], 1)}",
            r["resampled"]["mean_stop_round"],
            f"{C.pct(x['slower'], 1)} / {C.pct(x['faster'], 1)}", r["resampled"]["width_paired_over_welch"],
            f"{r['other_cpu_cores']['mean']} / {r['other_cpu_cores']['max']}",
        ])  # fmt: skip
    C.say(C.table(["variant", "nominal machine / server", "full run", "paired 95%", "welch 95%", "width p/w",
                   "10-min adaptive slower/faster/equiv", "stop round", "10-min fixed slower/faster",
                   "width p/w (10 min)", "other cores mean/max"], rows))  # fmt: skip
    same = out["variants"].get(SAME)
    if same:
        a = same["resampled"]["adaptive"]
        C.say(f"\nA/A (centred): false faster/slower in {C.pct(a['faster'] + a['slower'], 1)} of resampled 10-minute "
              f"adaptive experiments, {C.pct(same['resampled']['fixed']['faster'] + same['resampled']['fixed']['slower'], 1)}"
              f" of fixed ones; disjoint real blocks: {dict(same['disjoint'])}")  # fmt: skip
    for name, r in out["variants"].items():
        for key, how in (("time_to_correct", "unadjusted"), ("time_to_correct_adjusted", "adjusted")):
            t = r.get(key)
            if t:
                C.say(f"{name}, {how}: time to a correct `slower`: adaptive {t['adaptive_s']} s; fixed 3 x 60 s "
                      f"calls it in {C.pct(t['fixed_share'], 1)}" + (f", {t['fixed_s']} s: ratio {t['ratio']}"
                                                                      if t.get("ratio") else ": never"))  # fmt: skip
    s = out["sensitivity"]
    C.say(f"sensitivity (called slower in >= {SENSITIVE:.0%} of 10-minute experiments): "
          + (f"{s['variant']}, a measured effect of {C.pct(s['measured_effect'], 1)} (nominal "
             f"{C.pct(s['nominal_effect'], 1)})" if s else "none of these settings"))  # fmt: skip
    if "sensitivity_adjusted" not in out:
        return
    rows = []
    for name, r in out["variants"].items():
        f, res = r["adjusted"]["full"], r["adjusted"]["resampled"]
        a, x = res["adaptive"], res["fixed"]
        rows.append([
            name, f"{f['ratio']:.3f} [{f['ci'][0]:.3f}-{f['ci'][1]:.3f}] {f['verdict']}",
            f"{f['unadjusted'][0]:.3f} [{f['unadjusted'][1]:.3f}-{f['unadjusted'][2]:.3f}]",
            f"{f.get('slope')} / {f.get('r')}", f"{C.pct(f.get('canary_difference'), 1)} (p {f.get('canary_p')})",
            f"{C.pct(a['slower'], 1)} / {C.pct(a['faster'], 1)} / {C.pct(a['equivalent'], 1)}",
            res["mean_stop_round"], f"{C.pct(x['slower'], 1)} / {C.pct(x['faster'], 1)}",
        ])  # fmt: skip
    C.say("\nadjusted for host speed ([observe] host_speed, analyze/host_speed.py), the same resamples:")
    C.say(C.table(["variant", "full run adjusted [95%]", "unadjusted [95%]", "slope / r", "canary B vs A",
                   "10-min adaptive slower/faster/equiv", "stop round", "10-min fixed slower/faster"], rows))  # fmt: skip
    s = out["sensitivity_adjusted"]
    C.say("sensitivity adjusted: " + (f"{s['variant']}, a measured effect of {C.pct(s['measured_effect'], 1)} "
                                       f"(nominal {C.pct(s['nominal_effect'], 1)})" if s else "none of these settings"))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ns", default="500,1000,1700", help="slow settings, ns per allocation call (comma-separated)")
    parser.add_argument("--copies", type=int, default=2, metavar="K",
                        help="identical variants (the baseline and K-1 copies: same, same2, ...); more copies give "
                             "more real A/A pairs per round for bench/aa_real.py (default 2)")
    parser.add_argument("--rounds", type=int, help="rounds (default 30; --quick 6)")
    parser.add_argument("--duration", type=int, metavar="S",
                        help="measured window per cell, seconds (default 10; --quick 3); the 10-minute experiments "
                             "hold fewer rounds of longer windows, as calibrate's plan may recommend")
    parser.add_argument("--warmup", metavar="S|auto",
                        help='fixed warm-up seconds (default 5; --quick 2), or "auto": perflab\'s default rule')
    parser.add_argument("--max-warmup", type=int, metavar="S", help="with --warmup auto: max_warmup (perflab's default 10)")
    parser.add_argument("--results", metavar="DIR", help="keep the results directory here")
    parser.add_argument("--analyse", metavar="DIR", help="analyse a kept results directory, no run")
    parser.add_argument("--quick", action="store_true", help="smoke test: 6 rounds of 3 s windows, a tiny dataset")
    parser.add_argument("--host-speed", action="store_true", help="[observe] host_speed: judge adjusted for it too")
    parser.add_argument("--calibrated-slope", type=float, metavar="B",
                        help="judge the adjusted figures with this host-speed slope fixed, as a run planned with a "
                             "calibration that measured it (another run's; bench/archive/host_speed_estimators.py prints it)")
    parser.add_argument("--chase-weight", type=float, metavar="W", default=0.0,
                        help="with --calibrated-slope: the canary's chase weighed in with W, as a calibration's "
                             "host_speed.chase_weight (bench/archive/canary_chase.py prints fits)")
    parser.add_argument("--steal-weight", type=float, metavar="W", default=0.0,
                        help="with --calibrated-slope: the host's steal time weighed in with W, as a calibration's "
                             "host_speed.steal_weight")
    parser.add_argument("--calibrate-on", type=int, metavar="K",
                        help="with --host-speed: fit the slope and its weights as perflab calibrate does on the first "
                             "K rounds, and judge the later rounds only, with them fixed (out of sample)")
    parser.add_argument("--weigh", default="chase,steal", metavar="LIST",
                        help="with --calibrate-on: what may be weighed in beside the canary's spin: chase, steal, "
                             "both (the default) or none ('')")
    parser.add_argument("--design", choices=("sequential", "interleaved"), default="sequential",
                        help="experiment.design of the run (interleaved: no [observe] alloc, no --host-speed; the "
                             "burn in the nominal effect is then the variant's extra server CPU per transaction)")
    parser.add_argument("--slice", metavar="TURN", help='with --design interleaved: experiment.slice ("250ms", "1s")')
    args = parser.parse_args()
    if args.slice and args.design != "interleaved":
        parser.error("--slice: the turn of the interleaved design; add --design interleaved")
    if args.design == "interleaved" and args.host_speed:
        parser.error("--host-speed: the interleaved design takes no host-speed canary (spec/design.py)")
    global CALIBRATED, CALIBRATE_ON, WEIGH
    if args.calibrated_slope is not None:
        CALIBRATED = calibration(args.calibrated_slope, args.chase_weight, args.steal_weight)
    if args.calibrate_on is not None:
        if args.calibrated_slope is not None or args.calibrate_on < 2:
            parser.error("--calibrate-on K: K >= 2 rounds, and not with --calibrated-slope")
        CALIBRATE_ON = args.calibrate_on
    WEIGH = {w for w in args.weigh.split(",") if w}
    if WEIGH - {"chase", "steal"}:
        parser.error(f"--weigh: unknown {sorted(WEIGH - {'chase', 'steal'})}; chase, steal or both")
    cfg = settings(args)

    def run() -> None:
        started = time.monotonic()
        machine = C.Machine()
        if args.analyse:
            results = Path(args.analyse)
        else:
            with C.workdir(machine) as tmp:
                lib = build(tmp / "shim")
                toml = tmp / "fidelity.toml"
                toml.write_text(spec_text(cfg, lib, args.host_speed, args.design, args.slice), encoding="utf-8")
                results = Path(args.results) if args.results else Path(tempfile.mkdtemp(prefix="plbench-fidelity-"))
                C.cli("run", str(toml), "-o", str(results), "--seed", "7")
        doc = json.loads(C.cli("export", str(results)))
        out = analyse(doc)
        info = machine.finish()
        show(out)
        C.say(f"results: {results}; {(time.monotonic() - started) / 60:.1f} min")
        C.say(C.Machine.describe(info))
        C.final_json({"bench": "fidelity", "settings": cfg, **out, "machine": info})

    C.main_guard(run)


if __name__ == "__main__":
    main()
