"""Comparisons across hosts (a host axis, docs/hosts.md): their own Holm family, judged only after
an A/A check on each host.

A comparison whose two sides' servers ran on different hosts measures the hosts as much as the
variants, and a host can be unstable on its own (a neighbour, a governor, a thermal limit) in a
way no comparison within it shows. So each side first passes an A/A check on its host: the
same cells, the same configuration on the same host, split into its earlier and its later rounds
(Welch), must not differ by more than the equivalence margin beyond noise (the interval of their
ratio wholly outside ±margin). A significant difference alone would not do: a real drift of 1%
is significant after enough rounds, and a 95% test of each group checked fails one in twenty of
stable ones by chance (a synthetic run with 1% noise failed a stable host so). A side with
fewer than 3 settled rounds in each half (6 in all: perflab gives no interval on fewer than 3
values) cannot be checked: the comparison stays inconclusive and says how many rounds it needs.
Comparisons that pass are judged in a family of their own (Holm over the comparisons across
hosts of one metric and kind), apart from those within a host.

    aa_check(group, "qps")   -> None (passed) or why not ("host db2: its earlier rounds 0.91 ...")
"""

from __future__ import annotations

import dataclasses
from typing import Any

from perflab.analyze import ratio, stats
from perflab.analyze.summary import Group, rounds
from perflab.analyze.verdict import MARGIN

HERE = "this machine"
PASSED = "passed"
MIN_HALF = stats.MIN_REPEATS  # settled rounds in each half: perflab gives no interval on fewer


def host_of(cell: dict[str, Any]) -> str:
    """Where a cell's server ran: the name of its server host (`build.host`), else this machine."""
    return ((cell.get("build") or {}).get("host") or {}).get("name") or HERE


def group_host(group: Group) -> str | None:
    """The one host of a group's cells (None: no settled cell, or cells on several hosts)."""
    hosts = {host_of(c) for c in group.cells}
    return hosts.pop() if len(hosts) == 1 else None


def across(base: Group, other: Group) -> bool:
    """Do the two sides' servers run on different hosts?"""
    a, b = group_host(base), group_host(other)
    return a is not None and b is not None and a != b


def aa_check(group: Group, metric: str, level: float = stats.LEVEL, margin: float = MARGIN) -> str | None:
    """None when the group's earlier and later rounds agree on its host; else why it does not pass."""
    host = group_host(group) or "?"
    values = [v for _, v in sorted(rounds(group, metric).items())]
    if len(values) < 2 * MIN_HALF:
        return (
            f"A/A check on host {host}: {len(values)} settled round(s) of {group.label}, it needs "
            f"{2 * MIN_HALF} (its earlier against its later rounds)"
        )
    half = len(values) // 2
    found = ratio.welch(values[:half], values[half:], level, ratio.resolution_of(metric))
    if found.low is None or found.high is None:
        return f"A/A check on host {host}: no interval for {group.label} (a value <= 0)"
    if found.low > 1 + margin or found.high < 1 - margin:
        return (
            f"A/A check on host {host}: {group.label}'s later rounds differ from its earlier ones by more "
            f"than ±{margin:.0%} ({found.ratio:.3f} [{found.low:.3f}, {found.high:.3f}]): the host is not "
            "stable enough to compare"
        )
    return None


def checks(base: Group, other: Group, metric: str, level: float = stats.LEVEL, margin: float = MARGIN) -> list[str]:
    """Why a comparison across hosts cannot be judged yet ([]: both sides pass their A/A check)."""
    return [why for why in (aa_check(base, metric, level, margin), aa_check(other, metric, level, margin)) if why]


def marked(row: Any, base: Group, other: Group, level: float = stats.LEVEL) -> Any:
    """A Comparison `row` of `base` against `other`, marked when it runs across hosts: its A/A
    check "passed", or why not (then judged() leaves it inconclusive, out of its family)."""
    if not across(base, other):
        return row
    why = checks(base, other, row.metric, level, row.margin)
    return dataclasses.replace(row, across_hosts=True, aa_check="; ".join(why) if why else PASSED)
