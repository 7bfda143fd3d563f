"""The history index: one row per recorded run and one per estimate, in SQLite or PostgreSQL.

    Index.open(None)                          ~/.local/share/perflab/history.sqlite (or $PERFLAB_HISTORY)
    Index.open("/srv/perflab/history.sqlite") another SQLite file
    Index.open("postgresql://user@db/perf")   a team's shared index (psycopg)

Format (`meta.index_version`, docs/results-format.md#the-history-index):
  1  runs (name, workload_key, workload JSON, started_at, ended_at, directory, status,
     provenance JSON, recorded_at; a run is its name, workload and start, wherever its directory
     is: recording it again, from its directory or a copy, replaces it) and estimates (run_id,
     variant_key, variant JSON, threads, metric, mean, low,
     high, n, samples JSON: one value per settled repeat, position: the record's order).
  2  adds ratios (run_id, variant_key, variant JSON, baseline JSON, threads, metric, ratio, low,
     high, n, method, se, df, position): each variant's ratio to the run's baseline, measured
     within the run (record.Ratio). A version-1 index is upgraded in place on opening (the table
     is added; runs recorded before hold no ratios until imported again).

The same SQL serves both databases (`?` placeholders become psycopg's `%s`); an index of another
version is refused with a hint; an older one is upgraded (UPGRADES). An unreachable PostgreSQL
index is an EnvironmentError (exit 3).
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from perflab.errors import EXIT_ENVIRONMENT, PerflabError, ResultsFormatError, ToolMissingError, UsageError
from perflab.history.record import Estimate, Ratio, RunRecord
from perflab.redact import redact
from perflab.units import utc_now
from perflab.variants import variant_key

INDEX_VERSION = 2
ENV = "PERFLAB_HISTORY"
OFF = "off"  # --history off / PERFLAB_HISTORY=off: `perflab run` records nothing
SAME_RUN = "name = ? AND workload_key = ? AND started_at = ?"  # what makes two records one run


def default_location() -> str:
    """$PERFLAB_HISTORY, else ~/.local/share/perflab/history.sqlite ($XDG_DATA_HOME honoured)."""
    if os.environ.get(ENV):
        return os.environ[ENV]
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(data) / "perflab" / "history.sqlite")


def check_location(location: str | None) -> Path | None:
    """The SQLite file a location names, after refusing one whose directory does not exist: a
    mistyped --history or $PERFLAB_HISTORY is bad input (UsageError, exit 2), never a new tree of
    directories holding an empty index. Only the default's directory is made (None: a
    PostgreSQL URL, or `off`)."""
    given = location or os.environ.get(ENV)
    if given is not None and (given.lower() == OFF or given.startswith(("postgresql://", "postgres://"))):
        return None
    path = Path(given or default_location()).expanduser()
    if given is None:
        return path
    source = "--history" if location else f"${ENV}"
    if not path.parent.is_dir():
        raise UsageError(
            f"history index {path} ({source}): its directory {path.parent} does not exist",
            f"correct the path, or make the directory first (mkdir -p {path.parent}); --history off records nothing",
        )
    if path.is_dir():
        raise UsageError(f"history index {path} ({source}) is a directory", f"name a file in it: {path}/history.sqlite")
    return path


class IndexUnreachable(PerflabError):
    """The PostgreSQL index cannot be reached (or the SQLite file cannot be opened)."""

    exit_code = EXIT_ENVIRONMENT


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS runs (
        id {id},
        name TEXT NOT NULL,
        workload_key TEXT NOT NULL,
        workload TEXT NOT NULL,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        directory TEXT NOT NULL,
        status TEXT,
        provenance TEXT NOT NULL,
        recorded_at TEXT NOT NULL,
        UNIQUE (directory, started_at))""",
    "CREATE INDEX IF NOT EXISTS runs_by_name ON runs (name, started_at)",
    """CREATE TABLE IF NOT EXISTS estimates (
        run_id INTEGER NOT NULL,
        variant_key TEXT NOT NULL,
        variant TEXT NOT NULL,
        threads INTEGER NOT NULL,
        metric TEXT NOT NULL,
        mean DOUBLE PRECISION,
        low DOUBLE PRECISION,
        high DOUBLE PRECISION,
        n INTEGER NOT NULL,
        samples TEXT NOT NULL,
        position INTEGER NOT NULL,
        PRIMARY KEY (run_id, variant_key, threads, metric))""",
    """CREATE TABLE IF NOT EXISTS ratios (
        run_id INTEGER NOT NULL,
        variant_key TEXT NOT NULL,
        variant TEXT NOT NULL,
        baseline TEXT NOT NULL,
        threads INTEGER NOT NULL,
        metric TEXT NOT NULL,
        ratio DOUBLE PRECISION,
        low DOUBLE PRECISION,
        high DOUBLE PRECISION,
        n INTEGER NOT NULL,
        method TEXT NOT NULL,
        se DOUBLE PRECISION,
        df DOUBLE PRECISION,
        position INTEGER NOT NULL,
        PRIMARY KEY (run_id, variant_key, threads, metric))""",
)

# version -> what brings an index of that version to the next one. 1 -> 2 adds `ratios`, which
# _SCHEMA's CREATE TABLE IF NOT EXISTS has made by the time the upgrade runs: nothing else to do.
UPGRADES: dict[int, tuple[str, ...]] = {1: ()}


@dataclass
class StoredRun:
    """A run as the index holds it: its record and its id there."""

    id: int
    record: RunRecord


class Index:
    """An open history index (a context manager)."""

    def __init__(self, connection: Any, location: str, postgres: bool) -> None:
        self.db, self.location, self.postgres = connection, location, postgres
        self._prepare()

    @classmethod
    def open(cls, location: str | None = None) -> Index:
        where = location or default_location()
        if where.startswith(("postgresql://", "postgres://")):
            return cls(_connect_postgres(where), _redacted(where), True)
        path = check_location(location)
        if path is None:
            raise UsageError(f"the history index is {OFF}", f"pass --history PATH, or unset ${ENV}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)  # the default's directory: a given one exists
            db = sqlite3.connect(path, isolation_level=None, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
        except (OSError, sqlite3.Error) as exc:
            raise IndexUnreachable(f"history index {path}: {exc}", "pass --history PATH to a writable file") from None
        return cls(db, str(path), False)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.db.close()

    def _sql(self, text: str) -> str:
        return text.replace("?", "%s") if self.postgres else text

    def _execute(self, text: str, args: tuple = ()) -> Any:
        return self.db.execute(self._sql(text), args)

    def _prepare(self) -> None:
        identity = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY" if self.postgres else "INTEGER PRIMARY KEY"
        with self._transaction():
            for statement in _SCHEMA:
                self._execute(statement.format(id=identity))
            row = self._execute("SELECT value FROM meta WHERE key = 'index_version'").fetchone()
            if row is None:
                self._execute("INSERT INTO meta (key, value) VALUES ('index_version', ?)", (str(INDEX_VERSION),))
                return
            version = int(row[0])
            while version in UPGRADES and version < INDEX_VERSION:
                for statement in UPGRADES[version]:
                    self._execute(statement)
                version += 1
                self._execute("UPDATE meta SET value = ? WHERE key = 'index_version'", (str(version),))
            if version != INDEX_VERSION:
                raise ResultsFormatError(
                    f"history index {self.location}: version {row[0]}, this perflab reads {INDEX_VERSION}",
                    "use the perflab version that wrote it, or another --history",
                )

    def _transaction(self) -> Any:
        if self.postgres:
            return self.db.transaction()
        return _SqliteTransaction(self.db)

    def record(self, run: RunRecord) -> int:
        """Store `run`, replacing every earlier record of the same run (SAME_RUN: its name, workload
        and start, not its directory: a copied or moved results directory is the same run); its id."""
        with self._transaction():
            for (old,) in self._execute(
                f"SELECT id FROM runs WHERE {SAME_RUN}", (run.name, run.workload_key, run.started_at)
            ).fetchall():
                self._execute("DELETE FROM estimates WHERE run_id = ?", (old,))
                self._execute("DELETE FROM ratios WHERE run_id = ?", (old,))
                self._execute("DELETE FROM runs WHERE id = ?", (old,))
            run_id = self._execute(
                "INSERT INTO runs (name, workload_key, workload, started_at, ended_at, directory, status,"
                " provenance, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    run.name,
                    run.workload_key,
                    json.dumps(run.workload, default=str),
                    run.started_at,
                    run.ended_at,
                    run.directory,
                    run.status,
                    json.dumps(run.provenance),
                    utc_now(),
                ),
            ).fetchone()[0]
            for position, e in enumerate(run.estimates):
                self._insert_estimate(run_id, position, e)
            for position, r in enumerate(run.ratios):
                self._insert_ratio(run_id, position, r)
        return int(run_id)

    def _insert_ratio(self, run_id: int, position: int, r: Ratio) -> None:
        self._execute(
            "INSERT INTO ratios (run_id, variant_key, variant, baseline, threads, metric, ratio, low, high, n,"
            " method, se, df, position) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, variant_key(r.variant), json.dumps(r.variant), json.dumps(r.baseline), r.threads, r.metric)
            + (r.mean, r.low, r.high, r.n, r.method, r.se, r.df, position),
        )

    def _insert_estimate(self, run_id: int, position: int, e: Estimate) -> None:
        self._execute(
            "INSERT INTO estimates (run_id, variant_key, variant, threads, metric, mean, low, high, n,"
            " samples, position) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                variant_key(e.variant),
                json.dumps(e.variant),
                e.threads,
                e.metric,
                e.mean,
                e.low,
                e.high,
                e.n,
                json.dumps(e.values),
                position,
            ),
        )

    def names(self) -> list[str]:
        return [row[0] for row in self._execute("SELECT DISTINCT name FROM runs ORDER BY name").fetchall()]

    def runs(self, name: str) -> list[StoredRun]:
        """Every recorded run of `name`, oldest first, with its estimates."""
        rows = self._execute(  # an index an older perflab wrote may hold a run twice: the newest record
            "SELECT id, name, workload_key, workload, started_at, ended_at, directory, status, provenance"
            " FROM runs WHERE id IN (SELECT MAX(id) FROM runs WHERE name = ? GROUP BY workload_key, started_at)"
            " ORDER BY started_at, id",
            (name,),
        ).fetchall()
        estimates: dict[int, list[Estimate]] = {}
        for row in self._execute(
            "SELECT e.run_id, e.variant, e.threads, e.metric, e.mean, e.low, e.high, e.n, e.samples FROM estimates e"
            " JOIN runs r ON r.id = e.run_id WHERE r.name = ? ORDER BY e.run_id, e.position",
            (name,),
        ).fetchall():
            estimates.setdefault(row[0], []).append(
                Estimate(json.loads(row[1]), row[2], row[3], row[4], row[5], row[6], row[7], json.loads(row[8]))
            )
        ratios = self._ratios(name)
        return [
            StoredRun(
                r[0],
                RunRecord(
                    r[1],
                    r[2],
                    json.loads(r[3]),
                    r[4],
                    r[5],
                    r[6],
                    r[7],
                    json.loads(r[8]),
                    estimates.get(r[0], []),
                    ratios.get(r[0], []),
                ),
            )
            for r in rows
        ]

    def _ratios(self, name: str) -> dict[int, list[Ratio]]:
        found: dict[int, list[Ratio]] = {}
        for row in self._execute(
            "SELECT q.run_id, q.variant, q.baseline, q.threads, q.metric, q.ratio, q.low, q.high, q.n, q.method,"
            " q.se, q.df FROM ratios q JOIN runs r ON r.id = q.run_id WHERE r.name = ? ORDER BY q.run_id, q.position",
            (name,),
        ).fetchall():
            found.setdefault(row[0], []).append(Ratio(json.loads(row[1]), json.loads(row[2]), *row[3:]))
        return found


class _SqliteTransaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, *rest: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")


def _connect_postgres(url: str) -> Any:
    """A psycopg connection in autocommit (transactions explicit), or exit 3 with the reason."""
    try:
        import psycopg
    except ImportError:
        raise ToolMissingError(
            "a PostgreSQL history index needs psycopg", "pip install 'psycopg[binary]' (a perflab dependency)"
        ) from None
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IndexUnreachable(
            f"history index {_redacted(url)} is unreachable: {first}",
            "check the URL, that the server runs and accepts this user; or --history PATH for a local index",
        ) from None


def _redacted(url: str) -> str:
    """The URL without its password (user:PASSWORD@ or ?password=), for messages."""
    return redact(url)
