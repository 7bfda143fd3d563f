"""What to distrust in a results directory: one list of findings for every report format.

Input: the Groups of analyze/summary.py, the cells as loaded by `summary.load`, the run's
meta. Output: Finding rows in a fixed order (noisy groups and missing intervals, unsettled
cells, stalls, too-short series, busy machine, dropped allocation samples, adaptive targets,
a calibrated host-speed slope the run contradicts, variants that ran on a dataset of their
own, failed cells); the terminal, HTML and Markdown
reports print the same list, so they never disagree.

    Finding("warning", "noise", "allocator=glibc at 2 threads varies 4.1% across repeats ...")
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

from perflab.analyze import alloc, host_slope, host_speed, stats
from perflab.analyze.summary import Group
from perflab.report import io_findings
from perflab.report.finding import Finding
from perflab.units import format_duration
from perflab.variants import variant_label
from perflab.store.results import server_facts

BUSY_CORES = 0.2  # CPU used by other processes during a window, above which a cell is suspect
STEAL_CORES = 0.2  # CPU the hypervisor gave other guests during a window, above which a cell is suspect
STALL_STEAL = 0.5  # cores of steal during a stall from which it is called the host's (a quarter of 2 vCPUs)
STEAL_NOTE = 0.02  # mean steal of a run's windows worth a line (0 on bare metal and an idle host)


def collect(
    all_groups: list[Group], cells: list[dict[str, Any]], meta: dict[str, Any], comparisons: list[Any] | None = None
) -> list[Finding]:
    """Every finding of a run; `comparisons` (analyze/compare.py), when given, add the budget that
    would settle a fixed-repeats run's inconclusive verdicts."""
    out = _group_findings(all_groups, meta)
    out += _cell_findings(cells, (meta.get("throughput") or {}).get("metric") or "QPS")
    dropped = alloc.dropped_samples(cells)
    if dropped:
        ids = tuple(c["id"] for c in cells if c["status"] == "ok" and (c.get("alloc") or {}).get("dropped_samples"))
        out.append(Finding("warning", "alloc-dropped", dropped, ids))
    started = alloc.started_in_window(cells)
    if started:
        ids = alloc.started_cells(cells)
        out.append(Finding("warning", "alloc-started", started, ids))
    out += _adaptive_findings(meta)
    out += budget_findings(comparisons or [], cells, meta)
    out += _host_speed_findings(cells, meta)
    out += _dataset_findings(cells, meta) + io_findings.durability_findings(cells, meta)
    for cell in cells:
        if cell["status"] != "ok":
            first = (cell["error"] or "").strip().splitlines()
            out.append(
                Finding(
                    "failed",
                    "failed",
                    f"failed: cell {cell['id']} {cell['key']}: {first[0] if first else '?'}",
                    (cell["id"],),
                )
            )
    return out


def _group_findings(all_groups: list[Group], meta: dict[str, Any]) -> list[Finding]:
    noisy = (meta.get("experiment") or {}).get("cv_warning", 0.03)
    out = []
    for g in all_groups:
        if g.qps_cv is not None and g.qps_cv > noisy:
            out.append(
                Finding(
                    "warning",
                    "noise",
                    f"{g.label} at {g.threads} threads varies {g.qps_cv:.1%} across repeats (above {noisy:.0%}); "
                    "differences smaller than that are noise. Remedy: a longer duration, pin = true "
                    "(measure it first: `perflab calibrate FILE.toml` with and without it), "
                    'more repeats or repeats = "auto", and an idle machine' + _interleave(meta),
                    tuple(g.cell_ids),
                )
            )
        if len(g.qps) < stats.MIN_REPEATS and not g.failed:
            out.append(
                Finding(
                    "warning",
                    "repeats",
                    f"{g.label} at {g.threads} threads has {len(g.qps)} settled repeat(s): "
                    f"no confidence interval can be given below {stats.MIN_REPEATS}. Remedy: repeats = 3 or more",
                    tuple(g.cell_ids),
                )
            )
    return out


def _cell_findings(cells: list[dict[str, Any]], metric: str = "QPS") -> list[Finding]:
    out = []
    for cell in cells:
        if cell["status"] == "ok" and cell.get("settled") in (False, 0):
            out.append(
                Finding(
                    "warning",
                    "unsettled",
                    f"cell {cell['id']} {cell['key']} did not settle: {cell.get('unsettled_reason')}; "
                    "it is left out of the intervals. Remedy: a longer warmup "
                    '(or max_warmup with warmup = "auto"), a longer duration',
                    (cell["id"],),
                )
            )
        for stall in cell.get("stalls") or []:
            where = (
                "in the warm-up" if stall["end_s"] <= (cell.get("window_start_s") or 0) else "in the measured window"
            )
            depth = "no report from the client" if stall["kind"] == "no-report" else f"min {stall['min_qps']:,.0f} {metric}"
            depth += _stall_steal(stall.get("steal_cores")) + io_findings.stall_phrase(stall.get("io"))
            out.append(
                Finding(
                    "stall",
                    "stall",
                    f"stall: cell {cell['id']} {cell['key']} {stall['start_s']:.0f}-{stall['end_s']:.0f} s "
                    f"{where} ({depth}); "
                    "what grew in it: `perflab diff DIR --cell "
                    f"{cell['id']} --phase-b stall --source pmp --target client` (or server), with "
                    '[observe] pmp = { targets = ["server", "client"] } (and warmup = true for a stall in the warm-up)',
                    (cell["id"],),
                )
            )
    drifting = [
        (c["steady"]["drift"], c)
        for c in cells
        if c["status"] == "ok" and (c.get("steady") or {}).get("drift") is not None
    ]
    if drifting:
        worst = ", ".join(f"cell {c['id']} {d:+.1%}" for d, c in sorted(drifting, key=lambda x: -abs(x[0]))[:5])
        out.append(
            Finding(
                "warning",
                "drift",
                f"{len(drifting)} cell(s) drift by more than 3% within their window (worst: {worst}); "
                "the spread between repeats carries it into the intervals. "
                "Remedy: longer windows and more repeats, or a quieter machine",
                tuple(c["id"] for _, c in drifting),
            )
        )
    short = [c["id"] for c in cells if c["status"] == "ok" and c.get("warmup_method") == "none"]
    if short:
        out.append(
            Finding(
                "warning",
                "short",
                f"{len(short)} cell(s) have fewer than 4 per-second reports, too few to check that they were in steady "
                "state (cells "
                + ", ".join(map(str, short[:10]))
                + ("..." if len(short) > 10 else "")
                + "). Remedy: warm-up + duration of 10 s or more",
                tuple(short),
            )
        )
    busy = [
        (c["resources"]["other_cpu_cores"], c)
        for c in cells
        if c["status"] == "ok" and ((c.get("resources") or {}).get("other_cpu_cores") or 0) > BUSY_CORES
    ]
    if busy:
        worst = ", ".join(f"cell {c['id']} {cores:.2f}" for cores, c in sorted(busy, key=lambda x: -x[0])[:5])
        out.append(
            Finding(
                "warning",
                "busy",
                f"{len(busy)} of {len(cells)} cells ran while other processes used more than {BUSY_CORES} cores "
                f"(worst: {worst}); their figures include that interference. Remedy: an idle machine",
                tuple(c["id"] for _, c in busy),
            )
        )
    out += _steal_findings(cells)
    return out


def _stall_steal(cores: float | None) -> str:
    """What the host took during a stall (its `steal_cores`, sampled since 2026-11-27): from
    STALL_STEAL cores on, the stall is likely the host's (its other guests had this VM's CPUs)."""
    if cores is None:
        return ""
    if cores >= STALL_STEAL:
        return f"; the host took {cores:.2f} cores meanwhile (steal time): likely the host's stall, not the server's"
    return f"; host steal {cores:.2f} cores: not the host's"


def _steal_findings(cells: list[dict[str, Any]]) -> list[Finding]:
    """Steal time (resources.steal_cpu_cores): the host gave this VM's CPUs to its other guests
    while they wanted to run. A warning for the cells that lost more than STEAL_CORES, else a
    line with the run's mean when it is above STEAL_NOTE (older runs have no field: nothing)."""
    ok = [c for c in cells if c["status"] == "ok"]
    steal = [(cores, c) for c in ok if (cores := (c.get("resources") or {}).get("steal_cpu_cores")) is not None]
    if not steal:
        return []
    mean = sum(s for s, _ in steal) / len(steal)
    worst = [(s, c) for s, c in steal if s > STEAL_CORES]
    what = (
        "the hypervisor gave this VM's CPUs to other guests while they wanted to run (steal time), so those "
        "windows ran slower; rounds cancel it only where it falls on every variant alike "
        '(design = "interleaved" spreads it over every variant\'s turns)'
    )
    if worst:
        named = ", ".join(f"cell {c['id']} {s:.2f}" for s, c in sorted(worst, key=lambda x: -x[0])[:5])
        text = (
            f"{len(worst)} of {len(cells)} cells lost more than {STEAL_CORES} cores to other guests of the host "
            f"(worst: {named}; mean of the run {mean:.2f}): {what}. Remedy: a quieter host or hour; the export's "
            "resources.steal_cpu_cores per cell"
        )
        return [Finding("warning", "steal", text, tuple(c["id"] for _, c in worst))]
    if mean > STEAL_NOTE:
        return [Finding("info", "steal", f"the host took {mean:.2f} cores of the run's windows on average: {what}")]
    return []


def _adaptive_findings(meta: dict[str, Any]) -> list[Finding]:
    adaptive = meta.get("adaptive")
    if not adaptive:
        return []
    if adaptive.get("stop") == "verdict":
        return _sequential_findings(adaptive, _interleave(meta))
    groups = adaptive.get("groups", [])
    missed = [g for g in groups if not g["met"]]
    out = [
        Finding(
            "info",
            "adaptive",
            f"adaptive repeats: {adaptive.get('rounds')} rounds, target ±{adaptive['target_ci']:.1%}: "
            f"{len(groups) - len(missed)} of {len(groups)} groups met it ({adaptive.get('stop_reason') or 'running'})",
        )
    ]
    for g in missed:
        half = "no interval" if g["half_width"] is None else f"±{g['half_width']:.1%}"
        out.append(
            Finding(
                "warning",
                "adaptive-missed",
                f"{g['variant']} at {g['threads']} threads: target not met ({half} after {g['repeats']} repeats). "
                "Remedy: raise max_repeats or budget, or a longer duration",
            )
        )
    return out


def _sequential_findings(adaptive: dict[str, Any], interleave: str) -> list[Finding]:
    """stop = "verdict": how many comparisons reached a verdict, each one's stop round; `interleave`
    ends the remedy of those that did not (_interleave)."""
    found = adaptive.get("comparisons", [])
    decided = [c for c in found if c["verdict"] != "inconclusive"]
    most = adaptive.get("max_repeats")
    each = "; ".join(
        f"{c['variant']} at {c['threads']} threads {c['verdict']}, stopped at round {c['round']} of at most {most} "
        "on a sequential boundary"
        for c in decided
    )
    out = [
        Finding(
            "info",
            "adaptive",
            f"adaptive repeats until a verdict (group-sequential, {_spending(adaptive)} alpha spending, Holm): "
            f"{adaptive.get('rounds')} rounds, {len(decided)} of {len(found)} comparisons reached a verdict "
            f"({adaptive.get('stop_reason') or 'running'})" + (f": {each}" if each else ""),
        )
    ]
    for c in found:
        if c["verdict"] == "inconclusive":
            out.append(
                Finding(
                    "warning",
                    "adaptive-missed",
                    f"{c['variant']} at {c['threads']} threads: no verdict after {adaptive.get('rounds')} rounds. "
                    "Remedy: raise budget (or max_repeats), or a longer duration" + interleave,
                )
            )
    return out


_SPENDING = {"pocock": "Pocock-type", "obrien-fleming": "O'Brien-Fleming"}


def _spending(adaptive: dict[str, Any]) -> str:
    """How the run spent its alpha over the looks (runs before 2026-11-27 did not say: O'Brien-Fleming)."""
    return _SPENDING.get(str(adaptive.get("spending")), _SPENDING["obrien-fleming"])


def budget_findings(comparisons: list[Any], cells: list[dict[str, Any]], meta: dict[str, Any]) -> list[Finding]:
    """A run of a fixed number of repeats whose QPS comparisons ended inconclusive: the budget that
    would settle them, from the rounds each still needs (verdict.rounds_needed, a projection at
    the observed ratio and noise) at this run's own wall time per round."""
    repeats = (meta.get("experiment") or {}).get("repeats")
    if not isinstance(repeats, int) or isinstance(repeats, bool):
        return []
    open_ = [c for c in comparisons if c.verdict == "inconclusive" and c.metric == "qps" and c.kind == "variant"]
    needed = [c.rounds_needed for c in open_ if c.rounds_needed]
    per_round = _round_seconds(cells, repeats)
    if not needed or per_round is None:
        return []
    worst = max(needed)
    budget = math.ceil((repeats + worst) * per_round / 60) * 60
    names = ", ".join(
        f"{variant_label(c.variant)} at {c.threads} threads (+{c.rounds_needed})" for c in open_ if c.rounds_needed
    )
    return [
        Finding(
            "warning",
            "budget",
            f"inconclusive after {repeats} rounds: {names}. At the observed ratios and noise about {worst} more "
            f"round(s) would settle them; a round took {format_duration(per_round)} here. Remedy: leave repeats out "
            f'(rounds until every comparison has a verdict) with budget = "{format_duration(budget)}"',
        )
    ]


def _round_seconds(cells: list[dict[str, Any]], rounds: int) -> float | None:
    """The run's wall time per round: its first cell's start to its last cell's end, over `rounds`."""
    times = [(str(c["started_at"]), str(c["ended_at"])) for c in cells if c.get("started_at") and c.get("ended_at")]
    if not times or rounds < 1:
        return None
    try:
        start = min(dt.datetime.fromisoformat(a) for a, _ in times)
        end = max(dt.datetime.fromisoformat(b) for _, b in times)
    except ValueError:
        return None
    return max(1.0, (end - start).total_seconds() / rounds)


def _interleave(meta: dict[str, Any]) -> str:
    """The remedy a sequential MariaDB run has beside more time: the interleaved design, which on
    this project's 2-vCPU VM called a 2.2% slowdown in 99% of 10-minute experiments
    (docs/methodology.md#what-it-buys); "" where it is not offered
    (already interleaved, pgbench, or a server it cannot run: spec/design.py)."""
    exp = meta.get("experiment") or {}
    if exp.get("design") == "interleaved" or server_facts(meta)["interleaved_refusal"]:
        return ""
    if (exp.get("workload") or {}).get("tool", "sysbench") != "sysbench":
        return ""
    return (
        '; or design = "interleaved" (no pmp stacks), whose servers run at once and take turns, '
        "so the host's speed (on a VM often most of the noise) falls on every variant alike (`perflab docs experiment`)"
    )


def _host_speed_findings(cells: list[dict[str, Any]], meta: dict[str, Any]) -> list[Finding]:
    """A calibrated host-speed slope that this run's own cells contradict (host_slope.disagreement)."""
    found = host_slope.disagreement(cells, host_speed.calibrated_slope(meta))
    if found is None:
        return []
    own, cal = found["own"], found["calibrated"]
    cal_se = f" ± {cal['se']:.2f}" if isinstance(cal.get("se"), int | float) else ""
    how = "over-adjusts" if found["z"] < 0 else "takes out less of the host's noise than it could"
    return [
        Finding(
            "warning",
            "host-speed",
            f"host speed: this run's own within-round slope is {own['slope']:.2f} ± {own['se']:.2f} "
            f"({own['cells']} cells), the calibrated one its verdicts used {cal['slope']:.2f}{cal_se} "
            f"(perflab calibrate of {str(cal.get('created_at'))[:10]}): {abs(found['z']):.1f} standard errors apart. "
            f"The verdicts stay valid (the slope was fixed before the data), but it {how}, so they resolve less "
            "than they could. Remedy: perflab calibrate again in an hour like this one (this host's noise, and the "
            "slope, change by the hour)",
        )
    ]


def _dataset_findings(cells: list[dict[str, Any]], meta: dict[str, Any]) -> list[Finding]:
    """Variants whose build opens another on-disk format ran on a dataset of their own, prepared
    by that build (run/datasets.py): the same tables and sizes, but other random rows, written
    by another server. Said once per such dataset, naming its variants and who prepared it."""
    datasets = meta.get("datasets") or {}
    shared = next((fmt for fmt, d in datasets.items() if not d.get("own")), None)
    if shared is None and sum(1 for d in datasets.values() if d.get("dir")) < 2:
        return []  # every variant on one dataset (server = "mysql", one format): no data differs
    out = []
    for fmt, record in datasets.items():
        if not record.get("own") or not record.get("dir"):
            continue  # the shared dataset, or one that failed (its cells fail and say why)
        names = set(record.get("builds") or [])
        ran = [c for c in cells if (c.get("build") or {}).get("name") in names]
        labels = sorted({variant_label(c["variant"]) for c in ran})
        by = ((record.get("prepared_by") or {}).get("version") or "?").split(" ")[0]
        init = re.sub(r"/\S*/", "", record.get("init") or "?")  # the tools' names, not their paths
        others = f"the others on the {shared} dataset" if shared else "no other variant on it"
        out.append(
            Finding(
                "info",
                "dataset",
                f"dataset: {'; '.join(labels) or 'no variant'} ran on its own dataset ({fmt}), prepared by "
                f"{by} with {init}; {others}: the same tables and sizes, other random rows, so part of a "
                "difference between them may be the data's",
                tuple(c["id"] for c in ran),
            )
        )
    return out
