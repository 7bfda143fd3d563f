"""SQL views in results.db that flatten the JSON columns, for `pandas.read_sql` and sqlite3.

The tables keep a cell's variant, summary, resources, steady state and stalls as JSON text
(store/results.py); these views give one plain column per figure and one column per axis of
the matrix, named after the axis, so a user can `GROUP BY allocator, sort_buffer` or
`df.groupby(["allocator", "threads"])` without parsing JSON:

    cells_flat      one row per cell: variant, one column per axis, threads, repeat, status,
                    steady state, the window's sysbench summary, the server's resources
    seconds_flat    one row per sysbench per-second line, with the cell's axes
    stalls_flat     one row per stall window, with the cell's axes
    rss_flat        one row per RSS sample of a measured window, with the cell's axes
    profile_top_flat  one row per top function of a stored profile (results with profiles only)

    SELECT allocator, threads, avg(qps) FROM cells_flat WHERE status = 'ok' GROUP BY 1, 2

The views are derived, not stored data: the schema version does not change with them. They
are (re)created whenever a results directory is opened or its experiment is stored, and only
when their definition differs from the one in the file, so opening twice writes nothing.
Column names are shared with the CSV exports (report/csv_export.py) through `axis_columns`.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable

# [observe] alloc, per transaction (observers/alloc: OPS; observers/syscalls: SYSCALLS;
# named here because the store does not import the run stage)
_ALLOC_OPS = ("malloc", "calloc", "realloc", "free", "memalign", "new", "delete")
_ALLOC_SYSCALLS = ("mmap", "munmap", "mprotect", "madvise", "brk")
ALLOC_PATHS = {
    **{f"alloc_{op}_per_txn": f"$.calls_per_txn.{op}" for op in _ALLOC_OPS},
    "alloc_bytes_per_txn": "$.bytes_per_txn",
    **{f"alloc_{name}_per_txn": f"$.syscalls_per_txn.{name}" for name in _ALLOC_SYSCALLS},
}


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# The fixed columns of the per-cell view and CSV, in order; axis columns follow `variant`.
CELL_COLUMNS = _words(
    """id order variant threads repeat status error allocator_library allocator_version warmup_s warmup_method
    window_start_s settled stalls tps qps transactions latency_min_ms latency_avg_ms latency_p50_ms latency_p95_ms
    latency_p99_ms latency_max_ms errors_per_s steady_qps_mean steady_qps_ci_low steady_qps_ci_high steady_cv
    rss_end_bytes rss_peak_bytes server_cpu_s server_user_s server_sys_s client_cpu_s minor_faults major_faults
    minor_faults_per_txn major_faults_per_txn ctx_switches_per_txn server_cpu_us_per_txn harness_cpu_s
    other_cpu_cores"""
) + (*ALLOC_PATHS, "host_speed_work_ns", "steal_cpu_cores")
SECOND_COLUMNS = _words(
    "cell_id variant threads repeat t warmup tps qps reads writes other p95_ms errors_per_s reconnects_per_s"
)
RESOURCE_COLUMNS = CELL_COLUMNS[CELL_COLUMNS.index("rss_end_bytes") : CELL_COLUMNS.index("other_cpu_cores") + 1]
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")  # the experiment file's axis names
_OTHER_COLUMNS = """start_s end_s min_qps kind rss_bytes source phase rank function dso self_samples self_per_txn
    self_us_per_txn metric axis baseline ratio ci_low ci_high verdict n_baseline n_variant reason"""
_RESERVED = {name.lower() for name in CELL_COLUMNS + SECOND_COLUMNS + _words(_OTHER_COLUMNS)}


def axis_columns(axes: list[str], reserved: Iterable[str] = ()) -> dict[str, str]:
    """Axis -> column name: the axis's own name, or `axis_<name>` where that would collide with
    a fixed column (an axis called `threads`; `reserved`: a caller's own columns) or another axis
    (SQL names ignore case)."""
    out: dict[str, str] = {}
    taken = _RESERVED | {name.lower() for name in reserved}
    for axis in axes:
        name = axis if axis.lower() not in taken else f"axis_{axis}"
        while name.lower() in taken:
            name += "_"
        taken.add(name.lower())
        out[axis] = name
    return out


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _axis_exprs(axes: list[str], alias: str) -> list[str]:
    return [
        f"json_extract({alias}.variant, '$.\"{axis}\"') AS {_q(column)}" for axis, column in axis_columns(axes).items()
    ]


def _cell_exprs(axes: list[str]) -> list[str]:
    s, r, lat = "c.summary", "c.resources", "'$.latency_ms."
    figures = [f"json_extract({s}, '$.{k}') AS {k}" for k in ("tps", "qps", "transactions")]
    figures += [f"json_extract({s}, {lat}{k}') AS latency_{k}_ms" for k in ("min", "avg", "p50", "p95", "p99", "max")]
    figures.append(f"json_extract({s}, '$.errors_per_s') AS errors_per_s")
    figures += [f"json_extract(c.steady, '$.{k}') AS steady_{k}" for k in ("qps_mean", "qps_ci_low", "qps_ci_high")]
    figures.append("json_extract(c.steady, '$.cv') AS steady_cv")
    figures += [f"json_extract({r}, '$.{k}') AS {k}" for k in RESOURCE_COLUMNS]
    figures += [f"json_extract(c.alloc, '{path}') AS {name}" for name, path in ALLOC_PATHS.items()]
    figures.append("json_extract(c.host_speed, '$.work_ns') AS host_speed_work_ns")
    figures.append(f"json_extract({r}, '$.steal_cpu_cores') AS steal_cpu_cores")
    return [
        "c.id AS id",
        'c.id AS "order"',
        _VARIANT,
        *_axis_exprs(axes, "c"),
        "c.threads AS threads",
        "c.repeat AS repeat",
        "c.status AS status",
        _FIRST_LINE,
        "c.allocator_library AS allocator_library",
        "c.allocator_version AS allocator_version",
        "c.warmup_s AS warmup_s",
        "c.warmup_method AS warmup_method",
        "c.window_start_s AS window_start_s",
        "c.settled AS settled",
        "coalesce(json_array_length(c.stalls), 0) AS stalls",
        *figures,
    ]


_VARIANT = "substr(c.key, 1, instr(c.key, '/') - 1) AS variant"  # keys are <variant>/tN/rN
_FIRST_LINE = (
    "CASE WHEN instr(c.error, char(10)) > 0 THEN substr(c.error, 1, instr(c.error, char(10)) - 1)"
    " ELSE c.error END AS error"
)
_PER_CELL = ["c.id AS cell_id", _VARIANT]


def definitions(axes: list[str], with_profiles: bool) -> dict[str, str]:
    """View name -> its CREATE VIEW statement, for a matrix with these axes."""
    per_cell = [*_PER_CELL, *_axis_exprs(axes, "c"), "c.threads AS threads", "c.repeat AS repeat"]
    cols = ", ".join
    views = {
        "cells_flat": f"SELECT {cols(_cell_exprs(axes))} FROM cells c",
        "seconds_flat": f"SELECT {cols(per_cell)}, i.t, i.warmup, i.tps, i.qps, i.reads, i.writes, i.other, "
        "i.p95_ms, i.errors_per_s, i.reconnects_per_s FROM intervals i JOIN cells c ON c.id = i.cell_id",
        "stalls_flat": f"SELECT {cols(per_cell)}, json_extract(s.value, '$.start_s') AS start_s, "
        "json_extract(s.value, '$.end_s') AS end_s, json_extract(s.value, '$.min_qps') AS min_qps, "
        "json_extract(s.value, '$.kind') AS kind FROM cells c, json_each(c.stalls) s WHERE c.stalls IS NOT NULL",
        "rss_flat": f"SELECT {cols(per_cell)}, r.t, r.rss_bytes FROM rss_samples r JOIN cells c ON c.id = r.cell_id",
    }
    if with_profiles:
        views["profile_top_flat"] = (
            f"SELECT {cols(per_cell)}, p.source, p.phase, f.key + 1 AS rank, "
            "json_extract(f.value, '$.function') AS function, json_extract(f.value, '$.dso') AS dso, "
            "json_extract(f.value, '$.self_samples') AS self_samples, "
            "json_extract(f.value, '$.self_per_txn') AS self_per_txn, "
            "json_extract(f.value, '$.self_us_per_txn') AS self_us_per_txn "
            "FROM profiles p JOIN cells c ON c.id = p.cell_id, json_each(p.top) f WHERE p.top IS NOT NULL"
        )
    return {name: f"CREATE VIEW {name} AS {select}" for name, select in views.items()}


def refresh(db: sqlite3.Connection, axes: list[str]) -> bool:
    """Create or replace the views whose definition differs; True if anything was written.
    A read-only results directory (a colleague's, a CI artifact) keeps what it has."""
    safe = [a for a in axes if _SAFE_NAME.match(a)]
    has_profiles = _exists(db, "table", "profiles")
    wanted = definitions(safe, has_profiles)
    if not _stale(db, wanted):
        return False
    try:
        with db:
            # IMMEDIATE: the write lock first (waiting for another writer up to the connection's
            # timeout), then what is stale is read again. A deferred transaction that reads, then
            # writes after another process's write, fails at once with "database is locked" (its
            # snapshot is older: SQLite calls no busy handler then); it ended a run in CI while a
            # concurrent `perflab export` refreshed the same views (2026-11-28)
            db.execute("BEGIN IMMEDIATE")
            stale = _stale(db, wanted)
            for name, sql in stale.items():
                db.execute(f"DROP VIEW IF EXISTS {name}")
                db.execute(sql)
    except sqlite3.OperationalError as exc:
        if "readonly" not in str(exc):
            raise
        return False
    return bool(stale)


def _stale(db: sqlite3.Connection, wanted: dict[str, str]) -> dict[str, str]:
    current = {row[0]: row[1] for row in db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'view'")}
    return {name: sql for name, sql in wanted.items() if current.get(name) != sql}


def _exists(db: sqlite3.Connection, kind: str, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)).fetchone() is not None
