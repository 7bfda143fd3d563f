"""The results directory: results.db (SQLite, WAL) plus logs/, read and written only here.

The tables, their version history and the upgrades: store/schema.py.

A cell is written in one transaction when it ends, so a killed run loses at most the cell in
flight. Readers get plain dicts; the JSON export (report/export.py) is built from them.
SQL views that flatten the JSON columns (cells_flat, seconds_flat, ...: store/views.py) are
derived from the tables and refreshed on open; they do not change the schema version.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from perflab.errors import ResultsFormatError
from perflab.store import schema, views
from perflab.store.schema import (
    JSON_COLUMNS,
    PROFILE_COLUMNS,
    PROFILES_TABLE,
    has_profiles,
    upgrade,
)

DB_NAME = "results.db"
F = TypeVar("F", bound=Callable[..., Any])


class RunAbandoned(RuntimeError):
    """A commit after the run was interrupted (Results.abandon): a cell still in flight on another
    thread (a host axis's lanes, run/scheduler.py) is not stored half-run, nor as failed."""


def _serialized(method: F) -> F:
    """One thread at a time on the connection (the lanes of a host axis commit from their threads)."""

    @functools.wraps(method)
    def locked(self: Results, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return locked  # type: ignore[return-value]


BUSY_S = 120.0  # how long a write waits for another process's write to the same results.db


class Results:
    """A results directory opened for reading or writing."""

    def __init__(self, directory: Path, *, create: bool = False) -> None:
        self.dir = Path(directory)
        path = self.dir / DB_NAME
        if not create and not path.is_file():
            raise ResultsFormatError(f"{self.dir}: no {DB_NAME} here", "pass the directory `perflab run -o` wrote")
        if create:
            (self.dir / "logs").mkdir(parents=True, exist_ok=True)
            schema.create(path)
        self._lock = threading.RLock()  # every use of the connection holds it (_serialized)
        self._abandoned = False
        # explicit transactions only; one connection shared by the run's threads, one at a time. A
        # writer waits for another (a run and `perflab report` refreshing the views at once) up to
        # BUSY_S: sqlite3's default 5 s ended a run in CI (2026-11-28, "database is locked") while a
        # starved `perflab export` held the lock
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=BUSY_S)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        if not create:
            upgrade(self.db, path)
            self.refresh_views()

    @_serialized
    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Results:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @_serialized
    def abandon(self) -> None:
        """The run was interrupted: commit no cell from now on (one in flight elsewhere ran partly)."""
        self._abandoned = True

    def log_dir(self, cell_id: int) -> Path:
        path = self.dir / "logs" / f"cell-{cell_id:04d}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    @_serialized
    def set_meta(self, **values: Any) -> None:
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            for key, value in values.items():
                self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))
        if "experiment" in values:
            self.refresh_views()

    @_serialized
    def refresh_views(self) -> None:
        """(Re)create the flattened SQL views (store/views.py) for this run's axes."""
        axes = (self.meta().get("experiment") or {}).get("axes") or {}
        views.refresh(self.db, list(axes))

    @_serialized
    def meta(self) -> dict[str, Any]:
        return {row["key"]: json.loads(row["value"]) for row in self.db.execute("SELECT key, value FROM meta")}

    def commit_cell(
        self,
        cell: dict[str, Any],
        intervals: list[dict[str, Any]],
        rss_samples: list[tuple[float, int]],
        status_samples: Sequence[tuple[float, dict[str, float]]] = (),
    ) -> None:
        """Store one finished cell (ok or failed) with its series, atomically."""
        self.commit_cells([(cell, intervals, rss_samples, status_samples)])

    @_serialized
    def commit_cells(self, cells: list[tuple[dict[str, Any], list, list, Any]]) -> None:
        """Store finished cells with their series in one transaction: all or none (an interleaved
        group, whose cells pair only with each other: a resume must not find half of it).
        RunAbandoned after `abandon`."""
        if self._abandoned:
            raise RunAbandoned("the run was interrupted: this cell is not stored")
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            for cell, intervals, rss_samples, status_samples in cells:
                self._insert(cell, intervals, rss_samples, status_samples)

    @_serialized
    def _insert(
        self,
        cell: dict[str, Any],
        intervals: list[dict[str, Any]],
        rss_samples: list[tuple[float, int]],
        status_samples: Any = (),
    ) -> None:
        row = {k: (json.dumps(v) if k in JSON_COLUMNS and v is not None else v) for k, v in cell.items()}
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

    @_serialized
    def cells(self) -> list[dict[str, Any]]:
        out = []
        for row in self.db.execute("SELECT * FROM cells ORDER BY id"):
            cell = dict(row)
            for key in JSON_COLUMNS:
                if cell.get(key) is not None:
                    cell[key] = json.loads(cell[key])
            out.append(cell)
        return out

    @_serialized
    def intervals(self, cell_id: int) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT * FROM intervals WHERE cell_id = ? ORDER BY t", (cell_id,))
        return [{k: row[k] for k in row.keys() if k != "cell_id"} for row in rows]

    @_serialized
    def rss_samples(self, cell_id: int) -> list[tuple[float, int]]:
        rows = self.db.execute("SELECT t, rss_bytes FROM rss_samples WHERE cell_id = ? ORDER BY t", (cell_id,))
        return [(row[0], row[1]) for row in rows]

    @_serialized
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

    @_serialized
    def commit_profile(self, row: dict[str, Any]) -> None:
        """Store (or replace) the reference to one cell's profile: keys of PROFILE_COLUMNS."""
        values = {k: (json.dumps(row.get(k)) if k in ("quality", "top") else row.get(k)) for k in PROFILE_COLUMNS}
        values["target"] = values["target"] or "server"
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(PROFILES_TABLE)
            self.db.execute(
                f"INSERT OR REPLACE INTO profiles ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
                list(values.values()),
            )
        self.refresh_views()  # the first profile adds profile_top_flat; later ones write nothing

    @_serialized
    def profiles(self, cell_id: int | None = None) -> list[dict[str, Any]]:
        """Profile references, by cell, source, target then phase; [] for results without profiles."""
        if not has_profiles(self.db):
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


def server_facts(meta: dict[str, Any]) -> dict[str, Any]:
    """What the reports need of a run's server kind (meta.server_facts, schema 10: memory_figure,
    short_version, host_field, interleaved_refusal, durability_options); a meta recorded before it
    gets its kind's facts of that day."""
    return meta.get("server_facts") or schema.facts_before_10(meta)
