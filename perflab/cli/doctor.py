"""`perflab doctor`: what this machine has for perflab; `--clean` removes what killed runs left.

perflab doctor [--clean]
"""

from __future__ import annotations

import sys

import click

from perflab.cli.console import out
from perflab.errors import EXIT_ENVIRONMENT


@click.command()
@click.option("--clean", is_flag=True, help="stop and remove what killed perflab runs left behind")
def doctor(clean: bool) -> None:
    """Which tools and allocators are present, which are missing and how to get them; what
    killed runs left behind (--clean removes it)."""
    from perflab import doctor as doc  # noqa: PLC0415

    if clean:
        doc.clean(out)
        return
    if not doc.render(out):
        sys.exit(EXIT_ENVIRONMENT)
