"""The CLI's two consoles: tables and results on stdout, progress, warnings and errors on stderr.

Wide tables when piped (CI logs, files); the terminal's own width otherwise.
"""

from __future__ import annotations

import sys

from rich.console import Console

out = Console(width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 150)
