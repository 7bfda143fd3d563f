"""perflab command line: the verbs, one module per group, and the entry point.

    perflab run FILE.toml | --resume DIR     cli/run.py       spec -> preflight -> Scheduler -> results
    perflab calibrate FILE.toml              cli/calibrate.py A/A runs -> noise components -> detectable effect
    perflab report DIR [--html]              cli/results.py   results -> summary -> tables / HTML / Markdown / JSON
    perflab compare DIR | DIR_A DIR_B        cli/results.py   verdicts: variant vs baseline, or B vs A (--fail-on)
    perflab export DIR [--format csv]        cli/results.py   the documented interchange formats (JSON, CSVs)
    perflab history NAME | import DIR...     cli/history.py   runs over time: series, change points, gate
    perflab profile DIR SELECTOR             cli/profiles.py  top functions per transaction
    perflab diff DIR A [B]                   cli/profiles.py  function by function, A -> B
    perflab alloc DIR SEL [B]                cli/alloc.py     allocator calls, bytes, syscalls per transaction
    perflab flame DIR SEL [B] -o FILE        cli/profiles.py  flame graph (SVG, speedscope, folded)
    perflab doctor [--clean] [--format json] cli/doctor.py    tools, allocators, leftovers of killed runs
    perflab docs [TOPIC[#SECTION]]           cli/docs.py      the reference pages, wherever perflab is installed

PerflabError is caught here only and mapped to its exit code; anything else is a bug.
"""

from __future__ import annotations

import signal
import sys
from typing import Any, NoReturn

import click
from rich.markup import escape

from perflab.cli import blas

blas.load()  # before any verb's module loads numpy or scipy (cli/blas.py)

from perflab import __version__
from perflab.cli.alloc import alloc
from perflab.cli.build import build
from perflab.cli.calibrate import calibrate
from perflab.cli.console import err
from perflab.cli.docs import docs
from perflab.cli.doctor import doctor
from perflab.cli.history import history
from perflab.cli.profiles import diff, flame, profile
from perflab.cli.results import compare_cmd, export, report
from perflab.cli.run import run
from perflab.errors import EXIT_INTERRUPTED, PerflabError
from perflab.redact import redact

VERBS = (run, calibrate, build, report, compare_cmd, export, history, profile, diff, flame, alloc, doctor, docs)


def _fail(exc: PerflabError) -> NoReturn:
    # messages quote user input (names, values, server log lines): never read them as markup; and
    # whatever URL or command line they quote, never with its password (issue 48)
    err.print(f"[bold red]error:[/] {escape(redact(exc.message))}", highlight=False, soft_wrap=True)
    if exc.hint:
        err.print(f"[cyan]hint:[/] {escape(redact(exc.hint))}", highlight=False, soft_wrap=True)
    sys.exit(exc.exit_code)


def _terminate_as_interrupt(signum: int, frame: Any) -> NoReturn:
    raise KeyboardInterrupt


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        signal.signal(signal.SIGTERM, _terminate_as_interrupt)
        signal.signal(signal.SIGHUP, _terminate_as_interrupt)
        try:
            return super().invoke(ctx)
        except PerflabError as exc:
            _fail(exc)
        except KeyboardInterrupt:
            err.print("[yellow]interrupted:[/] every server and client perflab started has been stopped")
            sys.exit(EXIT_INTERRUPTED)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perflab")
def main() -> None:
    """Run database benchmark experiments and explain the results."""


for _verb in VERBS:
    main.add_command(_verb)
