"""The Markdown report: GitHub-flavoured, to paste into a bug report or a pull request.

Input: a ReportModel. Output: Markdown text with the same findings as the HTML and terminal
reports (header, verdict tables per thread count, axis effects, findings, failed cells) and,
when `charts_dir` is given, the charts written there as SVG files and linked as images
(relative to `link_base`). Deterministic for the same results (no clock, no absolute path),
so tests compare it with a golden file.

    | jemalloc | 3 | 1,021 | ±0.9% | 0.7% | 1.043 [1.021–1.066] | **faster** | ...
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from perflab.analyze import phase_explain, stats
from perflab.analyze.compare import Comparison
from perflab.analyze.verdict import FASTER, SLOWER
from perflab.report import figures
from perflab.report.model import ReportModel
from perflab.report.phrases import (
    NOISE_HEADER,
    NOISE_TITLE,
    TXN_HEADER,
    TXN_INTRO,
    caution,
    host_differences,
    host_lines,
    method_line,
    noise_note,
    noise_rows,
    subtitle,
    told,
    txn_cells,
    verdict_word,
    why,
)
from perflab.units import format_bytes
from perflab.variants import short_label, variant_label


def cell(text: object) -> str:
    """A table cell: no line breaks, pipes escaped, no HTML."""
    s = str(text).replace("\r", " ").replace("\n", " ").replace("|", "\\|")
    return s.replace("<", "&lt;").replace(">", "&gt;")


def table(header: list[str], rows: Sequence[Sequence[object]], right: set[int] | None = None) -> list[str]:
    right = right or set()
    out = [
        "| " + " | ".join(cell(h) for h in header) + " |",
        "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|",
    ]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else fmt.format(v)


def _ratio(c: Comparison | None) -> str:
    if c is None or c.ratio is None:
        return "-"
    if c.ci_low is None or c.ci_high is None:
        return f"{c.ratio:.3f}"
    return f"{c.ratio:.3f} [{c.ci_low:.3f}–{c.ci_high:.3f}]"


def _verdict(c: Comparison | None) -> str:
    if c is None:
        return "-"
    return f"**{c.verdict}**" if c.verdict in (FASTER, SLOWER) else verdict_word(c)


def _ci(interval: stats.Interval, fmt: str) -> str:
    """The interval as ±relative half-width, like the terminal report (a range reads badly with a negative bound)."""
    return "n<3" if interval.half_width is None else f"±{interval.half_width:.1%}"


def _fence(text: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return ticks


def render(model: ReportModel, charts_dir: Path | None, link_base: str = "") -> str:
    out = [f"# {cell(model.name)}: perflab report", "", cell(subtitle(model)), ""]
    facts = [(k, model.directory.name if k == "results" else v) for k, v in model.facts()]
    out += table(["run", ""], [list(f) for f in facts]) + [""]
    if model.build_facts():
        out += table(["build", "server binary"], [list(f) for f in model.build_facts()]) + [""]
    out += ["<details><summary>Host</summary>", ""] + table(["host", ""], [list(f) for f in model.host_facts()])
    hosts, differ = host_differences(model.meta)  # remote hosts (docs/hosts.md): where they differ, value by value
    remote = host_lines(model.meta, model.cells)
    out += [""] + [f"- {cell(line)}" for line in remote] if remote else []
    out += ([""] + table(["differs", *hosts], [[leaf, *values] for leaf, values in differ])) if differ else []
    spec = str(model.meta.get("spec_text") or "(not stored)")
    out += [
        "",
        "</details>",
        "",
        "<details><summary>Experiment file</summary>",
        "",
        _fence(spec) + "toml",
        spec.rstrip(),
        _fence(spec),
        "",
        "</details>",
        "",
    ]
    out += _verdicts(model)
    out += _status(model)
    out += _txn_types(model)
    out += ["## Findings", ""]
    if model.findings:
        # the text of stalls and failures starts with its kind already ("stall: ...", "failed: ...")
        out += [
            f"- **warning:** {cell(f.text)}" if f.level == "warning" else f"- {cell(f.text)}" for f in model.findings
        ]
    else:
        out.append("Nothing to distrust: every group has an interval, every cell settled, no stalls, no failed cells.")
    out.append("")
    out += _explanations(model)
    failed = model.failed()
    if failed:
        out += ["## Failed cells", ""]
        out += table(
            ["cell", "key", "error"], [[c["id"], c["key"], (c["error"] or "?").strip().splitlines()[0]] for c in failed]
        )
        out.append("")
    out += _profiles(model, charts_dir, link_base)
    out += _charts(model, charts_dir, link_base)
    out.append(
        f"<sub>perflab report of `{cell(model.directory.name)}`; the raw numbers: `perflab export "
        f"{cell(model.directory.name)} --format json`</sub>"
    )
    return "\n".join(out) + "\n"


def _explanations(model: ReportModel) -> list[str]:
    """Stalls and unsettled warm-ups with profiles: the stacks that grew most (analyze/phase_explain.py)."""
    if not model.explanations:
        return []
    out = ["## Stalls and warm-ups: what grew", "", phase_explain.INTRO, ""]
    for e in model.explanations:
        what = "stall" if e.phase == "stall" else "unsettled warm-up"
        out += [f"**cell {e.cell_id} {cell(e.key)}**, {what} {e.span}, {e.source} {e.target} ({e.seconds:.1f} s)", ""]
        if not e.rows:
            out += ["No function grows beyond its noise floor.", ""]
            continue
        rows = [
            [g.function, g.dso or "?", f"{g.window:.3g}", f"{g.phase:.3g}", f"{g.delta:+.3g}", f"±{g.noise:.2g}"]
            for g in e.rows
        ]
        out += table(["function", "dso", "window /s", f"{e.phase} /s", "change", "noise"], rows, right={2, 3, 4, 5})
        out.append("")
    return out


def _status(model: ReportModel) -> list[str]:
    """[observe] status: the server's counters that differ most from the baseline, per transaction."""
    found = model.status_differences()
    if not found:
        return []
    intro = (
        "SHOW GLOBAL STATUS and INNODB_METRICS per transaction over the measured window (mean over settled "
        "repeats), where a variant differs most from the baseline at its thread count."
    )
    out = ["## Server counters", "", intro, ""]
    for group, rows in found:
        out += [f"**{cell(short_label(group.variant))}**, {group.threads} threads", ""]
        table_rows = [
            [
                r["counter"],
                f"{r['baseline']:.4g}",
                f"{r['variant']:.4g}",
                "new" if r["ratio"] is None else f"{r['ratio']:.3g}×",
            ]
            for r in rows
        ]
        out += table(["counter", "baseline /txn", "variant /txn", "ratio"], table_rows, right={1, 2, 3}) + [""]
    return out


def _txn_types(model: ReportModel) -> list[str]:
    """go-tpc: each TPC-C transaction type's rate and latency per variant (analyze/txn_types.py)."""
    found = model.transaction_types()
    if not found:
        return []
    out = ["## TPC-C transaction types", "", TXN_INTRO[0].upper() + TXN_INTRO[1:] + ".", ""]
    rows = [[short_label(g.variant) if i == 0 else "", g.threads if i == 0 else "", *txn_cells(r)]
            for g, types in found for i, r in enumerate(types)]  # fmt: skip
    header = [TXN_HEADER[0], "threads", *TXN_HEADER[1:]]
    return out + table(header, rows, right=set(range(1, len(header))) - {2}) + [""]


def _verdicts(model: ReportModel) -> list[str]:
    base = variant_label(model.baseline, empty="the first variant")
    out = [
        "## Verdicts",
        "",
        (
            f"Each variant against the baseline ({cell(base)}): steady-state mean over settled repeats, "
            "95% intervals (Student t); the ratio within rounds (paired log-ratios) or, with too few rounds "
            "holding both, between repeats (Welch, delta method). For p95, a ratio below 1 is faster."
        ),
        "",
        cell(method_line(model.comparisons)) + ".",
        "",
    ]
    out += [cell(model.rate_line) + ".", ""] if model.rate_line else []
    warning = caution(model.findings)
    if warning:
        out += [f"> **Read the findings before trusting these verdicts:** {cell(warning)}.", ""]
    lm = model.latency_metric  # p99 from the intended start at a fixed rate (analyze/rate.py)
    header = [
        " × ".join(model.axes) or "variant",
        "n",
        f"{model.metric} mean",
        f"{model.metric} 95% CI",
        "CV",
        f"{model.metric} ratio [95% CI]",
        "verdict",
        f"{lm} ms",
        f"{lm} 95% CI",
        f"{lm} ratio [95% CI]",
        f"{lm} verdict",
        f"{model.memory} end",
        "stalls",
    ]
    for t in model.threads:
        rows = []
        for g in (g for g in model.groups if g.threads == t):
            q, p, lci = model.comparison(g, "qps"), model.comparison(g, lm), g.latency_ci(lm)
            n = (
                f"{len(g.qps)}"
                + (f" +{len(g.unsettled)} unsettled" if g.unsettled else "")
                + (f" +{g.failed} failed" if g.failed else "")
                + (f" +{len(g.rate_missed)} missed rate" if g.rate_missed else "")
            )
            label = short_label(g.variant) + (" (baseline)" if g.baseline else "")
            rss = sum(g.memory_end) / len(g.memory_end) if g.memory_end else None
            rows.append(
                [
                    label,
                    n,
                    _num(g.qps_mean, "{:,.0f}"),
                    _ci(g.qps_ci, "{:,.0f}"),
                    _num(g.qps_cv and g.qps_cv * 100, "{:.1f}%"),
                    "baseline" if g.baseline else _ratio(q),
                    "" if g.baseline else _verdict(q),
                    _num(lci.mean, "{:.2f}"),
                    _ci(lci, "{:.2f}"),
                    "baseline" if g.baseline else _ratio(p),
                    "" if g.baseline else _verdict(p),
                    format_bytes(rss) if rss is not None else "-",
                    g.stalls or "",
                ]
            )
        out += [f"### threads = {t}", ""] + table(header, rows, {1, 2, 3, 4, 5, 7, 8, 9, 11, 12}) + [""]
    explained = why(model.comparisons, model.meta)
    if explained:
        out += [
            "### Why",
            "",
            "Per-transaction figures that differ beyond the repeats' noise (95% interval), largest first:",
            "",
        ]
        out += [
            f"- **{cell(short_label(c.variant))}** at {c.threads} threads, {c.verdict}: {cell(line)}"
            for c, line in explained
        ]
        out += [""]
    effects = [c for c in model.comparisons if c.kind == "axis"]
    if effects:
        out += ["### Effect of each axis (the other axes held fixed)", ""]
        folded = len(effects) > 12  # long tables fold, as in the HTML
        if folded:
            out += [f"<details><summary>{len(effects)} comparisons{cell(told(effects))}</summary>", ""]
        out += table(
            ["threads", "metric", "axis", "reference", "variant", "n", "ratio [95% CI]", "verdict"],
            [
                [
                    c.threads,
                    c.metric,
                    c.axis,
                    variant_label(c.baseline),
                    variant_label(c.variant),
                    f"{c.n_baseline}/{c.n_variant}",
                    _ratio(c),
                    _verdict(c),
                ]
                for c in effects
            ],
            {0, 5, 6},
        )
        out += ["", "</details>", ""] if folded else [""]
    if model.noise is not None and not model.noise.empty:
        out += [f"### {NOISE_TITLE}", ""] + table(NOISE_HEADER, noise_rows(model.noise), {1, 2, 3})
        out += ["", cell(noise_note(model.noise)) + ".", ""]
    return out


def _profiles(model: ReportModel, charts_dir: Path | None, link_base: str) -> list[str]:
    """Shown only when report/profiles.py's load() found profiles."""
    prof = model.profiles
    if prof is None:
        return []
    out = ["## Profiles", ""]
    for key, rows in prof.top.items():
        out += [f"### Top functions: {cell(key)}", ""]
        out += table(
            ["function", "self %", "total %", "samples/txn"],
            [[r.function, f"{r.self_pct:.1f}", f"{r.total_pct:.1f}", _num(r.per_txn, "{:.3f}")] for r in rows],
            {1, 2, 3},
        ) + [""]
    if prof.pair:
        out += [f"### Differential: {cell(prof.pair[1])} vs {cell(prof.pair[0])}", ""]
        out += table(
            ["function", f"{prof.pair[0]} /txn", f"{prof.pair[1]} /txn", "delta /txn"],
            [[r.function, f"{r.base_per_txn:.3f}", f"{r.other_per_txn:.3f}", f"{r.delta:+.3f}"] for r in prof.diff],
            {1, 2, 3},
        ) + [""]
    if charts_dir is not None:
        charts_dir.mkdir(parents=True, exist_ok=True)
        for i, fg in enumerate(prof.flames):
            name = f"flame-{i}-{figures.slug(fg.title)}.svg"
            (charts_dir / name).write_text(fg.svg, encoding="utf-8")
            kind = "Differential flame graph" if fg.differential else "Flame graph"
            out += [
                f"[{kind}: {cell(fg.title)}]({link_base + '/' if link_base else ''}{name}) "
                "(open it: it is interactive)",
                "",
            ]
    return out


def _charts(model: ReportModel, charts_dir: Path | None, link_base: str) -> list[str]:
    if charts_dir is None:
        return [
            (
                "_Charts: write the report to a file (`perflab report DIR --format markdown -o report.md`) to get them "
                "as SVG files beside it._"
            ),
            "",
        ]
    charts_dir.mkdir(parents=True, exist_ok=True)
    figs = figures.build(model)
    for f in figs:
        (charts_dir / f"{f.id}.svg").write_text(f.svg + "\n", encoding="utf-8")
    link = lambda f: f"![{cell(f.title)}]({link_base + '/' if link_base else ''}{f.id}.svg)"
    out = ["## Charts", "", "One colour per variant in every chart; error bars are 95% CIs over repeats.", ""]
    out += [link(f) for f in figs if f.section == "summary"] + [""]
    out += [
        "## Per-second series",
        "",
        "Repeats overlaid (solid, dashed, dotted); grey: warm-up (not measured); red: stalls.",
        "",
    ]
    for t in model.threads:
        out += [f"<details><summary>threads = {t}</summary>", ""]
        out += [link(f) for f in figs if f.section == "series" and f.threads == t]
        out += ["", "</details>", ""]
    return out
