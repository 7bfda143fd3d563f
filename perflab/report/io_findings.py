"""The storage's findings: durability variants measured on tmpfs, and what the I/O did in a stall.

Input: the run's meta (`storage`, the experiment's server) and cells (their server_options, and
each stall's `io`: what grew in it, observers/io.py). Output: Findings for report/findings.py,
and the phrase a stall finding ends with:

    stall_phrase({"pg.checkpoints": 1, "pg.checkpoint_write_bytes": 1.29e9, "sys.fdatasync": 340})
    -> "; in it a checkpoint wrote 1.2 GiB, 340 fdatasync calls"
"""

from __future__ import annotations

from typing import Any

from perflab.units import format_bytes
from perflab.store.results import server_facts

REMEDY = 'Remedy: storage = "/a/directory/on/disk" under [experiment] (`perflab docs storage`)'


def storage_phrase(meta: dict[str, Any]) -> str:
    """Where a run's datadirs lived when not on tmpfs, for the reports' headers: "" on tmpfs (and
    for runs older than `storage`)."""
    st = meta.get("storage") or {}
    if not st.get("on_disk"):
        return ""
    scheduler = f", {st['scheduler']}" if st.get("scheduler") else ""
    return f"{st.get('path')} ({st.get('fstype')} on {st.get('device')}{scheduler})"


def durability_text(names: list[str], where: str) -> str:
    """The warning for durability options measured on a memory filesystem (also printed by `run`)."""
    return (
        f"durability variant on {where}: {', '.join(names)} decide what reaches the disk and when, and a "
        f"memory filesystem has no disk: the variants measure only their CPU cost. {REMEDY}"
    )


def durability_names(durability: list[str], option_sets: list[dict[str, Any]]) -> list[str]:
    """The durability options (`durability`: the server kind's, Kind.durability_options) that any of
    `option_sets` sets."""
    known = set(durability)
    found = {name for options in option_sets for name in options if name.replace("-", "_").lower() in known}
    return sorted(found)


def durability_findings(cells: list[dict[str, Any]], meta: dict[str, Any]) -> list[Any]:
    from perflab.report.finding import Finding

    storage = meta.get("storage") or {}
    if storage.get("on_disk"):
        return []
    durability = server_facts(meta)["durability_options"]
    names = durability_names(durability, [c.get("server_options") or {} for c in cells])
    if not names:
        return []
    ids = tuple(c["id"] for c in cells if set(c.get("server_options") or {}) & set(names))
    return [Finding("warning", "durability", durability_text(names, storage.get("fstype") or "tmpfs"), ids)]


def stall_phrase(io: dict[str, float] | None) -> str:
    """What the storage and the server did in a stall, biggest first; "" when nothing was recorded."""
    if not io:
        return ""
    parts = []
    if io.get("pg.checkpoints"):
        n = int(io["pg.checkpoints"])
        what = "a checkpoint" if n == 1 else f"{n} checkpoints"
        wrote = io.get("pg.checkpoint_write_bytes")
        parts.append(f"{what} wrote {format_bytes(wrote)}" if wrote else f"{what} ran")
    elif io.get("pg.checkpoint_write_bytes"):
        parts.append(f"checkpoints wrote {format_bytes(io['pg.checkpoint_write_bytes'])}")
    if io.get("innodb.checkpointed_bytes"):
        parts.append(f"InnoDB's checkpoint advanced over {format_bytes(io['innodb.checkpointed_bytes'])} of redo")
    if io.get("innodb.flushed_bytes"):
        parts.append(f"InnoDB flushed {format_bytes(io['innodb.flushed_bytes'])} of pages")
    for key, what in (("innodb.log_bytes_written", "redo log"), ("pg.wal_bytes", "WAL")):
        if io.get(key):
            parts.append(f"{format_bytes(io[key])} of {what}")
    for key, what in (("disk.write_bytes", "the disk wrote"), ("disk.read_bytes", "the disk read")):
        if io.get(key):
            parts.append(f"{what} {format_bytes(io[key])}")
    for name in ("fsync", "fdatasync"):
        if io.get(f"sys.{name}"):
            calls = int(io[f"sys.{name}"])
            parts.append(f"{calls} {name} call{'s' if calls != 1 else ''}")
    return "; in it " + ", ".join(parts) if parts else ""
