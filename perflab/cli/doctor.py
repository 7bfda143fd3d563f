"""`perflab doctor`: what this machine has for perflab; `--clean` removes what killed runs left.

perflab doctor [--clean] [--format json]
"""

from __future__ import annotations

import json
import sys

import click

from perflab.cli.console import out
from perflab.errors import EXIT_ENVIRONMENT


@click.command()
@click.option("--clean", is_flag=True, help="stop and remove what killed perflab runs left behind")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def doctor(clean: bool, fmt: str) -> None:
    """Which tools and allocators are present, which are missing and how to get them; what
    killed runs left behind (--clean removes it)."""
    from perflab import doctor as doc  # noqa: PLC0415

    if clean:
        doc.clean(out)
        return
    facts = doc.collect()
    if fmt == "json":
        click.echo(json.dumps(facts, indent=2))
    else:
        doc.render(out, facts)
    if not facts["ok"]:
        sys.exit(EXIT_ENVIRONMENT)
