"""Colours of the report's charts: one per variant, the same in every chart and renderer.

Up to ten variants take the Tableau 10 palette in run order; beyond that, with two or more
axes, the first axis picks the hue and the others a shade of it.

    variant_colors([{"alloc": "glibc"}, {"alloc": "jemalloc"}])
        -> {"alloc=glibc": "#4e79a7", "alloc=jemalloc": "#f28e2b"}
"""

from __future__ import annotations

import colorsys

from perflab.variants import variant_key

# Tableau 10: distinguishable, colour-blind-aware; beyond ten variants hues are shaded per axis.
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]
DASHES = ["", "6 3", "2 2", "8 3 2 3", "1 3"]  # repeats of one variant: solid, dashed, dotted, ...


def variant_colors(variants: list[dict[str, str]]) -> dict[str, str]:
    """One colour per variant (key "axis=label,..."), the same in every chart. Up to ten
    variants: the palette in run order. More, with two or more axes: the first axis picks the
    hue, the other axes a shade of it, so a reader can still tell allocators apart."""
    keys = [variant_key(v) for v in variants]
    if len(keys) <= len(PALETTE) or not variants or len(variants[0]) < 2:
        return {k: _color(i) for i, k in enumerate(keys)}
    first = list(dict.fromkeys(next(iter(v.values())) for v in variants))
    rest = [list(dict.fromkeys(tuple(v.values())[1:] for v in variants if next(iter(v.values())) == f)) for f in first]
    out = {}
    for key, v in zip(keys, variants):
        labels = tuple(v.values())
        h = first.index(labels[0])
        shades = rest[h]
        out[key] = _shade(_color(h), shades.index(labels[1:]), len(shades))
    return out


def _color(i: int) -> str:
    if i < len(PALETTE):
        return PALETTE[i]
    r, g, b = colorsys.hls_to_rgb((i * 0.618034) % 1, 0.45, 0.6)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def _shade(color: str, i: int, n: int) -> str:
    r, g, b = (int(color[k : k + 2], 16) / 255 for k in (1, 3, 5))
    h, _, s = colorsys.rgb_to_hls(r, g, b)
    light = 0.30 + 0.42 * (i / max(n - 1, 1))
    r, g, b = colorsys.hls_to_rgb(h, light, s)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"
