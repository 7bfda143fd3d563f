"""PostgreSQL's own I/O counters for [observe] io (observers/io.py), once a second.

    counters(server) -> {"pg.checkpoints": 3.0, "pg.buffers_checkpoint": 81920.0, "pg.wal_bytes": 1.3e9, ...}

From pg_stat_bgwriter (checkpoints timed and requested, buffers written by checkpoints, by the
background writer and by backends, backends' own fsyncs) and pg_stat_wal (WAL records, full-page
images, bytes, writes and syncs). Every figure is a counter.

PostgreSQL 15's cumulative statistics are kept by each process and flushed to shared memory at
most once a second (PGSTAT_MIN_INTERVAL, 1000 ms; an idle backend after up to 10 s), and the
checkpointer adds a checkpoint's buffers as it reports them: so a per-second figure can hold up
to a second of the previous second's work, and a checkpoint's writes can land in one second
(docs/storage.md). Sum over a few seconds, or over the window, for exact figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perflab.errors import PerflabError

if TYPE_CHECKING:
    from perflab.servers.managed import Managed

# the variants that measure durability: on tmpfs they measure nothing of the disk (a warning)
DURABILITY_OPTIONS = ("fsync", "synchronous_commit", "full_page_writes", "wal_compression", "checkpoint_timeout",
                      "max_wal_size", "wal_sync_method", "commit_delay", "wal_buffers", "wal_writer_delay",
                      "checkpoint_completion_target")  # fmt: skip
BGWRITER = ("checkpoints_timed", "checkpoints_req", "buffers_checkpoint", "buffers_clean", "buffers_backend",
            "buffers_backend_fsync")  # fmt: skip
WAL = ("wal_records", "wal_fpi", "wal_bytes", "wal_write", "wal_sync")
QUERY = (
    "SELECT " + ", ".join(f"b.{c}" for c in BGWRITER) + ", " + ", ".join(f"w.{c}" for c in WAL)
    + ", current_setting('block_size') FROM pg_stat_bgwriter b, pg_stat_wal w"
)  # fmt: skip


def parse(text: str) -> dict[str, float]:
    """psql -At's one row (`|`-separated, in QUERY's order) -> perflab's names; bytes for buffers."""
    fields = text.strip().split("|")
    if len(fields) != len(BGWRITER) + len(WAL) + 1:
        return {}
    values = dict(zip([*BGWRITER, *WAL, "block_size"], (float(f) for f in fields), strict=True))
    block = values.pop("block_size")
    out = {f"pg.{name}": value for name, value in values.items()}
    out["pg.checkpoints"] = values["checkpoints_timed"] + values["checkpoints_req"]
    out["pg.checkpoint_write_bytes"] = values["buffers_checkpoint"] * block
    return out


def counters(server: Managed) -> dict[str, float]:
    """The counters now ({} when the server does not answer: the sampler goes on without them)."""
    try:
        return parse(server.sql(QUERY))
    except (PerflabError, ValueError):
        return {}
