"""perflab: declared database benchmark experiments, run on a managed server, explained.

run = perflab.open("results/sb")   # the Python API (perflab/api.py, docs/api.md): pandas DataFrames
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perflab.api import Run

__version__ = "0.1.0"


def open(directory: str | os.PathLike[str]) -> Run:  # the API's entry point; the builtin is not used here
    """A results directory as pandas DataFrames: perflab.api.open (imported on first use, so that
    the CLI starts without pandas)."""
    from perflab import api

    return api.open(directory)
