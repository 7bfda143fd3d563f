"""Parsing and printing of durations and byte sizes as users write them.

Durations: "20s", "1m", "1m30s", "500ms", "2h" or a bare number of seconds.
Sizes: "32K", "2M", "1G" (powers of 1024, as MariaDB reads them) or a bare number of bytes.
Timestamps: ISO 8601 in UTC to the second, "2026-11-22T14:03:07+00:00", as results store them.
"""

from __future__ import annotations

import datetime as dt
import math
import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE = re.compile(r"^(\d+)([KMGT]?)$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_duration(value: str | int | float) -> float:
    """Seconds in `value`; raises ValueError for anything that is not a duration."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):  # TOML has inf and nan
            raise ValueError(f"{value!r} is not a duration")
        if value < 0:
            raise ValueError(f"{value!r} is negative")
        return float(value)
    text = value.strip().replace(" ", "")
    if not text:
        raise ValueError("empty duration")
    total, pos = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"{value!r} is not a duration")
    return total


def parse_size(value: str | int) -> int:
    """Bytes in `value`; raises ValueError for anything that is not a size."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value!r} is negative")
        return value
    match = _SIZE.match(value.strip())
    if not match:
        raise ValueError(f"{value!r} is not a size")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def format_bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def size_class_label(low: int, high: int) -> str:
    """A log2 size class [low, high) as the allocation figures name it: "1M-2M", "64-128"."""
    return f"{size_text(low)}-{size_text(high)}"


def size_text(value: int) -> str:
    """Bytes as a size a spec accepts, exact: 524288 -> "512K", 3000 -> "3000"."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if value >= 1 << shift and value % (1 << shift) == 0:
            return f"{value >> shift}{unit}"
    return str(value)


def utc_now() -> str:
    """Now, as results store a moment, to the millisecond: "2026-11-22T14:03:07.412+00:00" (a
    cell's cost is its end less its start: to the second, calibrate read 1 s for cells of 1.4 s)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")
