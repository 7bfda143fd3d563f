"""The report's charts, built from a ReportModel: the same SVGs go inline into the HTML and
into files beside the Markdown.

    qps-threads            QPS vs threads, one line per variant, 95% CI error bars
    ratio-tN               QPS ratio to the baseline with its 95% CI, per variant (the verdicts)
    latency-tN             p50 / p95 (with its CI over repeats) / p99 latency per variant
    rss-tN                 server RSS at the end of the window and its peak, per variant
    series-<variant>-tN    per-second QPS and p95 of each repeat, warm-up shaded, stalls marked
    rate-curve             a rate axis ([variants.rate]): p99 from the intended start against the
                           achieved rate, one line per variant and thread count (analyze/rate.py)

Per-second series are downsampled (bucket min/max, so stalls stay visible) to at most
MAX_POINTS points each; every figure in a table comes from the analysis, never from here.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from perflab.analyze import rate
from perflab.analyze.summary import Group
from perflab.report import charts, colors
from perflab.report.charts import Band, Mark, Row, Series
from perflab.report.model import ReportModel
from perflab.variants import short_label, variant_key

MAX_POINTS = 240  # per series: enough for a smooth 20-minute window, small for a 100-cell matrix
MIB = 2**20


@dataclass(frozen=True)
class Figure:
    id: str  # file-name safe
    title: str
    svg: str
    section: str  # summary | series
    threads: int | None = None
    variant: str | None = None


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "default"


def build(model: ReportModel) -> list[Figure]:
    figs = [qps_vs_threads(model)]
    axis = rate.rate_axis(model.axes, model.cells)
    figs += [rate_curve(model, axis)] if axis else []
    per_threads = {t: [g for g in model.groups if g.threads == t] for t in model.threads}
    # one kind after the other, so the same chart at two thread counts sits side by side
    figs += [ratio_chart(model, t, rows) for t, rows in per_threads.items() if len(rows) > 1]
    figs += [latency_chart(model, t, rows) for t, rows in per_threads.items()]
    figs += [rss_chart(model, t, rows) for t, rows in per_threads.items() if any(g.memory_end for g in rows)]
    for rows in per_threads.values():
        # one y scale per thread count and metric, so that variants compare at a glance
        top = {
            m: max(
                (iv[m] or 0 for g in rows for c in g.cell_ids + g.unsettled for iv in model.intervals.get(c, [])),
                default=0,
            )
            for m in ("qps", "p95_ms")
        }
        for g in rows:
            figs += series_charts(model, g, top)
    return figs


def _threads(n: int) -> str:
    return f"{n} thread" + ("" if n == 1 else "s")


def _label(model: ReportModel, g: Group) -> str:
    return short_label(g.variant)


def qps_vs_threads(model: ReportModel) -> Figure:
    threads = model.threads
    series = []
    n = len(model.variants)
    dodge = min(0.08, 0.6 / max(n, 1))  # variants side by side at each thread count, so error bars do not overlap
    for k, v in enumerate(model.variants):
        shift = (k - (n - 1) / 2) * dodge
        key = variant_key(v)
        gs = [g for g in model.groups if g.key == key and g.qps_mean is not None]
        ci = [g.qps_ci for g in gs]
        series.append(
            Series(
                short_label(v),
                model.colors[key],
                [(threads.index(g.threads) + shift, g.qps_mean) for g in gs],  # type: ignore[misc]
                [(c.low, c.high) if c.low is not None and c.high is not None else None for c in ci],
                markers=True,
                tooltip=f"{short_label(v)} QPS",
            )
        )
    svg = charts.line_chart(
        "Steady-state QPS vs threads (mean of repeats, 95% CI)",
        "client threads",
        "QPS",
        series,
        x_ticks=[(i, str(t)) for i, t in enumerate(threads)],
        kind="qps-threads",
        extra_legend=[(charts.dot_swatch("whisker"), "95% CI over repeats")],
    )
    return Figure("qps-threads", "QPS vs threads", svg, "summary")


def rate_curve(model: ReportModel, axis: str) -> Figure:
    """Latency against throughput at the rates of `axis`: each point a rate that the variant's cells
    kept (mean achieved rate, mean p99 over repeats); a rate none of them kept is no point."""
    series = []
    for label, points in rate.curve(model.groups, axis).items():
        first = next(g for g in model.groups if rate.curve_key(g, axis) == label)
        color = model.colors[first.key]
        series.append(Series(label, color, [(x, y) for x, y, _ in points], markers=True, tooltip=f"{label} p99 ms"))
    svg = charts.line_chart(
        "p99 latency from the intended start vs achieved rate (means over repeats)",
        "transactions a second (achieved)",
        "p99 ms",
        series,
        kind="rate-curve",
    )
    return Figure("rate-curve", "Latency vs throughput", svg, "summary")


def ratio_chart(model: ReportModel, threads: int, groups: list[Group]) -> Figure:
    rows = []
    for g in groups:
        c = model.comparison(g, "qps")
        marks = []
        if g.baseline:
            marks = [Mark(1.0, "dot", text="baseline")]
        elif c is not None and c.ratio is not None:
            text = f"ratio {c.ratio:.3f}" + (
                f" [{c.ci_low:.3f}-{c.ci_high:.3f}] {c.verdict}" if c.ci_low is not None else " (no interval)"
            )
            marks = [Mark(c.ratio, "dot", c.ci_low, c.ci_high, text)]
        rows.append(Row(_label(model, g) + (" (baseline)" if g.baseline else ""), model.colors[g.key], marks))
    svg = charts.row_chart(
        f"QPS relative to the baseline, {_threads(threads)}",
        "QPS ratio (variant / baseline)",
        rows,
        [
            (charts.dot_swatch("dot"), "mean ratio"),
            (charts.dot_swatch("whisker"), "95% CI"),
            ('<line x1="0" x2="18" y1="0" y2="0" stroke="#555" stroke-dasharray="4 3"/>', "no difference (1.0)"),
        ],
        reference=1.0,
        x_from_zero=False,
        kind="ratio",
        fmt=lambda v: f"{v:.2f}",
    )
    return Figure(f"ratio-t{threads}", f"QPS ratio, {_threads(threads)}", svg, "summary", threads)


def _percentile(model: ReportModel, g: Group, key: str) -> float | None:
    cells = {c["id"]: c for c in model.cells}
    values = [cells[i]["summary"]["latency_ms"].get(key) for i in g.cell_ids]
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def latency_chart(model: ReportModel, threads: int, groups: list[Group]) -> Figure:
    rows = []
    for g in groups:
        marks = []
        p50, p99, ci = _percentile(model, g, "p50"), _percentile(model, g, "p99"), g.p95_ci
        if p50 is not None:
            marks.append(Mark(p50, "dot", text=f"p50 {p50:.2f} ms"))
        if ci.mean is not None:
            marks.append(
                Mark(
                    ci.mean,
                    "diamond",
                    ci.low,
                    ci.high,
                    f"p95 {ci.mean:.2f} ms" + (f" [{ci.low:.2f}-{ci.high:.2f}]" if ci.low is not None else ""),
                )
            )
        if p99 is not None:
            marks.append(Mark(p99, "square", text=f"p99 {p99:.2f} ms"))
        rows.append(Row(_label(model, g), model.colors[g.key], marks))
    legend = [
        (charts.dot_swatch("dot"), "p50"),
        (charts.dot_swatch("diamond"), "p95"),
        (charts.dot_swatch("whisker"), "p95 95% CI"),
        (charts.dot_swatch("square"), "p99"),
    ]
    svg = charts.row_chart(
        f"Latency percentiles, {_threads(threads)} (mean of repeats)",
        "latency (ms)",
        rows,
        legend,
        kind="latency",
        fmt=lambda v: f"{v:g}",
    )
    return Figure(f"latency-t{threads}", f"Latency percentiles, {_threads(threads)}", svg, "summary", threads)


def rss_chart(model: ReportModel, threads: int, groups: list[Group]) -> Figure:
    """The server's memory per variant: mariadbd's RSS, or PostgreSQL's PSS summed over its processes."""
    kind = model.memory
    rows = []
    for g in groups:
        marks = []
        if g.memory_peak:
            peak = statistics.fmean(g.memory_peak) / MIB
            marks.append(Mark(peak, "outline", text=f"peak {peak:,.1f} MiB"))
        if g.memory_end:
            end = statistics.fmean(g.memory_end) / MIB
            marks.append(Mark(end, "bar", text=f"end of window {end:,.1f} MiB"))
        rows.append(Row(_label(model, g), model.colors[g.key], marks))
    legend = [
        (charts.box_swatch("#777"), f"{kind} at the end of the window"),
        (charts.box_swatch("#777", 0.15, "#777"), f"peak {kind} in the window"),
    ]
    what = "PostgreSQL memory (PSS over every process)" if kind == "PSS" else "mariadbd resident memory"
    svg = charts.row_chart(f"{what}, {_threads(threads)} (mean of repeats)", f"{kind} (MiB)", rows, legend, kind="rss")
    return Figure(f"rss-t{threads}", f"{kind}, {_threads(threads)}", svg, "summary", threads)


def series_charts(model: ReportModel, g: Group, y_max: dict[str, float] | None = None) -> list[Figure]:
    cells = [c for c in model.cells if c["status"] == "ok" and c["threads"] == g.threads and c["variant"] == g.variant]
    if not cells:
        return []
    color, label = model.colors[g.key], _label(model, g)
    window = max((c.get("window_start_s") or 0) for c in cells)
    bands = [Band(0, window, charts.WARMUP_FILL, f"warm-up: 0-{window:g} s (not measured)")] if window else []
    for c in cells:
        for s in c.get("stalls") or []:
            what = "no report" if s["kind"] == "no-report" else f"min {s['min_qps']:,.0f} QPS"
            bands.append(
                Band(
                    s["start_s"] - 0.5,
                    s["end_s"] + 0.5,
                    charts.STALL_FILL,
                    f"stall, cell {c['id']} repeat {c['repeat']}: {s['start_s']:g}-{s['end_s']:g} s ({what})",
                    0.3,
                )
            )
    detected = [c for c in cells if c.get("warmup_s")]
    for c in detected:  # where MSER saw the warm-up end: left of the grey band's edge is what settling looks like
        bands.append(
            Band(
                c["warmup_s"],
                c["warmup_s"],
                "#555",
                f"warm-up end detected (MSER), cell {c['id']} repeat {c['repeat']}: {c['warmup_s']:g} s",
                0.7,
            )
        )
    extra = [(charts.box_swatch(charts.WARMUP_FILL, 0.6), "warm-up (not measured)")] if window else []
    if detected:
        extra.append(('<rect x="8" y="-6" width="2" height="12" fill="#555"/>', "detected warm-up end"))
    if any(c.get("stalls") for c in cells):
        extra.append((charts.box_swatch(charts.STALL_FILL, 0.3), "stall"))
    out = []
    for metric, axis, name in (("qps", "QPS", "QPS"), ("p95_ms", "p95 latency (ms)", "p95")):
        series = []
        for i, c in enumerate(cells):
            # sysbench reports p95 0 for the second of its checkpoint (the histogram was just reset): a gap, not a value
            points = [
                (iv["t"], iv[metric])
                for iv in model.intervals.get(c["id"], [])
                if iv.get(metric) is not None and not (metric == "p95_ms" and iv[metric] == 0)
            ]
            note = "" if c.get("settled") not in (False, 0) else " (unsettled)"
            series.append(
                Series(
                    f"repeat {c['repeat']} (cell {c['id']}){note}",
                    color,
                    charts.downsample(points, MAX_POINTS),
                    dash=colors.DASHES[i % len(colors.DASHES)],
                )
            )
        svg = charts.line_chart(
            f"{label}, {_threads(g.threads)}: {name} per second",
            "seconds since the workload started",
            axis,
            series,
            bands=bands,
            extra_legend=extra,
            width=460,
            height=210,
            y_max=(y_max or {}).get(metric),
            kind=f"series-{metric}",
        )
        out.append(
            Figure(
                f"series-{slug(g.key)}-t{g.threads}-{name.lower()}",
                f"{label}, {g.threads} threads, {name}",
                svg,
                "series",
                g.threads,
                g.key,
            )
        )
    return out
