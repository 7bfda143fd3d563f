"""This machine as a place (perflab/places/__init__.py): its /proc read directly.

    place = HERE
    used = place.counters(pid).minus(before)
"""

from __future__ import annotations

from dataclasses import dataclass

from perflab.places.procfs import ProcCounters, RssSampler, process_cpu_s
from perflab.places.proctree import TreeSampler, tree_counters


@dataclass(frozen=True)
class Here:
    """The machine perflab runs on."""

    name: str = "here"

    def counters(self, pid: int, threads: bool = True) -> ProcCounters:
        return ProcCounters.read(pid, threads)

    def tree_counters(self, pid: int, threads: bool = True) -> ProcCounters:
        if process_cpu_s(pid) is None:  # the tree's root is gone: not a tree of nothing
            raise ProcessLookupError(pid)
        return tree_counters(pid, threads)

    def rss_sampler(self, pid: int, tree: bool = False) -> RssSampler:
        return TreeSampler(pid) if tree else RssSampler(pid)


HERE = Here()
