"""An unprivileged account's attacks on perflab (issue 48): a snippet of the system's Python run as
`nobody` (setpriv --reuid=65534 --regid=65534 --clear-groups), with the standard library only (the
account cannot read perflab's installation), and a world-writable sticky directory like /dev/shm
for it to plant things in.

    attacker = as_nobody("import os; os.symlink('/etc/shadow', '/dev/shm/perflab.lock')")
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

NOBODY = 65534
PYTHON = "/usr/bin/python3"  # the system's: root's pyenv is out of nobody's reach


def argv(code: str, *args: str) -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", PYTHON, "-c", code, *args]


def as_nobody(code: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run `code` as nobody to completion; its output."""
    return subprocess.run(argv(code, *args), capture_output=True, text=True, timeout=timeout, check=False)


def start_as_nobody(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start `code` as nobody (`env` added to this environment); it says `ready` on its first line once
    its attack is in place."""
    full = {**os.environ, **env} if env is not None else None
    proc = subprocess.Popen(argv(code, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
    return proc


def shared_dir(parent: Path | None = None) -> Path:
    """A new directory like /dev/shm: everyone's (1777)."""
    path = Path(tempfile.mkdtemp(prefix="plshared-", dir=parent or "/dev/shm"))
    path.chmod(0o1777)
    return path
