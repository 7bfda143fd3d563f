"""The I/O counters of a server of MySQL's protocol (MariaDB, MySQL: servers/mysqld.py) for
[observe] io (observers/io.py), once a second.

    counters(server) -> {"innodb.log_bytes_written": 1.2e9, "innodb.checkpoint_age": 3.1e7,
                         "innodb.pages_flushed": 52000.0, "innodb.pages_dirty": 812.0, ...}

Counters grow (`log_bytes_written`, `pages_flushed`, `data_fsyncs`, `data_written`); levels
(`checkpoint_age`, `pages_dirty`) are the value now. Innodb_checkpoint_age is MariaDB's; MySQL
has none, so there it is the redo LSN minus the last checkpoint's where both are shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perflab.errors import PerflabError

if TYPE_CHECKING:
    from perflab.servers.managed import Managed

# the variants that measure durability: on tmpfs they measure nothing of the disk (a warning)
DURABILITY_OPTIONS = (
    "innodb_flush_log_at_trx_commit",
    "log_bin",
    "sync_binlog",
    "innodb_doublewrite",
    "innodb_flush_method",
    "innodb_use_atomic_writes",
    "innodb_flush_neighbors",
    "innodb_io_capacity",
    "innodb_log_file_size",
    "innodb_redo_log_capacity",
)
STATUS = {
    "Innodb_os_log_written": "innodb.log_bytes_written",
    "Innodb_checkpoint_age": "innodb.checkpoint_age",
    "Innodb_buffer_pool_pages_flushed": "innodb.pages_flushed",
    "Innodb_buffer_pool_pages_dirty": "innodb.pages_dirty",
    "Innodb_data_fsyncs": "innodb.data_fsyncs",
    "Innodb_data_written": "innodb.data_written",
    "Innodb_lsn_current": "innodb.lsn_current",
    "Innodb_lsn_last_checkpoint": "innodb.lsn_last_checkpoint",
    "Binlog_bytes_written": "binlog.bytes_written",
    "Innodb_page_size": "innodb.page_size",
}
QUERY = "SHOW GLOBAL STATUS WHERE Variable_name IN (" + ", ".join(f"'{n}'" for n in STATUS) + ")"


def parse(text: str) -> dict[str, float]:
    """`SHOW GLOBAL STATUS` rows (name TAB value) -> perflab's names; what is not a number is left out."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition("\t")
        if name in STATUS:
            try:
                out[STATUS[name]] = float(value)
            except ValueError:
                continue
    if "innodb.checkpoint_age" not in out and {"innodb.lsn_current", "innodb.lsn_last_checkpoint"} <= out.keys():
        out["innodb.checkpoint_age"] = out["innodb.lsn_current"] - out["innodb.lsn_last_checkpoint"]
    for lsn in ("innodb.lsn_current", "innodb.lsn_last_checkpoint"):  # only for the age
        out.pop(lsn, None)
    return out


def counters(server: Managed) -> dict[str, float]:
    """The counters now ({} when the server does not answer: the sampler goes on without them)."""
    try:
        return parse(server.sql(QUERY))
    except PerflabError:
        return {}
