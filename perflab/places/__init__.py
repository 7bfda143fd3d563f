"""Where perflab's processes run: a place. Here (this machine, places/here.py) or a host over SSH
(perflab/hosts/place.py), behind one interface, so that what observes a process is written once
and only the SSH place knows it is remote (issue 47).

What a place gives today: a process's CPU, faults and context switches (`counters`), the same over a
process tree (`tree_counters`: every live member plus the children it reaped, as PostgreSQL's
postmaster and its backends), and its resident memory once a second over a window (`rss_sampler`,
stamped on this machine's clock). Starting processes, files and the clock follow (docs/development.md).

    place = Here()                               # or server_host.place
    before = place.counters(pid); ...; used = place.counters(pid).minus(before)
    with place.rss_sampler(pid) as rss: ...       # rss.samples -> [(0.0, 123456789), ...]; rss.end, rss.peak
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from perflab.places.procfs import ProcCounters


class RssSeries(AbstractContextManager["RssSeries"], Protocol):
    """Resident bytes over a window: `samples` [(seconds since it began, bytes)], and the last and the
    largest of them."""

    samples: list[tuple[float, int]]

    @property
    def end(self) -> int | None: ...

    @property
    def peak(self) -> int | None: ...


class Place(Protocol):
    """A machine where a measured process runs; `name` is "here" or the host's name in [hosts]."""

    name: str

    def counters(self, pid: int, threads: bool = True) -> ProcCounters:
        """The process's counters now (`threads`: its context switches too, read from every thread's
        status file: never between turns). ProcessLookupError once it is gone."""
        ...

    def tree_counters(self, pid: int, threads: bool = True) -> ProcCounters:
        """The counters of `pid` and its descendants, and of the children they reaped.
        ProcessLookupError once `pid` is gone."""
        ...

    def rss_sampler(self, pid: int, tree: bool = False) -> RssSeries:
        """`pid`'s resident memory (`tree`: summed over its descendants) once a second while it is entered."""
        ...
