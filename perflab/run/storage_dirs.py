"""The storage directories this machine's runs used (`[experiment] storage`: datadirs on disk), here and
on server hosts, so that `perflab doctor --clean` looks for killed runs' leftovers there too, and not
only on the tmpfs: unlike a tmpfs, a disk keeps them across a reboot (issue 48).

One a line in $PERFLAB_STATE/storage-dirs (else $XDG_STATE_HOME/perflab/, else ~/.local/state/perflab/;
the tests point PERFLAB_STATE at a throwaway directory): a path of this machine, or a host's ssh target
and a path there:

    /var/tmp/lab
    root@db1 /var/lib/perflab
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


def _lines() -> list[str]:
    try:
        return location().read_text(encoding="utf-8").splitlines()
    except OSError:
        return []


def remember(path: str | Path, ssh: str | None = None) -> None:
    """Add a run's storage directory (of this machine, or of the host `ssh` reaches) to the record, once;
    a record that cannot be written costs only doctor --clean's look there (the next run with that
    storage cleans it anyway)."""
    line = f"{ssh} {path}" if ssh else str(Path(path).resolve())
    if "\n" in line or line in _lines():
        return
    record = location()
    try:
        record.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(record, "a", encoding="utf-8") as f:  # appends of one short line: no torn lines
            f.write(f"{line}\n")
    except OSError:
        pass  # read-only home: doctor --clean then looks on the tmpfs alone, and says where it looked


def used() -> list[Path]:
    """This machine's recorded storage directories (those gone since included: the caller checks)."""
    return list(dict.fromkeys(Path(line) for line in _lines() if line.startswith("/")))


def used_on_hosts() -> list[tuple[str, str]]:
    """The hosts' recorded storage directories: (ssh target, path there)."""
    pairs = (line.split(" ", 1) for line in _lines() if not line.startswith("/") and " /" in line)
    return list(dict.fromkeys((ssh, path) for ssh, path in pairs))
