"""Terminal report: one table per thread count, variants as rows, then what to distrust.

Over the tables: how the verdicts were reached (Holm, margin, paired or Welch). Columns:
steady-state QPS mean with its 95% CI over repeats, CV across repeats, ratio to the baseline
with its CI and the verdict (faster, slower, equivalent, inconclusive with the rounds that
would resolve it), p95 latency, memory at the end of the window (RSS; PostgreSQL: PSS over its processes), minor
faults and server CPU per transaction (the usual explanation of an allocator difference),
stalls. Below: the marginal effect of each axis (matrices of two or more axes), then
warnings, each with a remedy: noisy groups, unsettled cells, stalls, missing intervals,
adaptive targets not met, failed cells.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from perflab.analyze import compare, phase_explain, stats, status_diff, txn_types
from perflab.analyze.compare import Comparison
from perflab.analyze.rate import fixed_rate, primary_metric, rate_line
from perflab.analyze.summary import Group, groups, mean
from perflab.analyze.variance import Decomposition
from perflab.analyze.verdict import EQUIVALENT, FASTER, INCONCLUSIVE, SLOWER
from perflab.report import findings, fit, io_findings
from perflab.report.model import build_facts, design_phrase
from perflab.report.phrases import (
    NOISE_HEADER,
    NOISE_TITLE,
    TXN_HEADER,
    TXN_INTRO,
    host_differences,
    host_lines,
    method_line,
    noise_note,
    noise_rows,
    txn_cells,
    verdict_word,
    why,
)
from perflab.units import format_bytes, format_duration
from perflab.variants import short_label, variant_key, variant_label
from perflab.store.results import server_facts

FINDING_STYLE = {"stall": "magenta", "failed": "red"}
VERDICT_STYLE = {FASTER: "green", SLOWER: "red", EQUIVALENT: "cyan", INCONCLUSIVE: "yellow"}


def _num(value: float | None, fmt: str = "{:,.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _pm(interval: stats.Interval) -> str:
    """± half-width of a CI, relative to the mean."""
    half = interval.half_width
    return "n<3" if half is None else f"±{half:.1%}"


def verdict_text(c: Comparison) -> str:
    return f"[{VERDICT_STYLE[c.verdict]}]{escape(verdict_word(c))}[/]"


def ratio_text(c: Comparison) -> str:
    if c.ratio is None:
        return "-"
    if c.ci_low is None or c.ci_high is None:
        return f"{c.ratio:.3f}"
    return f"{c.ratio:.3f} [{c.ci_low:.3f}-{c.ci_high:.3f}]"


def render(
    console: Console,
    meta: dict[str, Any],
    cells: list[dict[str, Any]],
    baseline: list[str] | None = None,
    noise: Decomposition | None = None,
    explanations: list[phase_explain.Explanation] | None = None,
) -> None:
    """The tables, the server's counters ([observe] status), why, warnings, and what grew in
    stalls and unsettled warm-ups (`explanations`: analyze/phase_explain.py)."""
    exp = meta.get("experiment", {})
    host = meta.get("host", {})
    warmup = exp.get("warmup", 0)
    warm = (
        f"auto warm-up (window after {format_duration(exp.get('max_warmup', 10))})"
        if warmup == "auto"
        else f"{format_duration(warmup)} warm-up"
    )
    console.print(
        f"[bold]{escape(str(exp.get('name', '?')))}[/]  {exp.get('workload', {}).get('test', '')}  "
        f"{len(cells)} cells  measured {format_duration(exp.get('duration', 0))} after {warm}  pin={exp.get('pin')}"
        f"{escape(design_phrase(exp))}"
        + (f"  storage={escape(io_findings.storage_phrase(meta))}" if io_findings.storage_phrase(meta) else "")
    )
    facts = server_facts(meta)  # MySQL: no installed server, its builds below
    console.print(
        f"[dim]{host.get(facts['host_field']) or facts['short_version']} | {host.get(exp.get('workload', {}).get('tool', 'sysbench'))} | "
        f"{host.get('cpu_model')} x{host.get('cores')}[/]"
    )
    for name, fact in build_facts(meta, cells):
        console.print(f"[dim]build {escape(name)}: {escape(fact)}[/]", highlight=False)
    for line in host_lines(meta, cells):  # remote hosts (docs/hosts.md)
        console.print(f"[dim]{escape(line)}[/]", highlight=False)
    hosts, differ = host_differences(meta)  # where they differ, value by value
    for leaf, values in differ:
        console.print(f"[dim]  {escape(leaf)}: {escape(', '.join(f'{h} {v}' for h, v in zip(hosts, values)))}[/]")
    axes = exp.get("axes") or {}
    base = compare.baseline_variant(axes, baseline or [])
    memory, fixed = server_facts(meta)["memory_figure"], fixed_rate(meta)
    all_groups = groups(cells, base if axes else None, axes, memory=memory, fixed_rate=fixed)
    metric = primary_metric(meta)  # at a fixed rate: p99 from the intended start (analyze/rate.py)
    comparisons = compare.verdicts(meta, cells, baseline, (metric,)).comparisons
    if comparisons:
        console.print(f"[dim]{escape(method_line(comparisons))}[/]", highlight=False)
    for threads in sorted({g.threads for g in all_groups}):
        rows = [g for g in all_groups if g.threads == threads]
        chosen = [c for c in comparisons if c.threads == threads and c.kind == "variant"]
        _table(console, threads, rows, chosen, (meta.get("throughput") or {}).get("metric", "QPS"), metric)
    if metric != "qps":
        console.print(f"[dim]{escape(rate_line(meta, cells))}[/]", highlight=False)
    effects = [c for c in comparisons if c.kind == "axis"]
    if effects:
        print_comparisons(console, "Effect of each axis (the other axes held fixed)", effects)
    _status(console, all_groups)
    _txn_types(console, all_groups)
    if noise is not None and not noise.empty:
        noise_table(console, noise)
    _why(console, comparisons, meta)
    _warnings(console, all_groups, cells, meta, comparisons)
    _explanations(console, explanations or [])


def _status(console: Console, all_groups: list[Group]) -> None:
    """[observe] status: the counters that differ most from the baseline, per transaction (as the
    Markdown and HTML reports' Server counters)."""
    for group, rows in status_diff.by_group(all_groups):
        table = Table(
            title=f"Server counters: {short_label(group.variant)} at {group.threads} threads vs the baseline, "
            "per transaction (SHOW GLOBAL STATUS, INNODB_METRICS; mean over settled repeats)",
            title_justify="left",
            show_edge=False,
        )
        for name in ("counter", "baseline /txn", "variant /txn", "ratio"):
            table.add_column(name, justify="left" if name == "counter" else "right")
        for r in rows:
            ratio = "new" if r["ratio"] is None else f"{r['ratio']:.3g}x"
            table.add_row(escape(r["counter"]), f"{r['baseline']:.4g}", f"{r['variant']:.4g}", ratio)
        console.print(table)


def _txn_types(console: Console, all_groups: list[Group]) -> None:
    """go-tpc: each TPC-C transaction type's rate and latency per variant (analyze/txn_types.py)."""
    found = txn_types.by_group(all_groups)
    for threads in sorted({g.threads for g, _ in found}):
        table = Table(title=f"TPC-C transaction types, threads = {threads} ({TXN_INTRO})",
                      title_justify="left", show_edge=False)  # fmt: skip
        for name in TXN_HEADER:
            table.add_column(name, justify="left" if name in ("variant", "type") else "right")
        for group, rows in ((g, r) for g, r in found if g.threads == threads):
            for i, row in enumerate(rows):
                label = escape(short_label(group.variant)) if i == 0 else ""
                table.add_row(label, *txn_cells(row))
        console.print(table)


def _explanations(console: Console, explanations: list[phase_explain.Explanation]) -> None:
    if explanations:
        console.print(f"\n[bold]What grew[/] ({escape(phase_explain.INTRO)}):", highlight=False)
    for e in explanations:
        console.print(f"  {escape(phase_explain.sentence(e))}", highlight=False)


def noise_table(console: Console, noise: Decomposition) -> None:
    """Where the noise comes from (analyze/variance.py): one row per component, and the advice."""
    table = Table(title=NOISE_TITLE, title_justify="left")
    for i, name in enumerate(NOISE_HEADER):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in noise_rows(noise):
        table.add_row(*row)
    console.print(table)
    console.print(f"[dim]{escape(noise_note(noise))}[/]", highlight=False)


def _why(console: Console, comparisons: list[Comparison], meta: dict[str, Any]) -> None:
    """Beside each faster/slower verdict, what was measured to differ beyond noise, or that nothing did."""
    lines = why(comparisons, meta)
    if lines:
        console.print("\n[bold]Why[/] (per-transaction figures that differ beyond the repeats' noise):")
    for c, line in lines:
        console.print(f"  {escape(short_label(c.variant))} at {c.threads} threads, {c.verdict}: {escape(line)}")


def _table(
    console: Console,
    threads: int,
    rows: list[Group],
    comparisons: list[Comparison],
    metric: str = "QPS",
    verdicts_on: str = "qps",
) -> None:
    """A thread count's table, fitted to the console (report/fit.py): the lesser columns go first.
    `verdicts_on`: the comparisons' metric (p99 at a fixed rate: its column beside the ratio)."""
    memory = f"{rows[0].memory if rows else 'RSS'} end"
    columns = _columns(rows, comparisons, metric, memory)
    if verdicts_on == "p99":
        at = next(i for i, c in enumerate(columns) if c[0] == "ratio [95% CI]")
        columns.insert(at, ("p99 ms", "right", False, [_num(mean(g.p99_ms), "{:.2f}") for g in rows]))
        columns[at + 1] = ("p99 ratio [95% CI]", *columns[at + 1][1:])
    lesser = ["CPU µs/txn", "minflt/txn", memory, "p95 ms", "CV", "stalls", "95% CI", "n"]
    if not any(g.stalls for g in rows):
        lesser.insert(0, lesser.pop(lesser.index("stalls")))  # an empty column goes first

    def build(dropped: set[str]) -> Table:
        table = Table(title=f"threads = {threads}", title_justify="left", header_style="bold")
        kept = [c for c in columns if c[0] not in dropped]
        for name, justify, wraps, _ in kept:
            table.add_column(name, justify=justify, no_wrap=not wraps)  # type: ignore[arg-type]
        for i in range(len(rows)):
            table.add_row(*(values[i] for _, _, _, values in kept))
        return table

    _print_fitted(console, build, lesser)


def _print_fitted(console: Console, build: Any, lesser: list[str]) -> None:
    table, dropped = fit.fitted(console, build, lesser)
    console.print(table)
    if dropped:
        console.print(f"[dim]{escape(fit.note(dropped, console.width))}[/]", highlight=False)


Column = tuple[str, str, bool, list[str]]  # name, justify, may wrap (at spaces), one value per row


def _columns(rows: list[Group], comparisons: list[Comparison], metric: str, memory: str) -> list[Column]:
    """The table's columns: numbers never wrap; labels, ratios over their interval and an
    inconclusive verdict over its rounds may."""
    by_variant = {variant_key(c.variant): c for c in comparisons}
    found = [by_variant.get(g.key) for g in rows]
    n = [
        f"{len(g.qps)}"
        + (f" [yellow]+{len(g.unsettled)} unsettled[/]" if g.unsettled else "")
        + (f" [red]+{len(g.rate_missed)} missed rate[/]" if g.rate_missed else "")
        + (f" [red]+{g.failed} failed[/]" if g.failed else "")
        for g in rows
    ]
    ratios = ["baseline" if g.baseline else (ratio_text(c) if c else "-") for g, c in zip(rows, found, strict=True)]
    verdicts = ["" if g.baseline or c is None else verdict_text(c) for g, c in zip(rows, found, strict=True)]
    axes = " × ".join(rows[0].variant) if rows and rows[0].variant else "variant"
    return [
        (axes, "left", True, [escape(short_label(g.variant)) for g in rows]),
        ("n", "right", True, n),
        (f"{metric} mean", "right", False, [_num(g.qps_mean) for g in rows]),
        ("95% CI", "right", False, [_pm(g.qps_ci) for g in rows]),
        ("CV", "right", False, [_num(g.qps_cv and g.qps_cv * 100, "{:.1f}%") for g in rows]),
        ("ratio [95% CI]", "right", True, ratios),
        ("verdict", "left", True, verdicts),
        ("p95 ms", "right", False, [_num(mean(g.p95_ms), "{:.2f}") for g in rows]),
        (memory, "right", True, [format_bytes(mean(g.memory_end)) if g.memory_end else "-" for g in rows]),
        ("minflt/txn", "right", False, [_num(mean(g.faults_per_txn), "{:.2f}") for g in rows]),
        ("CPU µs/txn", "right", False, [_num(mean(g.cpu_us_per_txn), "{:.0f}") for g in rows]),
        ("stalls", "right", False, [str(g.stalls) if g.stalls else "" for g in rows]),
    ]


def print_comparisons(console: Console, title: str, comparisons: list[Comparison], runs: bool = False) -> None:
    """`perflab compare`'s table and each axis's effect, fitted to the console (report/fit.py): the
    method and counts go first, then what the title or the variant says again."""
    lesser = ["method", "n", "metric" if runs else "axis", "baseline"]
    _print_fitted(console, lambda dropped: comparison_table(title, comparisons, runs, dropped), lesser)


def comparison_table(
    title: str, comparisons: list[Comparison], runs: bool = False, dropped: set[str] | frozenset[str] = frozenset()
) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    names = ["threads", "axis" if not runs else "variant", "baseline", "variant" if not runs else "metric"]
    names += ["n", "ratio", "95% CI", "method", "verdict"]
    kept = [i for i, name in enumerate(names) if name not in dropped]
    for i in kept:
        name = names[i]
        numeric = name in ("threads", "n", "ratio", "95% CI")
        table.add_column(name, justify="right" if numeric else "left", no_wrap=numeric)
    for c in comparisons:
        label = lambda v: escape(variant_label(v))
        ci = "-" if c.ci_low is None or c.ci_high is None else f"{c.ci_low:.3f}-{c.ci_high:.3f}"
        first = c.axis or "all" if not runs else label(c.variant)
        base = label(c.baseline) if not runs else "A"
        other = label(c.variant) if not runs else c.metric
        row = (
            str(c.threads),
            first,
            base,
            other,
            f"{c.n_baseline}/{c.n_variant}",
            _num(c.ratio, "{:.3f}"),
            ci,
            c.method + (" adj." if c.adjusted else ""),
            verdict_text(c),
        )
        table.add_row(*(row[i] for i in kept))
    return table


def _warnings(
    console: Console,
    all_groups: list[Group],
    cells: list[dict[str, Any]],
    meta: dict[str, Any],
    comparisons: list[Any] | None = None,
) -> None:
    for f in findings.collect(all_groups, cells, meta, comparisons):
        if f.level == "warning":
            console.print(f"[yellow]warning:[/] {escape(f.text)}", highlight=False)
        else:
            console.print(escape(f.text), style=FINDING_STYLE.get(f.level))
