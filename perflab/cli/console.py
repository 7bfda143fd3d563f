"""The CLI's two consoles: tables and results on stdout, progress, warnings and errors on stderr.

Wide tables when piped (CI logs, files); the terminal's own width otherwise, and $COLUMNS when it
is set (rich reads it): `COLUMNS=80 perflab report DIR | less` shows what an 80-column terminal does.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console


def _width(stream: object) -> int | None:
    """None (rich's own: the terminal's, or $COLUMNS) on a terminal or with $COLUMNS; else 150."""
    return None if os.environ.get("COLUMNS", "").isdigit() or getattr(stream, "isatty", lambda: False)() else 150


out = Console(width=_width(sys.stdout))
err = Console(stderr=True, width=_width(sys.stderr))
