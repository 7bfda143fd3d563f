"""Phrases the reports share, so they say the same thing the same way: the subtitle, the
caution line over the verdicts, the titles of the finding kinds, the count of verdicts, how
the verdicts were reached (Holm, margin, paired or Welch), the measured "why" of each verdict.

    subtitle(model) -> "sysbench oltp_read_only on mariadbd 10.11.6: 3 variants × 2 thread counts; ..."
"""

from __future__ import annotations

import tomllib
from typing import Any

from perflab.analyze import evidence, txn_types
from perflab.analyze.ratio import MIN_PAIRS
from perflab.analyze.verdict import EQUIVALENT, FASTER, INCONCLUSIVE, SLOWER, VERDICTS
from perflab.report.model import ReportModel, plural
from perflab.variants import variant_key
from perflab.store.results import server_facts


def why(comparisons: list[Any], meta: dict[str, Any] | None = None) -> list[tuple[Any, str]]:
    """(comparison, one line) for every QPS verdict of a variant that says faster or slower: its
    measured evidence beyond noise (analyze/evidence.py), or, when there is none, that nothing
    measured differs and what would show where the time went (`meta`: the run's, for its observers)."""
    return [
        (c, evidence.explain(c.evidence) if c.evidence else no_evidence(c, profilers(meta)))
        for c in comparisons
        if c.metric == "qps" and c.kind == "variant" and c.verdict in (FASTER, SLOWER)
    ]


def no_evidence(c: Any, profiled: list[str]) -> str:
    """The Why of a verdict no per-transaction figure explains: say so, and name the observer that
    would show where the time went, or, when it was on, the command that shows it."""
    if min(c.n_baseline, c.n_variant) < 2:
        return (
            f"too few settled repeats ({c.n_baseline} and {c.n_variant}) to tell which per-transaction "
            "figures differ; more rounds would"
        )
    figures = ", ".join(["server CPU, faults, context switches", *(EXTRA[p] for p in profiled if p in EXTRA)])
    said = f"no per-transaction figure measured ({figures}) differs from the baseline's beyond the repeats' noise"
    if {"perf", "pmp"} & set(profiled):
        base, variant = (f"{variant_key(v)}/t{c.threads}" for v in (c.baseline, c.variant))
        return f"{said}; where the time went: perflab diff DIR {base} {variant}"
    return f"{said}; [observe] perf (on-CPU profiles, then perflab diff) would show where the time went"


EXTRA = {"status": "the server's counters", "alloc": "allocations"}  # what an observer adds to the evidence


def profilers(meta: dict[str, Any] | None) -> list[str]:
    """The [observe] entries the run's experiment file turned on (its stored text; [] without it)."""
    text = (meta or {}).get("spec_text")
    if not text:
        return []
    try:
        observe = tomllib.loads(text).get("observe") or {}
    except tomllib.TOMLDecodeError:
        return []
    return [name for name, value in observe.items() if value not in (False, None)]


def told(comparisons: list[Any]) -> str:
    counts = {v: sum(1 for c in comparisons if c.verdict == v) for v in (FASTER, SLOWER, EQUIVALENT)}
    told = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    return f"; {told}" if told else "; none faster, slower or equivalent"


def verdict_word(c: Any) -> str:
    """The verdict as the tables print it: an inconclusive one with the rounds it still needs."""
    if c.verdict != INCONCLUSIVE:
        return str(c.verdict)
    if c.rounds_needed is None:
        return "inconclusive"
    return f"inconclusive (+{plural(c.rounds_needed, 'round')})"


def method_line(comparisons: list[Any]) -> str:
    """How the verdicts were reached, in one line (every report prints it over its verdicts):
    'Verdicts at 95% confidence, Holm-corrected within each family of comparisons (3 variant
    comparisons of qps, 3 variant comparisons of p95); equivalent: ...'."""
    if not comparisons:
        return ""
    first = comparisons[0]
    level = first.estimate.level if first.estimate is not None else 0.95
    families = {
        (c.metric, c.kind + (" across-hosts" if getattr(c, "across_hosts", False) else "")): c.family
        for c in comparisons
    }
    sizes = ", ".join(f"{plural(m, kind + ' comparison')} of {metric}" for (metric, kind), m in families.items() if m)
    paired = sum(1 for c in comparisons if c.method == "paired")
    return (
        f"Verdicts at {level * 100:.4g}% confidence, Holm-corrected within each family of comparisons "
        f"({sizes or 'none has an interval'}); equivalent: the interval inside ±{first.margin * 100:.3g}%; "
        f"ratios within rounds (paired, where {MIN_PAIRS} rounds hold both sides) for {paired} of "
        f"{len(comparisons)}, else Welch{host_speed_clause(comparisons)}"
    )


def host_speed_clause(comparisons: list[Any]) -> str:
    """'; adjusted for the host's speed (host speed: slope 0.70 over 40 cells (r = 0.88)) for 2
    of 2 (docs/methodology.md#host-speed)', why not for the others; '' without a canary."""
    noted = [c for c in comparisons if getattr(c, "adjustment", None)]
    if not noted:
        return ""
    adjusted = [c for c in noted if c.adjusted]
    why_not = sorted({c.adjustment for c in noted if not c.adjusted})
    out = f"; adjusted for the host's speed for {len(adjusted)} of {len(comparisons)}"
    fits = sorted({c.adjustment for c in adjusted})
    if fits:
        out += f" ({'; '.join(fits)})"
    if why_not:
        out += f"; {'; '.join(why_not)}"
    return out + " (`perflab docs methodology#host-speed`)"


KIND_TITLES = {
    "noise": "noisy groups",
    "repeats": "too few repeats for an interval",
    "unsettled": "unsettled cells (left out)",
    "stall": "stalls",
    "short": "series too short to check",
    "busy": "busy machine",
    "steal": "host steal time",
    "adaptive": "adaptive repeats",
    "adaptive-missed": "adaptive targets not met",
    "budget": "inconclusive at a fixed number of repeats",
    "dataset": "datasets of their own",
    "failed": "failed cells",
}


def caution(found: list[Any]) -> str:
    """What undermines the verdicts, in a few words ('' when nothing does)."""
    undermining = ("noise", "repeats", "unsettled", "busy", "failed", "adaptive-missed")
    kinds = by_kind([f for f in found if f.kind in undermining or (f.kind == "steal" and f.level == "warning")])
    return "; ".join(f"{KIND_TITLES[k]} ({len(v)})" for k, v in kinds)


def by_kind(found: list[Any]) -> list[tuple[str, list[Any]]]:
    """Findings grouped by kind, failures first, each kind in the terminal report's order."""
    kinds: dict[str, list[Any]] = {}
    for f in found:
        kinds.setdefault(f.kind, []).append(f)
    return sorted(kinds.items(), key=lambda kv: kv[0] != "failed")


def subtitle(model: ReportModel) -> str:
    """One line: what was measured and the headline verdicts."""
    wl = model.experiment.get("workload") or {}
    verdicts = [c for c in model.comparisons if c.kind == "variant" and c.metric == "qps"]
    counts = {v: sum(1 for c in verdicts if c.verdict == v) for v in VERDICTS}
    told = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    server = server_facts(model.meta)["short_version"]
    return (
        f"{wl.get('tool', 'sysbench')} {wl.get('test', '?')} on {server}: "
        f"{plural(len(model.variants), 'variant')} × {plural(len(model.threads), 'thread count')}"
        + (f"; QPS verdicts against the baseline: {told}" if told else "")
    )


NOISE_TITLE = "Where the noise comes from"
NOISE_HEADER = ["component", "sd of log QPS", "share, paired ratio", "share, unpaired ratio"]
_NOISE_LABELS = {
    "window": "second-to-second, in the window",
    "restarts": "between restarts",
    "drift": "drift across rounds",
}


def noise_rows(dec: Any) -> list[list[str]]:
    """The variance decomposition (analyze/variance.py) as table rows, one per component."""

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.1%}"

    return [[_NOISE_LABELS[c.name], pct(c.sd), pct(c.fraction), pct(c.fraction_unpaired)] for c in dec.components]


def noise_note(dec: Any) -> str:
    """The advice, and what the figures are."""
    window = f" of {dec.window_s:.0f} s" if dec.window_s else ""
    counted = f"{plural(dec.rounds, 'complete round')}, the window's noise from {plural(dec.cells, 'window')}{window}"
    return (
        f"{dec.advice[:1].upper()}{dec.advice[1:]}. From {counted}: "
        "a paired ratio's variance is 2 x (window + restarts), drift cancels in it; "
        f"{dec.method} (`perflab docs methodology#variance-components`)"
    )


def host_lines(meta: dict[str, Any], cells: list[dict[str, Any]]) -> list[str]:
    """One line per remote host of the run (meta `hosts`, docs/hosts.md): what ran there (the server,
    the client), the client's round trip and bytes per transaction, and where the host's fingerprint
    differs from this machine's."""
    recorded = meta.get("hosts") or {}
    differ = recorded.get("differences") or {}
    lines = []
    for name, host in (recorded.get("hosts") or {}).items():
        clients = [c.get("client") or {} for c in cells if (c.get("client") or {}).get("host") == name]
        served = any(_server_host(c).get("name") == name for c in cells)
        per_txn = [c["bytes_per_txn"] for c in clients if c.get("bytes_per_txn") is not None]
        rtt = ((host.get("clock") or {}).get("start") or {}).get("rtt_s")
        role = " and ".join(r for r, ran in (("server", served), ("client", bool(clients))) if ran) or "host"
        line = f"{role} on host {name} ({host.get('ssh')})"
        line += f": {rtt * 1000:.2f} ms round trip" if rtt is not None else ""
        line += f", {sum(per_txn) / len(per_txn):,.0f} bytes per transaction" if per_txn else ""
        fields = [f for f, values in differ.items() if name in values]
        line += (
            f"; differs from this machine in {', '.join(fields)}" if fields else "; same fingerprint as this machine"
        )
        line += _own_cpu(name, host, cells) + _unaligned(name, host, cells)  # last: a wrapped line keeps the rest whole
        lines.append(line + (f"; dropped off: {host['lost']}" if host.get("lost") else ""))
    return lines + _schedule_lines(meta) + _changed_lines(cells)


def _schedule_lines(meta: dict[str, Any]) -> list[str]:
    """How a host axis's hosts ran (meta `host_schedule`, docs/hosts.md): at once, or one at a time and why."""
    schedule = meta.get("host_schedule")
    if not schedule:
        return []
    hosts = ", ".join(schedule.get("lanes") or {})
    if schedule.get("concurrent"):
        return [f"hosts {hosts} ran each round at once: {schedule.get('why')}"]
    return [f"hosts {hosts} ran one at a time: {schedule.get('why')}"]


def _own_cpu(name: str, host: dict[str, Any], cells: list[dict[str, Any]]) -> str:
    """perflab's own CPU on host `name` over the windows (resources.perflab_host_cpu), the most of a cell,
    and over the whole run (meta `hosts.NAME.perflab_cpu`)."""
    own = [((c.get("resources") or {}).get("perflab_host_cpu") or {}).get(name) or {} for c in cells]
    cores = [o["cores"] for o in own if o.get("cores") is not None]
    text = f"; perflab's own CPU there {100 * max(cores):.1f}% of a core at most in a window" if cores else ""
    run = host.get("perflab_cpu") or {}
    if run.get("cores") is not None:
        text += ", " if text else "; perflab's own CPU there "
        text += f"{100 * run['cores']:.2f}% over the run ({run['cpu_s']:.2f} s in {run['wall_s']:.0f} s)"
    return text


def _unaligned(name: str, host: dict[str, Any], cells: list[dict[str, Any]]) -> str:
    """Where the host's clock could not be aligned (over 50 ms): the run's readings, or cells' windows."""
    clocks = [_server_host(c).get("clock") or {} for c in cells if _server_host(c).get("name") == name]
    refused = sum(1 for clock in clocks if clock.get("aligned") is False)
    text = f"; its clock not aligned in {plural(refused, 'cell')} (over 50 ms)" if refused else ""
    run = (host.get("clock") or {}).get("refused")
    return text + (f"; its clock not aligned over the run: {run}" if run else "")


def _server_host(cell: dict[str, Any]) -> dict[str, Any]:
    """Where a cell's server ran (`build.host`; empty: this machine)."""
    return (cell.get("build") or {}).get("host") or {}


def _flat(value: Any, prefix: str) -> dict[str, str]:
    """A fingerprint field as leaf -> text: {"packages.sysbench": "1.0.20+ds-5"}; a plain value as itself."""
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in _flat(sub, f"{prefix}.{key}").items()}
    return {prefix: "absent" if value is None else str(value)}


def host_differences(meta: dict[str, Any]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Where the run's hosts differ (meta `hosts.differences`), leaf by leaf: the hosts (this machine
    first, as "local") and one row per differing leaf with each host's value."""
    differ = (meta.get("hosts") or {}).get("differences") or {}
    hosts = sorted({h for values in differ.values() for h in values}, key=lambda h: (h != "local", h))
    rows = []
    for field, values in differ.items():
        flat = {h: _flat(values.get(h), field) for h in hosts}
        for leaf in sorted({k for f in flat.values() for k in f}):
            cells = [flat[h].get(leaf, "absent") for h in hosts]
            if len(set(cells)) > 1:
                rows.append((leaf, cells))
    return hosts, rows


def _changed_lines(cells: list[dict[str, Any]]) -> list[str]:
    """A server host whose fingerprint changed between cells (a governor or THP set mid-run): which fields."""
    prints: dict[str, list[dict[str, Any]]] = {}
    for cell in cells:
        host = _server_host(cell)
        if host.get("fingerprint"):
            prints.setdefault(host["name"], []).append(_flat(host["fingerprint"], ""))
    lines = []
    for name, seen in prints.items():
        changed = sorted({k.lstrip(".") for p in seen for k, v in p.items() if any(q.get(k) != v for q in seen)})
        if changed:
            lines.append(f"server host {name}'s fingerprint changed between cells in {', '.join(changed)}")
    return lines


# go-tpc's TPC-C transaction types (analyze/txn_types.py), in every report
TXN_INTRO = "each type over the measured window, the mean over settled repeats; the verdicts compare NOPM"
TXN_HEADER = ("variant", "type", "per min", "avg ms", "p50 ms", "p95 ms", "p99 ms", "max ms", "errors")


def txn_cells(row: txn_types.TypeRow) -> list[str]:
    """A type's cells after its group's (variant, threads)."""
    ms = [_figure(v, "{:.2f}") for v in (row.avg_ms, row.p50_ms, row.p95_ms, row.p99_ms, row.max_ms)]
    return [row.name, _figure(row.per_minute, "{:,.1f}"), *ms, _figure(row.errors, "{:,.0f}")]


def _figure(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)
