"""Durations and sizes as users write them in experiment files, and how perflab prints them."""

from __future__ import annotations

import math

import pytest

from perflab.units import format_bytes, format_duration, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("20s", 20.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        (5, 5.0),
        (2.5, 2.5),
        (0, 0.0),
        ("1m", 60.0),
        ("2h", 7200.0),
        ("1h1m1s", 3661.0),
        ("1.5m", 90.0),
        ("1m500ms", 60.5),
        (" 20s ", 20.0),
        ("1m 30s", 90.0),  # spaces between parts are allowed
        ("0s", 0.0),
    ],
)
def test_parse_duration(text: str | int | float, seconds: float) -> None:
    result = parse_duration(text)
    assert isinstance(result, float)
    assert result == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    [
        "ten seconds",
        "",
        "   ",
        "20",  # a string needs a unit; a bare number must be a TOML number
        "s",
        "20x",
        "20 sec",
        "-5s",
        "20S",
        "1.5.3s",
        "20s garbage",
        "garbage 20s",
        "1m30",
        -1,
        -0.5,
        True,
        False,
        math.inf,
        math.nan,
        -math.inf,
    ],
)
def test_parse_duration_rejects(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("32K", 32 * 1024),
        ("32k", 32 * 1024),
        ("2M", 2 * 1024**2),
        ("1G", 1024**3),
        ("1T", 1024**4),
        ("4096", 4096),
        (4096, 4096),
        (0, 0),
        (" 8M ", 8 * 1024**2),
    ],
)
def test_parse_size(text: str | int, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "1.5G", "2MB", "M", "-1", "1 G", "big", True, -1])
def test_parse_size_rejects(text: object) -> None:
    with pytest.raises(ValueError):
        parse_size(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (59.4, "59s"), (59.6, "1m00s"), (90, "1m30s"), (3600, "1h00m"), (3661, "1h01m"), (7322, "2h02m")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("seconds", [1, 20, 90, 600, 3600 + 120])
def test_format_duration_parses_back(seconds: int) -> None:
    """What perflab prints for a duration is itself a valid duration, worth the same (to the minute above 1h)."""
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (5 * 1024**2, "5.0 MiB"),
        (3 * 1024**3, "3.0 GiB"),
        (4096 * 1024**3, "4096.0 GiB"),  # GiB is the largest unit
    ],
)
def test_format_bytes(value: float | None, text: str) -> None:
    assert format_bytes(value) == text
