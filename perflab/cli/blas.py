"""One OpenBLAS thread for perflab's own process.

numpy and scipy each load an OpenBLAS that starts a thread per CPU as it loads: 0.2 s of CPU for
every `perflab` command on this 2-vCPU VM (measured: `import perflab.cli` 0.60 s of user CPU, 0.37 s
with OPENBLAS_NUM_THREADS=1), and threads that may spin beside a cell being measured. perflab's
arrays are a few hundred numbers. OpenBLAS reads the variable once, as it loads: it is set for the
imports only, and taken out again, so that nothing perflab starts (a server, a client) inherits it.
A value the user set is left alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

VARIABLE = "OPENBLAS_NUM_THREADS"


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    if VARIABLE in os.environ:
        yield
        return
    os.environ[VARIABLE] = "1"
    try:
        yield
    finally:
        os.environ.pop(VARIABLE, None)


def load() -> None:
    """Load numpy and scipy's special functions (what the analysis imports) with one thread."""
    with one_blas_thread():
        import numpy  # noqa: F401
        from scipy import special  # noqa: F401
