"""The history index's two databases: a SQLite file or a PostgreSQL server (psycopg), connected,
and their errors made perflab's (exit 3, the database's own first line, the URL without its
password). history/index.py holds what is stored.

    db = connect_postgres("postgresql://perf@db/perf")   # or IndexUnreachable: ... is unreachable
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

from perflab.errors import EXIT_ENVIRONMENT, PerflabError, ToolMissingError
from perflab.redact import redact


class IndexUnreachable(PerflabError):
    """The PostgreSQL index cannot be reached (or the SQLite file cannot be opened)."""

    exit_code = EXIT_ENVIRONMENT


class IndexFailed(PerflabError):
    """The index was opened but a statement failed (a table of another shape, a lock held beyond the
    wait, the server gone): exit 3 with the database's own words, never a traceback."""

    exit_code = EXIT_ENVIRONMENT


F = TypeVar("F", bound=Callable[..., Any])
BUSY_S = 30.0  # how long a first use waits for another process making or upgrading the same index


def db_errors() -> tuple[type[BaseException], ...]:
    """The errors of both databases (psycopg's only where it is installed)."""
    try:
        import psycopg
    except ImportError:
        return (sqlite3.Error,)
    return (sqlite3.Error, psycopg.Error)


def translated(method: F) -> F:
    """A database error in an index method becomes IndexFailed, naming the index."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except db_errors() as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise IndexFailed(
                f"history index {self.location}: {first}",
                "check the index (another perflab's version, a damaged file?), or pass another --history",
            ) from None

    return call  # type: ignore[return-value]


def wal(db: sqlite3.Connection) -> None:
    """WAL mode, waiting for another process that makes the same new index: SQLite answers
    "database is locked" at once there, without its busy wait."""
    deadline = time.monotonic() + BUSY_S
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def connect_postgres(url: str) -> Any:
    """A psycopg connection in autocommit (transactions explicit), or exit 3 with the reason."""
    try:
        import psycopg
    except ImportError:
        raise ToolMissingError(
            "a PostgreSQL history index needs psycopg",
            "run perflab from the checkout's .venv, which `make setup` fills from requirements.lock (psycopg is in it)",
        ) from None
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IndexUnreachable(
            f"history index {redacted(url)} is unreachable: {first}",
            "check the URL, that the server runs and accepts this user; or --history PATH for a local index",
        ) from None


def redacted(url: str) -> str:
    """The URL without its password (user:PASSWORD@ or ?password=), for messages (perflab/redact.py)."""
    return redact(url)
