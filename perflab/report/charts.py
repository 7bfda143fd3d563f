"""Static SVG charts for the HTML and Markdown reports: no JavaScript, no fonts, no network.

Two shapes cover every chart of the report:
  line_chart  x/y series (QPS vs threads with CI error bars; per-second QPS and p95 with
              repeats overlaid, shaded warm-up, marked stalls)
  row_chart   one row per variant with bars or points and CI whiskers (RSS end/peak,
              latency percentiles, ratio to the baseline)
Every chart has a title, axis labels and a legend; hovering a mark shows its value (SVG
<title>). Output is a standalone <svg> string that is deterministic for the same input (the
Markdown golden file depends on it), e.g.:

    line_chart("QPS vs threads", "threads", "QPS", [Series("glibc", "#4e79a7", [(1, 950.0)])])

Why our own ~350 lines rather than a library: pygal's SVGs load their tooltip script from a
CDN by default, matplotlib is a 40 MB dependency with a one-second import and large SVGs,
and JavaScript chart libraries (bundled) render nothing in a Markdown file on GitHub.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

FONT = 'font-family="system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif"'
WARMUP_FILL = "#d9d9d9"
STALL_FILL = "#e15759"


@dataclass
class Series:
    label: str
    color: str
    points: list[tuple[float, float]]
    errors: list[tuple[float, float] | None] = field(default_factory=list)  # (low, high) per point
    dash: str = ""
    markers: bool = False
    tooltip: str = ""  # prefix of each point's hover text


@dataclass
class Band:
    x0: float
    x1: float
    fill: str
    label: str  # hover text; the legend names the kind once
    opacity: float = 0.35


@dataclass
class Row:
    label: str
    color: str
    marks: list[Mark]


@dataclass
class Mark:
    value: float
    kind: str = "bar"  # bar | outline | dot | diamond | square
    low: float | None = None
    high: float | None = None
    text: str = ""  # hover text


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks, t = [], first
    while t < hi + step * 0.999:
        ticks.append(round(t, 10))
        t += step
    return ticks


def fmt_num(v: float) -> str:
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:g}G"
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4:
        return f"{v / 1e3:g}k"
    if a >= 100 or v == int(v):
        return f"{v:,.0f}"
    return f"{v:.3g}"


def _f(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


class _Frame:
    """Plot area inside the margins, with linear scales."""

    def __init__(
        self,
        size: tuple[int, int],
        margins: tuple[int, int, int, int],
        xs: tuple[float, float],
        ys: tuple[float, float],
    ) -> None:
        (width, height), (left, right, top, bottom) = size, margins
        self.w, self.h = width, height
        self.x0, self.x1, self.y0, self.y1 = left, width - right, height - bottom, top
        self.xs, self.ys = xs, ys

    def x(self, v: float) -> float:
        lo, hi = self.xs
        return self.x0 + (v - lo) / ((hi - lo) or 1) * (self.x1 - self.x0)

    def y(self, v: float) -> float:
        lo, hi = self.ys
        return self.y0 - (v - lo) / ((hi - lo) or 1) * (self.y0 - self.y1)


def _open(width: int, height: int, title: str, kind: str) -> list[str]:
    return [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'class="chart" data-chart="{escape(kind)}" role="img" aria-label="{escape(title)}" {FONT} font-size="11">'
        ),
        f"<title>{escape(title)}</title>",
        f'<rect width="{width}" height="{height}" fill="#fff"/>',
        (
            f'<text x="{width / 2:.0f}" y="15" text-anchor="middle" font-size="13" font-weight="600">'
            f"{escape(title)}</text>"
        ),
    ]


def _y_axis(fr: _Frame, ticks: list[float], label: str, fmt=fmt_num) -> list[str]:
    out = []
    for t in ticks:
        y = fr.y(t)
        out.append(f'<line x1="{fr.x0}" x2="{fr.x1}" y1="{_f(y)}" y2="{_f(y)}" stroke="#e6e6e6"/>')
        out.append(f'<text x="{fr.x0 - 4}" y="{_f(y + 3.5)}" text-anchor="end" fill="#444">{escape(fmt(t))}</text>')
    cy = (fr.y0 + fr.y1) / 2
    out.append(
        f'<text transform="translate(12,{_f(cy)}) rotate(-90)" text-anchor="middle" fill="#222">{escape(label)}</text>'
    )
    out.append(f'<line x1="{fr.x0}" x2="{fr.x0}" y1="{fr.y1}" y2="{fr.y0}" stroke="#888"/>')
    return out


def _x_axis(fr: _Frame, ticks: list[tuple[float, str]], label: str) -> list[str]:
    out = [f'<line x1="{fr.x0}" x2="{fr.x1}" y1="{fr.y0}" y2="{fr.y0}" stroke="#888"/>']
    for v, text in ticks:
        x = fr.x(v)
        out.append(f'<line x1="{_f(x)}" x2="{_f(x)}" y1="{fr.y0}" y2="{fr.y0 + 4}" stroke="#888"/>')
        out.append(f'<text x="{_f(x)}" y="{fr.y0 + 15}" text-anchor="middle" fill="#444">{escape(text)}</text>')
    out.append(
        f'<text x="{_f((fr.x0 + fr.x1) / 2)}" y="{fr.y0 + 30}" text-anchor="middle" fill="#222">{escape(label)}</text>'
    )
    return out


def _legend(items: list[tuple[str, str]], x: float, y: float, width: float) -> tuple[list[str], float]:
    """Legend entries (swatch svg, text) flowed left to right; returns the elements and the height used."""
    out, cx, cy = [], x, y
    for swatch, text in items:
        w = 30 + 6.6 * len(text)
        if cx + w > x + width and cx > x:
            cx, cy = x, cy + 15
        out.append(
            f'<g class="legend-item" transform="translate({_f(cx)},{_f(cy)})">{swatch}'
            f'<text x="22" y="4">{escape(text)}</text></g>'
        )
        cx += w
    return out, cy - y + 15


def line_swatch(color: str, dash: str = "", marker: bool = False) -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    m = f'<circle cx="9" cy="0" r="3" fill="{color}"/>' if marker else ""
    return f'<line x1="0" x2="18" y1="0" y2="0" stroke="{color}" stroke-width="2"{d}/>{m}'


def box_swatch(fill: str, opacity: float = 1.0, stroke: str = "none") -> str:
    return f'<rect x="0" y="-5" width="18" height="10" fill="{fill}" fill-opacity="{opacity}" stroke="{stroke}"/>'


def legend_height(items: list[tuple[str, str]], width: float) -> float:
    return _legend(items, 0, 0, width)[1]


def line_chart(
    title: str,
    x_label: str,
    y_label: str,
    series: list[Series],
    *,
    x_ticks: list[tuple[float, str]] | None = None,
    bands: list[Band] | None = None,
    extra_legend: list[tuple[str, str]] | None = None,
    width: int = 560,
    height: int = 260,
    y_from_zero: bool = True,
    y_max: float | None = None,
    kind: str = "line",
) -> str:
    """Series as polylines (with markers and CI error bars where given) over shaded x bands."""
    bands = bands or []
    xs = [p[0] for s in series for p in s.points] + [b.x0 for b in bands] + [b.x1 for b in bands]
    ys = [p[1] for s in series for p in s.points] + [e[1] for s in series for e in s.errors if e]
    ys += [e[0] for s in series for e in s.errors if e]
    legend = [(line_swatch(s.color, s.dash, s.markers), s.label) for s in series] + (extra_legend or [])
    legend = list(dict.fromkeys(legend))
    lh = legend_height(legend, width - 70)
    lo_x, hi_x = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x_ticks:  # categories at 0, 1, ...: half a category of room on each side
        lo_x, hi_x = x_ticks[0][0] - 0.5, x_ticks[-1][0] + 0.5
    yt = nice_ticks(0 if y_from_zero else min(ys, default=0), max([*ys, y_max or 0], default=1))
    fr = _Frame((width, int(height + lh)), (62, 14, 26, int(44 + lh)), (lo_x, hi_x), (yt[0], yt[-1]))
    out = _open(width, fr.h, title, kind)
    out.append(f'<g class="bands">{"".join(_band(fr, b) for b in bands)}</g>')
    out += _y_axis(fr, yt, y_label)
    out += _x_axis(fr, x_ticks or [(t, fmt_num(t)) for t in nice_ticks(lo_x, hi_x) if lo_x <= t <= hi_x], x_label)
    for s in series:
        out.append(_series(fr, s))
    items, _ = _legend(legend, 62, fr.h - lh + 2, width - 70)
    out.append(f'<g class="legend">{"".join(items)}</g></svg>')
    return "\n".join(out)


def _band(fr: _Frame, b: Band) -> str:
    x0, x1 = fr.x(b.x0), fr.x(b.x1)
    return (
        f'<rect x="{_f(x0)}" y="{fr.y1}" width="{_f(max(x1 - x0, 1.5))}" height="{fr.y0 - fr.y1}" fill="{b.fill}" '
        f'fill-opacity="{b.opacity}"><title>{escape(b.label)}</title></rect>'
    )


def _series(fr: _Frame, s: Series) -> str:
    pts = " ".join(f"{_f(fr.x(x))},{_f(fr.y(y))}" for x, y in s.points)
    dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
    out = [f'<g class="series" data-label="{escape(s.label)}">']
    if len(s.points) > 1:
        out.append(f'<path d="M{pts.replace(" ", " L")}" fill="none" stroke="{s.color}" stroke-width="1.6"{dash}/>')
    for i, (x, y) in enumerate(s.points):
        err = s.errors[i] if i < len(s.errors) else None
        tip = f"{s.tooltip or s.label}: {fmt_num(y)}" + (f" [{fmt_num(err[0])}-{fmt_num(err[1])}]" if err else "")
        if err:
            # an interval reaching past the axis (a negative QPS bound of a noisy group) is cut
            # at the frame, without its cap, so the reader sees it continues
            cx, lo, hi = fr.x(x), fr.y(max(err[0], fr.ys[0])), fr.y(min(err[1], fr.ys[1]))
            caps = (f" M{_f(cx - 4)},{_f(lo)} h8" if err[0] >= fr.ys[0] else "") + (
                f" M{_f(cx - 4)},{_f(hi)} h8" if err[1] <= fr.ys[1] else ""
            )
            out.append(
                f'<path d="M{_f(cx)},{_f(lo)} V{_f(hi)}{caps}" stroke="{s.color}" stroke-width="1.4" fill="none"/>'
            )
        if s.markers or len(s.points) == 1:
            out.append(
                f'<circle cx="{_f(fr.x(x))}" cy="{_f(fr.y(y))}" r="3.5" fill="{s.color}">'
                f"<title>{escape(tip)}</title></circle>"
            )
    out.append("</g>")
    return "".join(out)


def row_chart(
    title: str,
    x_label: str,
    rows: list[Row],
    legend: list[tuple[str, str]],
    *,
    width: int = 560,
    reference: float | None = None,
    x_from_zero: bool = True,
    kind: str = "rows",
    fmt=fmt_num,
) -> str:
    """One row per variant: bars (solid or outline) and points with CI whiskers on a shared x axis."""
    values = [v for r in rows for m in r.marks for v in (m.value, m.low, m.high) if v is not None]
    if reference is not None:
        values.append(reference)
    lo = 0.0 if x_from_zero else min(values, default=0)
    hi = max(values, default=1)
    if not x_from_zero:
        pad = (hi - lo) * 0.08 or abs(hi) * 0.02 or 0.01
        lo, hi = lo - pad, hi + pad
    xt = nice_ticks(lo, hi)
    label_w = min(220, 16 + 6.4 * max((len(r.label) for r in rows), default=4))
    row_h = 22
    lh = legend_height(legend, width - label_w)
    height = int(30 + row_h * len(rows) + 36 + lh)
    fr = _Frame((width, height), (int(label_w), 16, 26, int(36 + lh)), (xt[0], xt[-1]), (0, len(rows)))
    out = _open(width, height, title, kind)
    for t in xt:
        x = fr.x(t)
        out.append(f'<line x1="{_f(x)}" x2="{_f(x)}" y1="{fr.y1}" y2="{fr.y0}" stroke="#e6e6e6"/>')
    if reference is not None:
        x = fr.x(reference)
        out.append(f'<line x1="{_f(x)}" x2="{_f(x)}" y1="{fr.y1}" y2="{fr.y0}" stroke="#555" stroke-dasharray="4 3"/>')
    out += _x_axis(fr, [(t, fmt(t)) for t in xt], x_label)[:-1]
    out.append(
        f'<text x="{_f((fr.x0 + fr.x1) / 2)}" y="{fr.y0 + 30}" text-anchor="middle" fill="#222">'
        f"{escape(x_label)}</text>"
    )
    for i, r in enumerate(rows):
        cy = fr.y1 + row_h * i + row_h / 2
        out.append(
            f'<g class="row" data-label="{escape(r.label)}">'
            f'<text x="{fr.x0 - 6}" y="{_f(cy + 4)}" text-anchor="end" fill="#222">{escape(r.label)}</text>'
        )
        out += [_mark(fr, m, r.color, cy, x_from_zero) for m in r.marks]
        out.append("</g>")
    items, _ = _legend(legend, label_w, height - lh + 2, width - label_w)
    out.append(f'<g class="legend">{"".join(items)}</g></svg>')
    return "\n".join(out)


def _mark(fr: _Frame, m: Mark, color: str, cy: float, from_zero: bool) -> str:
    tip = f"<title>{escape(m.text)}</title>" if m.text else ""
    x = fr.x(m.value)
    if m.kind in ("bar", "outline"):
        x0 = fr.x(0 if from_zero else fr.xs[0])
        h = 12 if m.kind == "bar" else 16
        style = (
            f'fill="{color}"'
            if m.kind == "bar"
            else f'fill="{color}" fill-opacity="0.15" stroke="{color}" stroke-width="1.2"'
        )
        return f'<rect x="{_f(x0)}" y="{_f(cy - h / 2)}" width="{_f(max(x - x0, 1))}" height="{h}" {style}>{tip}</rect>'
    out = ""
    if m.low is not None and m.high is not None:
        lo, hi = fr.x(max(m.low, fr.xs[0])), fr.x(min(m.high, fr.xs[1]))
        caps = (f" M{_f(lo)},{_f(cy - 4)} v8" if m.low >= fr.xs[0] else "") + (
            f" M{_f(hi)},{_f(cy - 4)} v8" if m.high <= fr.xs[1] else ""
        )
        out += f'<path d="M{_f(lo)},{_f(cy)} H{_f(hi)}{caps}" stroke="{color}" stroke-width="1.4" fill="none"/>'
    shape = {
        "dot": f'<circle cx="{_f(x)}" cy="{_f(cy)}" r="4" fill="{color}">{tip}</circle>',
        "diamond": f'<path d="M{_f(x)},{_f(cy - 5)} l5,5 l-5,5 l-5,-5 z" fill="{color}">{tip}</path>',
        "square": f'<rect x="{_f(x - 3.5)}" y="{_f(cy - 3.5)}" width="7" height="7" fill="#fff" stroke="{color}" '
        f'stroke-width="1.6">{tip}</rect>',
    }
    return out + shape[m.kind]


def dot_swatch(kind: str, color: str = "#555") -> str:
    return {
        "dot": f'<circle cx="9" cy="0" r="4" fill="{color}"/>',
        "diamond": f'<path d="M9,-5 l5,5 l-5,5 l-5,-5 z" fill="{color}"/>',
        "square": f'<rect x="5.5" y="-3.5" width="7" height="7" fill="#fff" stroke="{color}" stroke-width="1.6"/>',
        "whisker": f'<path d="M2,0 H16 M2,-4 v8 M16,-4 v8" stroke="{color}" stroke-width="1.4" fill="none"/>',
    }[kind]


def downsample(points: list[tuple[float, float]], limit: int) -> list[tuple[float, float]]:
    """At most about `limit` points, keeping each bucket's minimum and maximum in time order,
    so stalls (minima) and spikes stay visible. Table figures never come from here."""
    if len(points) <= limit:
        return points
    per = math.ceil(len(points) / (limit // 2))
    out = []
    for i in range(0, len(points), per):
        bucket = points[i : i + per]
        lo, hi = min(bucket, key=lambda p: p[1]), max(bucket, key=lambda p: p[1])
        out += sorted({lo, hi})
    return out
