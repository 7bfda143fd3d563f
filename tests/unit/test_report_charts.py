"""The SVG chart renderer: well-formed, labelled, escaped, colours stable, downsampling keeps dips."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from perflab.report import charts, colors
from perflab.report.charts import Band, Mark, Row, Series

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def test_line_chart_has_title_axis_labels_legend_and_error_bars():
    svg = charts.line_chart(
        "QPS vs threads",
        "client threads",
        "QPS",
        [Series("glibc", "#4e79a7", [(0, 100.0), (1, 180.0)], [(90, 110), (170, 190)], markers=True)],
        x_ticks=[(0, "1"), (1, "2")],
    )
    root = parse(svg)
    labels = texts(root)
    assert {"QPS vs threads", "client threads", "QPS", "glibc", "1", "2"} <= set(labels)
    paths = [p.get("d") for p in root.iter(f"{SVG}path")]
    assert any(d.count("M") >= 3 for d in paths)  # an error bar: vertical line and two caps
    (series,) = [g for g in root.iter(f"{SVG}g") if g.get("class") == "series"]
    assert len(list(series.iter(f"{SVG}circle"))) == 2


def test_user_text_is_escaped():
    svg = charts.row_chart("t", "x", [Row("<script>alert(1)</script>", "#000", [Mark(1.0)])], [])
    assert "<script>" not in svg
    assert "<script>alert(1)</script>" in texts(parse(svg))


def test_bands_and_empty_series_render():
    svg = charts.line_chart("s", "seconds", "QPS", [Series("r1", "#000", [])], bands=[Band(0, 3, "#ddd", "warm-up")])
    root = parse(svg)
    assert any(r.find(f"{SVG}title") is not None for r in root.iter(f"{SVG}rect"))


def test_downsample_keeps_minimum_and_bounds_size():
    points = [(float(t), 1000.0) for t in range(5000)]
    points[2345] = (2345.0, 3.0)  # a one-second stall
    small = charts.downsample(points, 240)
    assert len(small) <= 250
    assert (2345.0, 3.0) in small
    assert [p[0] for p in small] == sorted(p[0] for p in small)
    assert charts.downsample(points[:10], 240) == points[:10]


def test_colours_one_per_variant_and_stable():
    variants = [
        {"allocator": a, "sort_buffer": s}
        for a in ("glibc", "jemalloc", "tcmalloc", "mimalloc", "nommap")
        for s in ("32K", "2M", "32M")
    ]
    assigned = colors.variant_colors(variants)
    assert len(set(assigned.values())) == 15
    assert assigned == colors.variant_colors(variants)
    few = colors.variant_colors([{"allocator": "glibc"}, {"allocator": "jemalloc"}])
    assert list(few.values()) == colors.PALETTE[:2]


def test_nice_ticks_cover_the_range():
    ticks = charts.nice_ticks(0, 2637)
    assert ticks[0] <= 0 and ticks[-1] >= 2637 and 3 <= len(ticks) <= 8
