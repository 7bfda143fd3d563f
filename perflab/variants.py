"""The names of a variant, a mapping axis -> label, written one way everywhere.

    variant_key({"alloc": "jemalloc", "tcache": "on"})    -> "alloc=jemalloc,tcache=on"   (stored; groups cells)
    variant_label({"alloc": "jemalloc", "tcache": "on"})  -> "alloc=jemalloc, tcache=on"  (in sentences, titles)
    short_label({"alloc": "jemalloc", "tcache": "on"})    -> "jemalloc, on"               (under an axes header)

An experiment without axes has one variant, {}, named "default".
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT = "default"


def variant_key(variant: Mapping[str, str]) -> str:
    return ",".join(f"{axis}={label}" for axis, label in variant.items()) or DEFAULT


def variant_label(variant: Mapping[str, str], empty: str = DEFAULT) -> str:
    return ", ".join(f"{axis}={label}" for axis, label in variant.items()) or empty


def short_label(variant: Mapping[str, str]) -> str:
    return ", ".join(variant.values()) or DEFAULT
