"""perflab's own small C programs (the allocation counter, the host-speed canary), compiled on
the machine that runs them and cached by the hash of their source, flags and compiler.

    path = compiled(SOURCE, cache, "perflab_alloc", ".so", ["-fPIC", "-shared"], "the allocation counter")
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from perflab.errors import PerflabError
from perflab.redact import redact_argv


def compiled(
    source: Path,
    cache: Path,
    stem: str,
    suffix: str,
    flags: Sequence[str],
    what: str,
    libs: Sequence[str] = (),
    error: type[PerflabError] = PerflabError,
) -> Path:
    """`source` built with $CC (default cc) into `cache`/stem-HASH+suffix, once: a build in
    progress writes a temporary name first, so a killed build leaves nothing that looks done.
    `error` (with its hint) when there is no compiler or the build fails."""
    cc = os.environ.get("CC", "cc")
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise error(f"no C compiler to build {what} ({cc}: {exc})", "install gcc (apt-get install gcc) or set CC") from exc
    digest = hashlib.sha256(source.read_bytes() + "\0".join(flags).encode() + version.encode()).hexdigest()[:16]
    out = cache / f"{stem}-{digest}{suffix}"
    if out.exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(f".{os.getpid()}.tmp")
    argv = [cc, *flags, "-o", str(partial), str(source), *libs]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shown = " ".join(redact_argv(argv))
        raise error(f"building {what} failed: {done.stderr.strip()[-2000:]}", f"the command was: {shown}")
    partial.rename(out)
    return out
