"""The storage directories this machine's runs used (`[experiment] storage`: datadirs on disk), so that
`perflab doctor --clean` looks for killed runs' work directories there too, and not only on the tmpfs:
unlike the tmpfs, a disk keeps them across a reboot (issue 48).

One absolute path a line, in $PERFLAB_STATE/storage-dirs (else $XDG_STATE_HOME/perflab/, else
~/.local/state/perflab/; the tests point PERFLAB_STATE at a throwaway directory):

    /var/tmp/lab
    /data/perflab
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "PERFLAB_STATE"
FILE = "storage-dirs"


def location() -> Path:
    given = os.environ.get(ENV)
    if given:
        return Path(given) / FILE
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "perflab" / FILE


def remember(path: Path) -> None:
    """Add `path` (a run's storage directory) to the record, once; a record that cannot be written
    costs only doctor --clean's look there (the next run with that storage cleans it anyway)."""
    path = path.resolve()
    if path in used():
        return
    record = location()
    try:
        record.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(record, "a", encoding="utf-8") as f:  # appends of one short line: no torn lines
            f.write(f"{path}\n")
    except OSError:
        pass  # read-only home: doctor --clean then looks on the tmpfs alone, and says where it looked


def used() -> list[Path]:
    """The recorded storage directories (those gone since included: the caller checks)."""
    try:
        lines = location().read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return list(dict.fromkeys(Path(line) for line in lines if line.startswith("/")))
