"""The HTML report: one self-contained file (inline CSS and SVG, no script, no request of any
kind), readable offline and on a laptop screen.

Input: a ReportModel (report/model.py). Output: the HTML text, from the Jinja2 template
`assets/report.html.j2` with autoescaping (variant labels, errors and the spec are user
text). Sections: header (experiment, host, matrix, when, how long, failed cells), verdicts
per thread count, findings, charts, per-second series, profiles (only when the results have
them: see report/profiles.py), all cells.

    perflab report results/alloc --html -o report.html
"""

from __future__ import annotations

import statistics
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup, escape

from perflab import __version__
from perflab.analyze import phase_explain, stats
from perflab.analyze.verdict import VERDICTS
from perflab.report import figures, findings
from perflab.report.model import ReportModel
from perflab.report.phrases import (
    KIND_TITLES,
    NOISE_HEADER,
    NOISE_TITLE,
    TXN_HEADER,
    TXN_INTRO,
    by_kind,
    caution,
    host_differences,
    host_lines,
    method_line,
    noise_note,
    noise_rows,
    plural,
    subtitle,
    told,
    txn_cells,
    why,
)
from perflab.units import format_bytes, utc_now
from perflab.variants import short_label, variant_key, variant_label

VERDICT_CLASS = {v: f"verdict-{v}" for v in VERDICTS}


def _asset(name: str) -> str:
    return resources.files("perflab.report").joinpath("assets", name).read_text(encoding="utf-8")


def _num(value: float | None, fmt: str = "{:,.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _ci(interval: stats.Interval, fmt: str) -> str:
    if interval.low is None or interval.high is None:
        return "n<3"
    return f"{fmt.format(interval.low)}–{fmt.format(interval.high)}"


def _rci(c: Any) -> str:
    if c is None or c.ci_low is None or c.ci_high is None:
        return ""
    return f"[{c.ci_low:.3f}–{c.ci_high:.3f}]"


def _verdict(c: Any) -> Markup:
    if c is None:
        return Markup("-")
    notes = [f"{c.method}: {c.method_reason}", c.adjustment, c.reason]
    title = escape("; ".join(n for n in notes if n))
    word = Markup(f'<span class="{VERDICT_CLASS[c.verdict]}" title="{title}">{c.verdict}</span>')
    if c.rounds_needed is None:
        return word
    return word + Markup(f' <span class="muted rounds">+{escape(plural(c.rounds_needed, "round"))}</span>')


def _bytes(value: Any) -> str:
    if isinstance(value, list):
        value = statistics.fmean(value) if value else None
    return "-" if value is None else format_bytes(value)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(
        num=_num,
        ci=_ci,
        rci=_rci,
        verdict=_verdict,
        bytes=_bytes,
        pct=lambda v: "-" if v is None else f"{v:.1%}",
        pm=lambda i: "n<3" if i.half_width is None else f"±{i.half_width:.1%}",
        vlabel=variant_label,
        vkey=variant_key,
        vshort=short_label,
    )
    return env


# the hover text of the memory columns
MEMORY_TITLES = {
    "RSS": "the server's resident memory (RSS) at the end of the measured window",
    "PSS": "PSS summed over the postmaster and every backend at the end of the measured window "
    "(an RSS sum would count shared_buffers once per backend)",
}


def render(model: ReportModel) -> str:
    figs = figures.build(model)
    series: dict[int, list[tuple[str, list[figures.Figure]]]] = {t: [] for t in model.threads}
    for f in figs:
        if f.section == "series" and f.threads is not None:
            pairs = series[f.threads]
            if not pairs or pairs[-1][0] != f.variant:
                pairs.append((str(f.variant), []))
            pairs[-1][1].append(f)
    exp = model.experiment
    effects = [c for c in model.comparisons if c.kind == "axis"]
    longest = max((len(v) for v in model.intervals.values()), default=0)
    template = _environment().from_string(_asset("report.html.j2"))
    return template.render(
        m=model,
        css=_asset("report.css"),
        version=__version__,
        generated=utc_now(),
        subtitle=subtitle(model),
        remote_hosts=host_lines(model.meta, model.cells),  # remote hosts (docs/hosts.md)
        host_differences=host_differences(model.meta),
        axes_title=" × ".join(model.axes) or "variant",
        baseline_label=variant_label(model.baseline, empty="the first variant"),
        failed=model.failed(),
        effects=effects,
        effects_told=told(effects),
        cv_warning=f"{exp.get('cv_warning', 0.03):.0%}",
        summary_figs=[f for f in figs if f.section == "summary"],
        caution=caution(model.findings),
        why=why(model.comparisons, model.meta),
        method_line=method_line(model.comparisons),
        noise_title=NOISE_TITLE,
        noise_header=NOISE_HEADER,
        noise_rows=noise_rows(model.noise) if model.noise and not model.noise.empty else [],
        noise_note=noise_note(model.noise) if model.noise else "",
        busy_cores=findings.BUSY_CORES,
        memory_title=MEMORY_TITLES[model.memory],
        series_by_threads=series,
        findings_by_kind=by_kind(model.findings),
        kind_titles=KIND_TITLES,
        downsampled=longest > figures.MAX_POINTS,
        max_points=figures.MAX_POINTS,
        status_rows=model.status_differences(),
        txn_rows=model.transaction_types(),  # go-tpc's TPC-C transaction types
        txn_header=TXN_HEADER,
        txn_intro=TXN_INTRO[0].upper() + TXN_INTRO[1:],
        txn_cells=txn_cells,
        explain_intro=phase_explain.INTRO,
    )
