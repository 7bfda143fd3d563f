"""The results directory: results.db (SQLite, WAL) plus logs/, read and written only here.

Schema version history (`meta.schema_version`):
  1  first version: meta, cells, intervals, rss_samples.
  2  steady state per cell: cells.warmup_s is now the *detected* end of the warm-up, with
     warmup_method, window_start_s (where the measured window began), settled,
     unsettled_reason, stalls (JSON) and steady (JSON); backtrace of a crashed server. A version 1 directory is upgraded
     in place when opened (columns added; its cells keep NULL there, and readers detect
     their steady state from the stored intervals).
  3  cells.alloc (JSON): what the server asked of its allocator per transaction, with
     [observe] alloc (run/observers/alloc/tracer.py). Older directories are upgraded in place
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
     over the window, its median, spread and per-second medians; run/observers/host_speed.py),
     the verdicts' covariate (analyze/host_speed.py). Upgraded in place (NULL).
  8  cells.design (JSON, experiment.design = "interleaved"; NULL: the sequential design): how the
     cell ran beside the others of its round and thread count: {name, slice_s, group (their ids),
     turn, active_s, warning} (run/interleave.py). Upgraded in place (NULL).
  9  cells.retry_of: the id of the cell this one measures again (a cell that failed or did not
     settle is run once more, after its round: run/scheduler.py); NULL for a first measurement.
     The analysis uses the retry in place of the cell it names. Upgraded in place (NULL).

A cell is written in one transaction when it ends, so a killed run loses at most the cell in
flight. Readers get plain dicts; the JSON export (report/export.py) is built from them.
SQL views that flatten the JSON columns (cells_flat, seconds_flat, ...: store/views.py) are
derived from the tables and refreshed on open; they do not change the schema version.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from perflab.errors import ResultsFormatError
from perflab.store import views

SCHEMA_VERSION = 9
DB_NAME = "results.db"

_SCHEMA = """
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
    settled INTEGER,                   -- 1: the warm-up ended before the window, no drift in it
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
_STATUS_SCHEMA = """
CREATE TABLE IF NOT EXISTS status_samples (
    cell_id INTEGER NOT NULL REFERENCES cells(id),
    t REAL NOT NULL,                   -- seconds since the measured window started
    name TEXT NOT NULL,                -- a SHOW GLOBAL STATUS name, or INNODB_METRICS.<name>
    value REAL NOT NULL,
    PRIMARY KEY (cell_id, t, name)
)"""

_JSON_COLUMNS = (
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


def _create(path: Path) -> None:
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
        db.executescript(_SCHEMA + _STATUS_SCHEMA)
        db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (json.dumps(SCHEMA_VERSION),)
        )
    finally:
        db.close()
    if fresh:
        os.replace(scratch, path)


class Results:
    """A results directory opened for reading or writing."""

    def __init__(self, directory: Path, *, create: bool = False) -> None:
        self.dir = Path(directory)
        path = self.dir / DB_NAME
        if not create and not path.is_file():
            raise ResultsFormatError(f"{self.dir}: no {DB_NAME} here", "pass the directory `perflab run -o` wrote")
        if create:
            (self.dir / "logs").mkdir(parents=True, exist_ok=True)
            _create(path)
        self.db = sqlite3.connect(path, isolation_level=None)  # explicit transactions only
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        if not create:
            version = self.meta().get("schema_version")
            if version == 1:
                self._upgrade_from_1()
                version = 2
            if version == 2:
                self._add_columns(_V3_COLUMNS, 3)
                version = 3
            if version == 3:
                self._add_columns(_V4_COLUMNS, 4)
                version = 4
            if version == 4:
                self._add_columns(_V5_COLUMNS, 5, _STATUS_SCHEMA)
                version = 5
            if version == 5:
                self._add_columns((), 6, *self._profiles_upgrade())
                version = 6
            if version == 6:
                self._add_columns(_V7_COLUMNS, 7)
                version = 7
            if version == 7:
                self._add_columns(_V8_COLUMNS, 8)
                version = 8
            if version == 8:
                self._add_columns(_V9_COLUMNS, 9)
                version = SCHEMA_VERSION
            if version != SCHEMA_VERSION:
                raise ResultsFormatError(
                    f"{path}: results schema version {version!r}, this perflab reads {SCHEMA_VERSION}",
                    "use the perflab version that wrote it",
                )
            self.refresh_views()

    def _upgrade_from_1(self) -> None:
        """Version 1 stored the configured warm-up in warmup_s: it becomes window_start_s."""
        self._add_columns(_V2_COLUMNS, 2, "UPDATE cells SET window_start_s = warmup_s")

    def _add_columns(self, columns: tuple[str, ...], version: int = SCHEMA_VERSION, *statements: str) -> None:
        """One upgrade step, in one transaction: the columns, then `statements`, then the version."""
        with self.db:
            self.db.execute("BEGIN")
            have = {row[1] for row in self.db.execute("PRAGMA table_info(cells)")}
            for column in columns:
                if column.split()[0] not in have:  # a directory some later step already gave it
                    self.db.execute(f"ALTER TABLE cells ADD COLUMN {column}")
            for statement in statements:
                self.db.execute(statement)
            self.db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (json.dumps(version),)
            )

    def _profiles_upgrade(self) -> tuple[str, ...]:
        """Schema 6 keys profiles by target too: SQLite cannot change a primary key, so the table
        is rebuilt (its rows are the server's: version 5 profiled nothing else)."""
        if not self._has_profiles():
            return ()
        columns = ", ".join(c for c in _PROFILE_COLUMNS if c != "target")
        return (
            "DROP VIEW IF EXISTS profile_top_flat",
            "ALTER TABLE profiles RENAME TO profiles_v5",
            _PROFILES_SCHEMA,
            f"INSERT INTO profiles ({columns}, target) SELECT {columns}, 'server' FROM profiles_v5",
            "DROP TABLE profiles_v5",
        )

    def _has_profiles(self) -> bool:
        return bool(
            self.db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'profiles'").fetchone()
        )

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Results:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def log_dir(self, cell_id: int) -> Path:
        path = self.dir / "logs" / f"cell-{cell_id:04d}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def set_meta(self, **values: Any) -> None:
        with self.db:
            self.db.execute("BEGIN")
            for key, value in values.items():
                self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))
        if "experiment" in values:
            self.refresh_views()

    def refresh_views(self) -> None:
        """(Re)create the flattened SQL views (store/views.py) for this run's axes."""
        axes = (self.meta().get("experiment") or {}).get("axes") or {}
        views.refresh(self.db, list(axes))

    def meta(self) -> dict[str, Any]:
        return {row["key"]: json.loads(row["value"]) for row in self.db.execute("SELECT key, value FROM meta")}

    def commit_cell(
        self,
        cell: dict[str, Any],
        intervals: list[dict[str, Any]],
        rss_samples: list[tuple[float, int]],
        status_samples: list[tuple[float, dict[str, float]]] = (),
    ) -> None:
        """Store one finished cell (ok or failed) with its series, atomically."""
        self.commit_cells([(cell, intervals, rss_samples, status_samples)])

    def commit_cells(self, cells: list[tuple[dict[str, Any], list, list, Any]]) -> None:
        """Store finished cells with their series in one transaction: all or none (an interleaved
        group, whose cells pair only with each other: a resume must not find half of it)."""
        with self.db:
            self.db.execute("BEGIN")
            for cell, intervals, rss_samples, status_samples in cells:
                self._insert(cell, intervals, rss_samples, status_samples)

    def _insert(
        self,
        cell: dict[str, Any],
        intervals: list[dict[str, Any]],
        rss_samples: list[tuple[float, int]],
        status_samples: Any = (),
    ) -> None:
        row = {k: (json.dumps(v) if k in _JSON_COLUMNS and v is not None else v) for k, v in cell.items()}
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self.db.execute("DELETE FROM intervals WHERE cell_id = ?", (cell["id"],))
        self.db.execute("DELETE FROM rss_samples WHERE cell_id = ?", (cell["id"],))
        self.db.execute("DELETE FROM status_samples WHERE cell_id = ?", (cell["id"],))
        self.db.execute(f"INSERT OR REPLACE INTO cells ({columns}) VALUES ({marks})", list(row.values()))
        self.db.executemany(
            "INSERT INTO intervals (cell_id, t, warmup, tps, qps, reads, writes, other, p95_ms,"
            " errors_per_s, reconnects_per_s) VALUES (:cell_id, :t, :warmup, :tps, :qps, :reads,"
            " :writes, :other, :p95_ms, :errors_per_s, :reconnects_per_s)",
            [{"cell_id": cell["id"], **iv} for iv in intervals],
        )
        self.db.executemany(
            "INSERT INTO rss_samples (cell_id, t, rss_bytes) VALUES (?, ?, ?)",
            [(cell["id"], t, v) for t, v in rss_samples],
        )
        self.db.executemany(
            "INSERT INTO status_samples (cell_id, t, name, value) VALUES (?, ?, ?, ?)",
            [(cell["id"], t, name, v) for t, values in status_samples for name, v in values.items()],
        )

    def cells(self) -> list[dict[str, Any]]:
        out = []
        for row in self.db.execute("SELECT * FROM cells ORDER BY id"):
            cell = dict(row)
            for key in _JSON_COLUMNS:
                if cell.get(key) is not None:
                    cell[key] = json.loads(cell[key])
            out.append(cell)
        return out

    def intervals(self, cell_id: int) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT * FROM intervals WHERE cell_id = ? ORDER BY t", (cell_id,))
        return [{k: row[k] for k in row.keys() if k != "cell_id"} for row in rows]

    def rss_samples(self, cell_id: int) -> list[tuple[float, int]]:
        rows = self.db.execute("SELECT t, rss_bytes FROM rss_samples WHERE cell_id = ? ORDER BY t", (cell_id,))
        return [(row[0], row[1]) for row in rows]

    def status_samples(self, cell_id: int) -> list[tuple[float, dict[str, float]]]:
        """[observe] status: the cell's samples, [(t, {name: value})], in time order."""
        series: dict[float, dict[str, float]] = {}
        rows = self.db.execute("SELECT t, name, value FROM status_samples WHERE cell_id = ? ORDER BY t", (cell_id,))
        for t, name, value in rows:
            series.setdefault(t, {})[name] = value
        return list(series.items())

    # ------------------------------------------------------------------ profiles
    # Rows reference folded-stack files under DIR/profiles/ (format: store/folded.py). The
    # table is created with the first profile, so results without profiles read as before.

    def commit_profile(self, row: dict[str, Any]) -> None:
        """Store (or replace) the reference to one cell's profile: keys of _PROFILE_COLUMNS."""
        values = {k: (json.dumps(row.get(k)) if k in ("quality", "top") else row.get(k)) for k in _PROFILE_COLUMNS}
        values["target"] = values["target"] or "server"
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute(_PROFILES_SCHEMA)
            self.db.execute(
                f"INSERT OR REPLACE INTO profiles ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
                list(values.values()),
            )
        self.refresh_views()  # the first profile adds profile_top_flat; later ones write nothing

    def profiles(self, cell_id: int | None = None) -> list[dict[str, Any]]:
        """Profile references, by cell, source, target then phase; [] for results without profiles."""
        if not self._has_profiles():
            return []
        where, args = ("WHERE cell_id = ?", (cell_id,)) if cell_id is not None else ("", ())
        out = []
        # the server's first, the window's first (readers of schema 5 took the first of a source)
        phases = "CASE phase WHEN 'measured' THEN 0 WHEN 'warmup' THEN 1 WHEN 'stall' THEN 2 ELSE 3 END"
        order = f"ORDER BY cell_id, source, target DESC, {phases}, phase"
        for row in self.db.execute(f"SELECT * FROM profiles {where} {order}", args):
            item = dict(row)
            for key in ("quality", "top"):
                item[key] = json.loads(item[key]) if item[key] else None
            out.append(item)
        return out


_PROFILES_SCHEMA = """
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
_PROFILE_COLUMNS = (
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
