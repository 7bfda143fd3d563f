"""results.db's tables (store/results.py reads and writes them), their version, and the upgrade of
an older directory in place when it is opened.

Schema version history (`meta.schema_version`):
  1  first version: meta, cells, intervals, rss_samples.
  2  steady state per cell: cells.warmup_s is now the *detected* end of the warm-up, with
     warmup_method, window_start_s (where the measured window began), settled,
     unsettled_reason, stalls (JSON) and steady (JSON); backtrace of a crashed server. A version 1 directory is upgraded
     in place when opened (columns added; its cells keep NULL there, and readers detect
     their steady state from the stored intervals).
  3  cells.alloc (JSON): what the server asked of its allocator per transaction, with
     [observe] alloc (observers/alloc/tracer.py). Older directories are upgraded in place
     (the column added, NULL).
  4  cells.build (JSON): the server binary the cell ran (a [builds] entry or the installed
     package): name, binary, sha256, version, compiler, kind, recipe. Upgraded in place (NULL).
  5  the client and the server's counters: cells.client (JSON: the client's preload, library,
     env, RSS, faults and switches per transaction), cells.server_status (JSON, [observe]
     status: counters per transaction, gauges' window means) and the table status_samples
     (one row per counter per sample). Upgraded in place (NULL columns, an empty table).
  6  profiles per target and phase: profiles.target (server | client: whose stacks) joins the
     key (cell_id, source, phase, target); phase is measured (the window), warmup (from the
     workload's start to the window) or stall (the seconds of the cell's detected stalls).
     Upgraded in place: the profiles table is rebuilt, its rows get target = 'server'.
  7  cells.host_speed (JSON, [observe] host_speed: the canary's CPU ns for a fixed piece of work
     over the window, its median, spread and per-second medians; observers/host_speed.py),
     the verdicts' covariate (analyze/host_speed.py). Upgraded in place (NULL).
  8  cells.design (JSON, experiment.design = "interleaved"; NULL: the sequential design): how the
     cell ran beside the others of its round and thread count: {name, slice_s, group (their ids),
     turn, active_s, warning} (run/interleave.py). Upgraded in place (NULL).
  9  cells.retry_of: the id of the cell this one measures again (a cell that failed or did not
     settle is run once more, after its round: run/scheduler.py); NULL for a first measurement.
     The analysis uses the retry in place of the cell it names. Upgraded in place (NULL).
 10  meta.server_facts (JSON): what the reports need of the run's server kind, so that report/,
     analyze/ and history/ never ask a server package (issue 47): {kind, title, memory_figure,
     host_field, short_version, interleaved_refusal, durability_options}. Upgraded in place: an
     older directory gets the facts its kind had when version 10 came (FACTS_BEFORE_10).

    upgrade(db, path)   # a version 1..9 database becomes version 10; a newer or unknown one is refused
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from perflab.errors import ResultsFormatError

SCHEMA_VERSION = 10

TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cells (
    id INTEGER PRIMARY KEY,            -- the cell's position in the run order, from 0
    key TEXT NOT NULL UNIQUE,          -- axis=label,.../tN/rN
    variant TEXT NOT NULL,             -- JSON axis -> label
    threads INTEGER NOT NULL,
    repeat INTEGER NOT NULL,
    status TEXT NOT NULL,              -- ok | failed
    error TEXT,
    log_tail TEXT,
    backtrace TEXT,                    -- the server's own stack trace from its error log, if it crashed
    started_at TEXT, ended_at TEXT,
    preload TEXT, allocator_library TEXT, allocator_version TEXT,
    env TEXT NOT NULL, server_options TEXT NOT NULL, pinning TEXT,
    warmup_s REAL,                     -- detected end of the warm-up, s since the workload started
    warmup_method TEXT,                -- mser-5 | mser-1 | none
    window_start_s REAL,               -- where the measured window began (configured)
    settled INTEGER,                   -- 1: the warm-up ended before the window (a drift in it: steady.drift)
    unsettled_reason TEXT,
    stalls TEXT,                       -- JSON [{start_s, end_s, min_qps, kind}]
    steady TEXT,                       -- JSON {qps_mean, qps_ci_low, qps_ci_high, cv, batch_s, seconds}
    summary TEXT,                      -- JSON, sysbench summary of the measured window
    resources TEXT,                    -- JSON, see docs/results-format.md
    sysbench_options TEXT,             -- JSON, every effective option, defaults included
    alloc TEXT,                        -- JSON, [observe] alloc: calls, bytes, syscalls per transaction
    build TEXT,                        -- JSON, the server binary: name, binary, sha256, version, compiler, recipe
    client TEXT,                       -- JSON, the workload client: preload, library, RSS, faults, switches
    server_status TEXT,                -- JSON, [observe] status: per_txn, gauges, samples, window_s
    host_speed TEXT,                   -- JSON, [observe] host_speed: work_ns, samples, spread, seconds
    design TEXT,                       -- JSON, design = "interleaved": slice_s, group, turn, active_s, warning
    retry_of INTEGER                   -- the id of the failed or unsettled cell this one measures again
);
CREATE TABLE IF NOT EXISTS intervals (
    cell_id INTEGER NOT NULL REFERENCES cells(id),
    t REAL NOT NULL,                   -- seconds since the cell's workload started
    warmup INTEGER NOT NULL,
    tps REAL, qps REAL, reads REAL, writes REAL, other REAL,
    p95_ms REAL, errors_per_s REAL, reconnects_per_s REAL,
    PRIMARY KEY (cell_id, t)
);
CREATE TABLE IF NOT EXISTS rss_samples (
    cell_id INTEGER NOT NULL REFERENCES cells(id),
    t REAL NOT NULL,                   -- seconds since the measured window started
    rss_bytes INTEGER NOT NULL
);
"""
STATUS_TABLE = """
CREATE TABLE IF NOT EXISTS status_samples (
    cell_id INTEGER NOT NULL REFERENCES cells(id),
    t REAL NOT NULL,                   -- seconds since the measured window started
    name TEXT NOT NULL,                -- a SHOW GLOBAL STATUS name, or INNODB_METRICS.<name>
    value REAL NOT NULL,
    PRIMARY KEY (cell_id, t, name)
)"""

JSON_COLUMNS = (
    "variant",
    "env",
    "server_options",
    "pinning",
    "summary",
    "resources",
    "sysbench_options",
    "stalls",
    "steady",
    "alloc",
    "build",
    "client",
    "server_status",
    "host_speed",
    "design",
)
_V9_COLUMNS = ("retry_of INTEGER",)
_V8_COLUMNS = ("design TEXT",)
_V7_COLUMNS = ("host_speed TEXT",)
_V5_COLUMNS = ("client TEXT", "server_status TEXT")
_V4_COLUMNS = ("build TEXT",)
_V3_COLUMNS = ("alloc TEXT",)
_V2_COLUMNS = (
    "backtrace TEXT",
    "warmup_method TEXT",
    "window_start_s REAL",
    "settled INTEGER",
    "unsettled_reason TEXT",
    "stalls TEXT",
    "steady TEXT",
)

PROFILES_TABLE = """
CREATE TABLE IF NOT EXISTS profiles (
    cell_id INTEGER NOT NULL,          -- cells.id
    source TEXT NOT NULL,              -- perf | pmp | alloc
    phase TEXT NOT NULL,               -- measured (the window the cell's figures cover) | warmup | stall
    target TEXT NOT NULL DEFAULT 'server',  -- server | client (sysbench): whose stacks
    path TEXT NOT NULL,                -- folded stacks, relative to the results directory
    samples INTEGER NOT NULL,          -- stacks sampled (pmp: thread stacks)
    seconds REAL NOT NULL,             -- how long the profiler ran
    transactions REAL,                 -- the cell's transactions over the profile's span (its phase)
    window_transactions INTEGER,       -- sysbench's count over the whole measured window
    frequency_hz REAL,                 -- perf: samples per second per CPU
    interval_s REAL,                   -- pmp: seconds between samples
    call_graph TEXT,                   -- perf: fp | dwarf; pmp: libdw | eu-stack
    quality TEXT,                      -- JSON: stack quality and what to do about it
    top TEXT,                          -- JSON: top functions by self samples per transaction
    PRIMARY KEY (cell_id, source, phase, target)
)"""
PROFILE_COLUMNS = (
    "cell_id",
    "source",
    "phase",
    "target",
    "path",
    "samples",
    "seconds",
    "transactions",
    "window_transactions",
    "frequency_hz",
    "interval_s",
    "call_graph",
    "quality",
    "top",
)


def create(path: Path) -> None:
    """A new, empty results database at `path`, which appears whole: its schema is written beside it
    and renamed into place, so a reader polling the directory (`perflab status`, a script, a test)
    never opens a database that has no tables yet."""
    fresh = not path.exists()  # else (a caller that checked nothing) the schema is completed in place
    scratch = path.with_name(path.name + ".new") if fresh else path
    if fresh:
        for leftover in (scratch, *(scratch.with_name(scratch.name + s) for s in ("-wal", "-shm", "-journal"))):
            leftover.unlink(missing_ok=True)
    db = sqlite3.connect(scratch, isolation_level=None)
    try:
        db.executescript(TABLES + STATUS_TABLE)
        db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (json.dumps(SCHEMA_VERSION),)
        )
    finally:
        db.close()
    if fresh:
        os.replace(scratch, path)


def upgrade(db: sqlite3.Connection, path: Path) -> None:
    """Bring the database at `path` (open as `db`) to SCHEMA_VERSION, one version a step, each in one
    transaction; ResultsFormatError for a version this perflab cannot read."""
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    version = json.loads(row[0]) if row else None
    if version == 1:
        _add_columns(db, _V2_COLUMNS, 2, "UPDATE cells SET window_start_s = warmup_s")
        version = 2
    if version == 2:
        _add_columns(db, _V3_COLUMNS, 3)
        version = 3
    if version == 3:
        _add_columns(db, _V4_COLUMNS, 4)
        version = 4
    if version == 4:
        _add_columns(db, _V5_COLUMNS, 5, STATUS_TABLE)
        version = 5
    if version == 5:
        _add_columns(db, (), 6, *_profiles_upgrade(db))
        version = 6
    if version == 6:
        _add_columns(db, _V7_COLUMNS, 7)
        version = 7
    if version == 7:
        _add_columns(db, _V8_COLUMNS, 8)
        version = 8
    if version == 8:
        _add_columns(db, _V9_COLUMNS, 9)
        version = 9
    if version == 9:
        _add_columns(db, (), 10, *_facts_upgrade(db))
        version = SCHEMA_VERSION
    if version != SCHEMA_VERSION:
        raise ResultsFormatError(
            f"{path}: results schema version {version!r}, this perflab reads {SCHEMA_VERSION}",
            "use the perflab version that wrote it",
        )


def _add_columns(
    db: sqlite3.Connection, columns: tuple[str, ...], version: int = SCHEMA_VERSION, *statements: str
) -> None:
    """One upgrade step, in one transaction: the columns, then `statements`, then the version."""
    with db:
        db.execute("BEGIN IMMEDIATE")
        have = {row[1] for row in db.execute("PRAGMA table_info(cells)")}
        for column in columns:
            if column.split()[0] not in have:  # a directory some later step already gave it
                db.execute(f"ALTER TABLE cells ADD COLUMN {column}")
        for statement in statements:
            db.execute(statement)
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (json.dumps(version),))


def _profiles_upgrade(db: sqlite3.Connection) -> tuple[str, ...]:
    """Schema 6 keys profiles by target too: SQLite cannot change a primary key, so the table
    is rebuilt (its rows are the server's: version 5 profiled nothing else)."""
    if not has_profiles(db):
        return ()
    columns = ", ".join(c for c in PROFILE_COLUMNS if c != "target")
    return (
        "DROP VIEW IF EXISTS profile_top_flat",
        "ALTER TABLE profiles RENAME TO profiles_v5",
        PROFILES_TABLE,
        f"INSERT INTO profiles ({columns}, target) SELECT {columns}, 'server' FROM profiles_v5",
        "DROP TABLE profiles_v5",
    )


def has_profiles(db: sqlite3.Connection) -> bool:
    return bool(db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'profiles'").fetchone())


# The server kinds' facts as they were when schema 10 came (2026-11-28): an older directory's meta gets
# its kind's (servers/*: Kind.facts). Frozen here: a later change to a kind must not rewrite old results.
_MYSQL_DURABILITY = [
    "innodb_flush_log_at_trx_commit", "log_bin", "sync_binlog", "innodb_doublewrite", "innodb_flush_method",
    "innodb_use_atomic_writes", "innodb_flush_neighbors", "innodb_io_capacity", "innodb_log_file_size",
    "innodb_redo_log_capacity",
]  # fmt: skip
FACTS_BEFORE_10: dict[str, dict[str, Any]] = {
    "mariadb": {"kind": "mariadb", "title": "MariaDB", "memory_figure": "RSS", "host_field": "mariadbd",
                "interleaved_refusal": None, "durability_options": _MYSQL_DURABILITY, "short": "mariadbd"},
    "mysql": {"kind": "mysql", "title": "MySQL", "memory_figure": "RSS", "host_field": "mysqld",
              "interleaved_refusal": None, "durability_options": _MYSQL_DURABILITY, "short_version": "MySQL builds"},
    "postgresql": {"kind": "postgresql", "title": "PostgreSQL", "memory_figure": "PSS", "host_field": "postgres",
                   "interleaved_refusal": None, "durability_options": [
                       "fsync", "synchronous_commit", "full_page_writes", "wal_compression", "checkpoint_timeout",
                       "max_wal_size", "wal_sync_method", "commit_delay", "wal_buffers", "wal_writer_delay",
                       "checkpoint_completion_target"]},
}  # fmt: skip


def facts_before_10(meta: dict[str, Any]) -> dict[str, Any]:
    """The server facts of a run recorded before schema 10, from its meta (experiment.server, host)."""
    facts = dict(FACTS_BEFORE_10.get((meta.get("experiment") or {}).get("server") or "", FACTS_BEFORE_10["mariadb"]))
    text = str((meta.get("host") or {}).get(facts["host_field"]) or facts["host_field"])
    words, short = text.split(), facts.pop("short", None)  # MariaDB's subtitle was "mariadbd VERSION"
    if "short_version" not in facts:  # MySQL's: "MySQL builds" (no installed server)
        facts["short_version"] = f"{short} {words[words.index('Ver') + 1]}" if short and "Ver" in words[:-1] else text
    return facts


def _facts_upgrade(db: sqlite3.Connection) -> tuple[str, ...]:
    meta = {key: json.loads(value) for key, value in db.execute("SELECT key, value FROM meta")}
    if "server_facts" in meta or "experiment" not in meta:
        return ()
    value = json.dumps(facts_before_10(meta)).replace("'", "''")
    return (f"INSERT OR REPLACE INTO meta(key, value) VALUES ('server_facts', '{value}')",)
