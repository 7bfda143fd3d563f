"""What a killed run left on its remote hosts, stopped and removed (`perflab doctor --clean`, and the
start of every run through run/workdir.py): the local work directory's hosts.json names each host
and its run directory; only processes tagged with that directory are killed (hosts/rundir.py).

    clean_remote(Path("/dev/shm/perflab-k2j4x"))  # [("load", "/dev/shm/perflab-host-a1b2c3", [4711], None)]
"""

from __future__ import annotations

from pathlib import Path

from perflab.errors import HostKeyError, HostLostError, HostUnreachableError
from perflab.hosts import rundir
from perflab.hosts.target import parse_target
from perflab.hosts.transport import Connection

Outcome = tuple[str, str, list[int], str | None]  # host, its run directory, pids killed, why it failed (None: done)


def _clean_one(place: rundir.Placement) -> Outcome:
    try:
        link = Connection.open(place.name, parse_target(place.ssh))
    except (HostUnreachableError, HostKeyError, ValueError) as exc:
        return place.name, place.path, [], getattr(exc, "message", str(exc))
    try:
        if not place.path.rsplit("/", 1)[-1].startswith(rundir.PREFIX):
            return place.name, place.path, [], "not a perflab run directory: left alone"
        return place.name, place.path, rundir.RunDir(link, place.path).remove(), None
    except HostLostError as exc:
        return place.name, place.path, [], exc.message
    finally:
        link.close()


def clean_remote(local_workdir: Path) -> list[Outcome]:
    """Clean every host the dead run at `local_workdir` recorded; hosts.json keeps those that failed."""
    outcomes = [_clean_one(place) for place in rundir.recorded(local_workdir)]
    failed = [p for p, o in zip(rundir.recorded(local_workdir), outcomes, strict=True) if o[3] is not None]
    if outcomes:
        if failed:
            rundir.record(local_workdir, failed)
        else:
            (local_workdir / rundir.RECORD).unlink(missing_ok=True)
    return outcomes
