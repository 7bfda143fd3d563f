"""The history page: one self-contained HTML file (inline CSS and SVG, no script, no request).

Input: the "perflab-history/2" document (history/view.py). Output: HTML with, per series, a chart
of every run's estimate and its 95% interval (a point and a bar), each segment's level as a line,
each change point as a dashed line; under it the change points with what changed in provenance
and the `perflab diff` command line, then the runs as a table (the numbers the chart draws).

    perflab history nightly --format html -o history.html
"""

from __future__ import annotations

import math
import shlex
from typing import Any

import jinja2
from markupsafe import Markup, escape

from perflab import __version__
from perflab.units import utc_now

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 760, 220, 64, 12, 12, 28

_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>perflab history: {{ doc.name }}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 820px; color: #1d1d1f; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; overflow-wrap: anywhere; } h3 { font-size: 1em; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
td, th { padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: right; }
td.l, th.l { text-align: left; }
.note { background: #fff6d6; padding: 4px 8px; }
.regression { color: #b00020; } .improvement { color: #006d2c; }
.fail { background: #fde0e0; padding: 4px 8px; } .pass { background: #e2f4e2; padding: 4px 8px; }
code { font-size: 0.92em; background: #f3f3f3; padding: 1px 3px; }
svg .run { fill: #1f5fa8; } svg .bar { stroke: #1f5fa8; stroke-width: 1.2; }
svg .level { stroke: #e07b00; stroke-width: 2; } svg .change { stroke: #b00020; stroke-dasharray: 4 3; }
svg .axis { stroke: #888; } svg text { font-size: 11px; fill: #444; }
</style></head><body>
<h1>History of {{ doc.name }}: {{ doc.metric }}</h1>
<p>Index <code>{{ doc.index }}</code>; change points at p &le; {{ doc.method.alpha }}, segments of at least
{{ doc.method.min_size }} runs, windows of {{ doc.method.window }} runs (<code>perflab docs history</code>).
Written by perflab {{ version }} at {{ now }}.</p>
{% for n in doc.notes %}<p class="note">{{ n }}</p>{% endfor %}
{% for c in doc.provenance_changes %}<p class="note">{{ c.kind|capitalize }} changed at run {{ c.run }} ({{ c.started_at }}): {% for p in c.changes %}<code>{{ p.field }}</code>: {{ p.before }} &rarr; {{ p.after }}{{ '; ' if not loop.last }}{% endfor %}</p>{% endfor %}
{% if doc.gate %}<p class="{{ 'pass' if doc.gate.passed else 'fail' }}" id="gate">Gate ({{ doc.gate.fail_on }}):
{{ 'passed' if doc.gate.passed else 'FAILED' }}.
{% for line in doc.gate.failed %}<br>{{ line }}{% endfor %}
{% for line in doc.gate.inconclusive %}<br>inconclusive: {{ line }}{% endfor %}</p>{% endif %}
{% for s in series %}
<section class="series" data-runs="{{ s.doc.runs|length }}" data-changes="{{ s.doc.change_points|length }}">
{% if loop.first or s.doc.workload != series[loop.index0 - 1].doc.workload %}<h2>{{ s.doc.workload }}</h2>{% endif %}
<h3>{{ s.label }} at {{ s.doc.threads }} threads: {{ s.doc.runs|length }} runs,
{{ s.doc.segments|length }} segment(s){% if s.doc.tau is not none %}, run-to-run variation
{{ '%.1f'|format(s.doc.tau * 100) }}%{% endif %}</h3>
{{ s.chart }}
{% for c in s.doc.change_points %}
<p class="changepoint {{ c.direction }}">Change at run {{ c.run }} ({{ c.started_at }}): {{ c.direction }},
ratio {{ '%.3f'|format(c.ratio) }} [{{ '%.3f'|format(c.low) }}&ndash;{{ '%.3f'|format(c.high) }}],
p = {{ '%.2g'|format(c.p) }}.<br>
What changed: {% for p in c.provenance %}<code>{{ p.field }}</code>: {{ p.before }} &rarr; {{ p.after }}{{ '; ' if not loop.last }}{% else %}nothing perflab records{% endfor %}.<br>
{% for p in c.provenance_nearby or [] %}Changed {{ p.offset|abs }} run{{ 's' if p.offset|abs > 1 }} {{ 'after' if p.offset > 0 else 'before' }} it: <code>{{ p.field }}</code>: {{ p.before }} &rarr; {{ p.after }}<br>{% endfor %}
Diff: <code>{{ c.diff_line }}</code>
{% if c.diff_top %}<br>{% for r in c.diff_top %}{{ r.function }} {{ '%+.3g'|format(r.delta_self_per_txn) }}{{ '; ' if not loop.last }}{% endfor %}{% endif %}
{% if c.status_diff %}<br>Server counters per transaction: {% for r in c.status_diff[:4] %}{{ r.counter }} {{ '%.4g'|format(r.baseline) }} &rarr; {{ '%.4g'|format(r.variant) }}{{ '; ' if not loop.last }}{% endfor %}{% endif %}
{% if c.alloc_diff %}<br>Allocations: {% for r in c.alloc_diff[:4] if r.beyond_noise %}{{ r.metric }} {{ '%+.4g'|format(r.delta) }} {{ r.unit }}{{ '; ' if not loop.last }}{% endfor %}{% endif %}</p>
{% endfor %}
<table class="runs"><tr><th>run</th><th class="l">started</th><th>{{ doc.metric }}</th><th>95% interval</th><th>n</th><th class="l">directory</th></tr>
{% for r in s.doc.runs %}<tr><td>{{ r.run }}</td><td class="l">{{ r.started_at }}</td><td class="mean">{{ fmt(r.mean) }}</td>
<td>{% if r.low is not none %}{{ fmt(r.low) }}&ndash;{{ fmt(r.high) }}{% else %}n&lt;3{% endif %}</td><td>{{ r.n }}</td>
<td class="l">{{ r.directory }}</td></tr>
{% endfor %}</table></section>
{% endfor %}
</body></html>
"""


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"


def render(doc: dict[str, Any]) -> str:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    series = []
    for s in doc["series"]:
        for c in s["change_points"]:
            c["diff_line"] = shlex.join(c["diff"])
        label = ", ".join(f"{k}={v}" for k, v in s["variant"].items()) or "default"
        if s.get("kind") == "ratio":  # the variant's ratio to the baseline within each run
            label += " / " + ", ".join(f"{k}={v}" for k, v in s["baseline"].items()) + " (ratio)"
        series.append({"doc": s, "label": label, "chart": chart(s)})
    return env.from_string(_TEMPLATE).render(doc=doc, series=series, fmt=_fmt, version=__version__, now=utc_now())


def chart(s: dict[str, Any]) -> Markup:
    """The series as inline SVG: a point and an interval bar per run, segment levels, change points."""
    runs = s["runs"]
    values = [v for r in runs for v in (r["mean"], r["low"], r["high"]) if v is not None]
    if not values:
        return Markup("")
    scale = _Scale(len(runs), min(values), max(values))
    label = escape(f"{s['metric']}{' ratio' if s.get('kind') == 'ratio' else ''} per run")
    parts = [f'<svg class="chart" viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="{label}">']
    parts.append(f'<line class="axis" x1="{PAD_L}" y1="{H - PAD_B}" x2="{W - PAD_R}" y2="{H - PAD_B}"/>')
    parts += [
        f'<text x="{PAD_L - 6}" y="{scale.y(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>' for t in scale.ticks()
    ]
    parts += [_level(scale, g) for g in s["segments"]]
    parts += [_change(scale, c) for c in s["change_points"]]
    parts += [_run(scale, r) for r in runs if r["mean"] is not None]
    parts.append(f'<text x="{W - PAD_R}" y="{H - 8}" text-anchor="end">run (oldest to newest)</text></svg>')
    return Markup("".join(parts))


class _Scale:
    """Run number -> x, value -> y, with 5% room above and below."""

    def __init__(self, runs: int, lo: float, hi: float) -> None:
        self.runs = max(runs, 1)
        room = (hi - lo) * 0.05 if hi != lo else abs(lo) * 0.05 + 1e-9  # one value (a ratio near 1): 5% of it
        self.lo, self.hi = lo - room, hi + room

    def x(self, run: float) -> float:
        return PAD_L + (run - 0.5) / self.runs * (W - PAD_L - PAD_R)

    def y(self, value: float) -> float:
        return PAD_T + (self.hi - value) / (self.hi - self.lo) * (H - PAD_T - PAD_B)

    def ticks(self) -> list[float]:
        return _ticks(self.lo, self.hi)


def _level(scale: _Scale, g: dict[str, Any]) -> str:
    x1, x2, y = scale.x(g["first_run"] - 0.4), scale.x(g["last_run"] + 0.4), scale.y(g["level"])
    what = f"runs {g['first_run']}-{g['last_run']}: {_fmt(g['level'])}"
    return f'<line class="level" x1="{x1:.1f}" x2="{x2:.1f}" y1="{y:.1f}" y2="{y:.1f}"><title>{what}</title></line>'


def _change(scale: _Scale, c: dict[str, Any]) -> str:
    x = scale.x(c["run"] - 0.5)
    what = f"change at run {c['run']}: ratio {c['ratio']:.3f}"
    return f'<line class="change" x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_T}" y2="{H - PAD_B}"><title>{what}</title></line>'


def _run(scale: _Scale, r: dict[str, Any]) -> str:
    x, out = scale.x(r["run"]), ""
    if r["low"] is not None:
        out = (
            f'<line class="bar" x1="{x:.1f}" x2="{x:.1f}" y1="{scale.y(r["low"]):.1f}" y2="{scale.y(r["high"]):.1f}"/>'
        )
    what = escape(f"run {r['run']} ({r['started_at']}): {_fmt(r['mean'])}")
    return out + f'<circle class="run" cx="{x:.1f}" cy="{scale.y(r["mean"]):.1f}" r="3"><title>{what}</title></circle>'


def _ticks(lo: float, hi: float, count: int = 4) -> list[float]:
    step = 10 ** math.floor(math.log10((hi - lo) / count))
    step *= next(m for m in (1, 2, 5, 10) if (hi - lo) / (step * m) <= count)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(count + 1) if first + i * step <= hi]
