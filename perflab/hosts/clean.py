"""What a killed run left on its remote hosts, stopped and removed (`perflab doctor --clean`, and the
start of every run through run/workdir.py): the local work directory's hosts.json names each host
and its run directory; on each, whatever else dead runs of this machine left is swept too, found from
the host's side (hosts/rundir.py `sweep`); only processes tagged with a run's directory are killed.
The storage directories runs used on hosts (run/storage_dirs.py) are swept too: a host's disk keeps a
dead run's datadirs after this machine's tmpfs, and its record, are gone.

    clean_remote(Path("/dev/shm/perflab-k2j4x"))  # [("load", "/dev/shm/perflab-host-a1b2c3", [4711], None)]
"""

from __future__ import annotations

from pathlib import Path

from perflab.errors import HostKeyError, HostLostError, HostUnreachableError
from perflab.hosts import rundir
from perflab.hosts.rundir import Outcome
from perflab.hosts.target import parse_target
from perflab.hosts.transport import Connection
from perflab.run import storage_dirs


def _clean_one(place: rundir.Placement) -> list[Outcome]:
    """The recorded run directory of `place` removed, then the dead runs' directories the host has."""
    try:
        link = Connection.open(place.name, parse_target(place.ssh))
    except (HostUnreachableError, HostKeyError, ValueError) as exc:
        return [(place.name, place.path, [], getattr(exc, "message", str(exc)))]
    try:
        if not place.path.rsplit("/", 1)[-1].startswith(rundir.PREFIX):
            return [(place.name, place.path, [], "not a perflab run directory: left alone")]
        done = [(place.name, place.path, rundir.RunDir(link, place.path).remove(), None)]
        return done + [o for o in rundir.sweep(link) if o[1] != place.path]
    except HostLostError as exc:
        return [(place.name, place.path, [], exc.message)]
    finally:
        link.close()


def clean_host_storages() -> list[Outcome]:
    """What dead runs of this machine left in the storage directories its runs used on hosts (recorded
    by run/storage_dirs.py), and in those hosts' tmpfs: each host reached once, and swept."""
    paths: dict[str, list[str]] = {}
    for ssh, path in storage_dirs.used_on_hosts():
        paths.setdefault(ssh, []).append(path)
    outcomes: list[Outcome] = []
    for ssh, where in paths.items():
        try:
            link = Connection.open(ssh, parse_target(ssh))
        except (HostUnreachableError, HostKeyError, ValueError) as exc:
            outcomes += [(ssh, path, [], getattr(exc, "message", str(exc))) for path in where]
            continue
        try:
            outcomes += rundir.sweep(link, (*rundir.BASES, *where))
        except HostLostError as exc:
            outcomes += [(ssh, path, [], exc.message) for path in where]
        finally:
            link.close()
    return outcomes


def clean_remote(local_workdir: Path) -> list[Outcome]:
    """Clean every host the dead run at `local_workdir` recorded; hosts.json keeps those that failed."""
    places = rundir.recorded(local_workdir)
    outcomes = [_clean_one(place) for place in places]
    failed = [p for p, o in zip(places, outcomes, strict=True) if o[0][3] is not None]
    if places:
        if failed:
            rundir.record(local_workdir, failed)
        else:
            (local_workdir / rundir.RECORD).unlink(missing_ok=True)
    return [o for found in outcomes for o in found]
