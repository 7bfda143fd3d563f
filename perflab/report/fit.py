"""Terminal tables that fit the terminal: every ratio, interval and verdict whole, at 80 columns too.

rich fits a table wider than the console by wrapping its cells at spaces and, past that, cutting
them with "…". A ratio cut to "0.…" is worse than no column at all: the reader sees a figure and
cannot read it. So a table is built again without its lesser columns, one at a time in the order
the caller gives, until rendering it at the console's width cuts nothing; the line under it names
the columns left out. Wrapping is kept: a ratio over its interval, or "inconclusive" over
"(+5 rounds)", is whole on two lines.

    table, dropped = fitted(console, build, ["CPU µs/txn", "minflt/txn"])
    note(dropped, console.width) -> "left out at 80 columns: CPU µs/txn (a wider terminal shows ...)"
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Callable

from rich.console import Console
from rich.table import Table
from rich.text import Text

def fitted(console: Console, build: Callable[[set[str]], Table], lesser: list[str]) -> tuple[Table, list[str]]:
    """(the table `build(left out)` makes with the fewest of `lesser` left out that renders whole
    at the console's width, those left out); with all of them out and still too narrow, that."""
    for count in range(len(lesser) + 1):
        dropped = lesser[:count]
        table = build(set(dropped))
        if whole(console.width, table):
            return table, dropped
    return table, dropped


def whole(width: int, table: Table) -> bool:
    """Whether `table` renders at `width` columns with every word of its headers and cells whole.

    A cut word ends in "…"; a column rich squeezed to nothing shows no word at all: either way the
    words on screen are fewer than the table's own."""
    probe = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    with probe.capture() as captured:
        probe.print(table)
    return not Counter(_words(table)) - Counter(BORDERS.split(captured.get()))


BORDERS = re.compile(r"[\s\u2500-\u257f]+")  # whitespace and box drawing: what separates words on screen


def _words(table: Table) -> list[str]:
    words = []
    for column in table.columns:
        for cell in [column.header, *column.cells]:
            plain = Text.from_markup(cell).plain if isinstance(cell, str) else getattr(cell, "plain", "")
            words += [w for w in BORDERS.split(plain) if w]
    return words


def note(dropped: list[str], width: int) -> str:
    """The line under a table that left columns out, naming them; "" when none was."""
    if not dropped:
        return ""
    return (
        f"left out at {width} columns: {', '.join(dropped)} "
        "(a wider terminal shows them)"
    )
