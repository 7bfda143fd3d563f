"""pgbench's per-transaction log: the window's figures and the per-second series (pgbench.py
runs it; the log's format and why the figures come from it are in its docstring), and the log
fetched back from a client host (fetch_log).

    summary = window_summary(load_log(rundir / "pgbench_log"), (start_epoch, end_epoch), 1)
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab.workloads.pgbench_argv import LOG, cell_dir
from perflab.workloads.sysbench_output import Summary

if TYPE_CHECKING:
    from perflab.spec.matrix import Cell

END_SLACK_S = 0.01


def load_log(prefix: Path, lag: bool = False) -> np.ndarray:
    """Every transaction of the per-transaction logs `prefix.PID[.THREAD]` as rows of
    (latency_us or -1 for a failed one, -2 for one --latency-limit skipped, end epoch in seconds
    as float); `lag` (a --rate run): a third column, its schedule lag in microseconds (the log's
    seventh, present only with --rate; its latency then counts from the scheduled start)."""
    rows = []
    for path in sorted(prefix.parent.glob(prefix.name + ".*")):
        text = path.read_text(encoding="ascii", errors="replace")
        if not text.strip():
            continue
        columns = len(text.split("\n", 1)[0].split())
        text = text.replace("failed", "-1").replace("skipped", "-2")
        data = np.array(text.split(), dtype=np.int64).reshape(-1, columns)
        rows.append(np.column_stack([data[:, 2], data[:, 4] + data[:, 5] / 1e6] + ([data[:, 6]] if lag else [])))
    return np.concatenate(rows) if rows else np.empty((0, 3 if lag else 2))


def window_summary(log: np.ndarray, window: tuple[float, float], statements_per_txn: int) -> Summary | None:
    """The window's figures: transactions that ended inside (start, end) epoch seconds. None
    when the window holds no transaction."""
    start, end = window
    inside = log[(log[:, 1] >= start) & (log[:, 1] < end)]
    ok = inside[inside[:, 0] >= 0]
    if not len(ok) or end <= start:
        return None
    span = end - start
    lat_ms = ok[:, 0] / 1000.0
    errors = int((inside[:, 0] == -1).sum())

    def pct(q: float) -> float:
        return round(float(np.percentile(lat_ms, q, method="inverted_cdf")), 3)

    return Summary(
        transactions=len(ok),
        queries=len(ok) * statements_per_txn,
        tps=round(len(ok) / span, 2),
        qps=round(len(ok) * statements_per_txn / span, 2),
        errors=errors,
        errors_per_s=errors / span,
        reconnects=0,
        total_time_s=round(span, 4),
        latency_ms={
            "min": round(float(lat_ms.min()), 3),
            "avg": round(float(lat_ms.mean()), 3),
            "max": round(float(lat_ms.max()), 3),
            "p50": pct(50),
            "p95": pct(95),
            "p99": pct(99),
        },
    )


def intervals(
    log: np.ndarray, launch_epoch: float, end_epoch: float, statements_per_txn: int, warmup: int
) -> list[dict[str, Any]]:
    """The per-second series in sysbench's shape, counted from the per-transaction log: second t
    holds the transactions that ended in (launch + t - 1, launch + t] (seconds from
    `launch_epoch`, its start: every client connected, pgbench.wait_connected), for every whole
    second before `end_epoch` (the window's end mark), a second with none as 0. Not from -P's progress lines: pgbench times
    those from its own start, after perflab's, so the SIGALRM at the window's end (cell.py)
    came before the last second's line and a 2 s window kept one second (ci15)."""
    rows = log[np.argsort(log[:, 1], kind="stable")] if len(log) else np.empty((0, 2))
    ends = np.ceil(rows[:, 1] - launch_epoch)  # ascending: each second is one slice
    seconds = math.floor(end_epoch - launch_epoch + END_SLACK_S)
    bounds = np.searchsorted(ends, np.arange(1, seconds + 2), side="left")
    out = []
    for t in range(1, seconds + 1):
        here = rows[bounds[t - 1] : bounds[t], 0]
        lat = here[here >= 0] / 1000.0
        tps = float(len(lat))
        p95 = round(float(np.percentile(lat, 95, method="inverted_cdf")), 3) if len(lat) else None
        out.append(
            {
                "t": t,
                "tps": tps,
                "qps": round(tps * statements_per_txn, 2),
                "reads": None,
                "writes": None,
                "other": None,
                "p95_ms": p95,
                "errors_per_s": float((here == -1).sum()),
                "reconnects_per_s": 0.0,
                "warmup": int(t <= warmup),
            }
        )
    return out


def rate_record(log: np.ndarray, launch_epoch: float, window: tuple[float, float], target: int, warmup: int) -> dict:
    """The rate record of a `--rate` run's window (workloads/rate.py) from a log loaded with its
    schedule lag: each window second's achieved rate (transactions that ended in it, as
    `intervals` counts them) and backlog (the largest schedule lag among them, in seconds); the
    latency counts from the scheduled start, the service time (latency - lag) beside it."""
    from perflab.workloads import rate

    ok = log[log[:, 0] >= 0]
    ends = np.ceil(ok[:, 1] - launch_epoch)  # each transaction's second, as `intervals` counts them
    seconds = []
    for t in range(warmup + 1, math.floor(window[1] - launch_epoch + END_SLACK_S) + 1):
        here = ok[ends == t]
        seconds.append((t, float(len(here)), round(float(here[:, 2].max()) / 1e6, 3) if len(here) else None))
    inside = ok[(ok[:, 1] >= window[0]) & (ok[:, 1] < window[1])]
    service = (inside[:, 0] - inside[:, 2]) / 1000.0
    found = rate.record(target, seconds, rate.INTENDED, _percentiles(service) if len(service) else None, None)
    found["skipped"] = int(((log[:, 0] == -2) & (log[:, 1] >= window[0]) & (log[:, 1] < window[1])).sum())
    return found


def _percentiles(lat_ms: np.ndarray) -> dict[str, float]:
    def pct(q: float) -> float:
        return round(float(np.percentile(lat_ms, q, method="inverted_cdf")), 3)

    return {"p50": pct(50), "p95": pct(95), "p99": pct(99), "max": round(float(lat_ms.max()), 3)}


# $0: the cell's directory on the host: its per-transaction logs, one a line
_LOGS = 'for f in "$0"/' + LOG + '.*; do [ -f "$f" ] && echo "$f"; done; true'


def fetch_log(remote: Any, cell: Cell, local: Path) -> list[Path]:
    """pgbench's per-transaction logs (`pgbench_log.PID[.THREAD]`), copied from the host into `local`,
    then the cell's directory there removed."""
    link = remote.rundir.link
    fetched = []
    try:
        for path in link.run(["sh", "-c", _LOGS, cell_dir(remote, cell)]).stdout.split():
            target = local / Path(path).name
            link.get(path, target)
            fetched.append(target)
    finally:
        link.run(["rm", "-rf", "--one-file-system", cell_dir(remote, cell)])
    return fetched
