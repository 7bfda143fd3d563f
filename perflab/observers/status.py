"""The server's own counters over the measured window: `SHOW GLOBAL STATUS` and the enabled
rows of `information_schema.INNODB_METRICS`, once a second, over one persistent connection.

Why the `mariadb` client in batch mode and not a Python driver: one persistent `mariadb`
process reading statements on its stdin costs 0.33 ms of CPU per sample (0.20 ms the client,
0.13 ms parsing here), PyMySQL 1.37 ms (it parses every packet in Python), both measured on
this 2-vCPU VM against the same server (600 rows per sample). The server's share is the
same either way. So: no new dependency, and the tool perflab already requires.

Each sample is the output of one batch: tab-separated `name value` rows of SHOW GLOBAL
STATUS, then `INNODB_METRICS.name value type` rows, then an end marker. Values that are not
numbers (Innodb_buffer_pool_load_status, ...) are left out.

    sampler = kind.status(server, None).connect()  # before the workload loads the server (servers/mysql_protocol.py)
    start_workload()
    with sampler as status:   # the first sample now, then one per second
        run_window()
    status.samples -> [(0.0, {"Handler_read_next": 1200.0, ...}), (1.0, {...}), ...]
    figures(status.samples, transactions) -> {"per_txn": {...}, "gauges": {...}, ...}
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Set
from pathlib import Path
from typing import IO, Any, Self

from perflab.errors import PerflabError
from perflab.places.proc import Child, clean_env

END = "--perflab-status-end--"
METRICS_PREFIX = "INNODB_METRICS."
QUERY = (
    "SHOW GLOBAL STATUS;\n"
    "SELECT CONCAT('INNODB_METRICS.', NAME), COUNT, TYPE FROM information_schema.INNODB_METRICS "
    "WHERE {enabled};\n"
    f"SELECT '{END}';\n"
)  # {enabled}: the server's own filter for enabled metrics (Flavor.metrics_enabled)
STATEMENTS = 3  # the sampler's own statements per sample, counted in the server's Questions
SELECTS = 2  # of them SELECTs (the metrics, the end marker), counted in Com_select: the reads
# the counters an interleaved turn needs (run/interleave.py), 8 rows instead of ~600: its two statements
COUNTERS = (
    "Questions",
    "Com_commit",
    "Com_select",
    "Com_insert",
    "Com_update",
    "Com_delete",
    "Com_replace",
    "Com_insert_select",
    "Com_replace_select",
)
LEAN_QUERY = (
    "SHOW GLOBAL STATUS WHERE Variable_name IN (" + ", ".join(f"'{n}'" for n in COUNTERS) + f");\nSELECT '{END}';\n"
)
LEAN_STATEMENTS = 2
LEAN_SELECTS = 1  # its end marker
# SHOW GLOBAL STATUS has no types: these are levels (a window mean), every other number is a
# counter (a per-transaction rate over the window). INNODB_METRICS says it: TYPE 'value'.
GAUGES = re.compile(
    r"^(Threads_(running|connected|cached)|Open_(?!ed).*|Innodb_buffer_pool_pages_(data|dirty|free|misc|old|total)"
    r"|Innodb_buffer_pool_bytes_.*|.*_current_.*|.*_pending_.*|Innodb_row_lock_time_(avg|max)"
    r"|Innodb_history_list_length|Innodb_checkpoint_.*|Innodb_page_size|Memory_used.*|Max_used_.*"
    r"|Prepared_stmt_count|Key_blocks_(not_flushed|unused|used)|Qcache_(free_blocks|free_memory|queries_in_cache"
    r"|total_blocks)|Innodb_num_open_files|Innodb_mem_.*|Uptime.*|Innodb_max_trx_id|Innodb_lsn_.*"
    r"|Innodb_(available_undo_logs|buffer_pool_load_incomplete|have_.*)|Tc_log_page_size|Rpl_.*|Slaves_.*)\Z"
)
HINT = (
    "[observe] status queries the server as root over its socket, once a second; SHOW GLOBAL STATUS needs a "
    "small temporary table: check the cell's server_options (tmp_disk_table_size, max_statement_time, "
    "wait_timeout, ...), or set status = false"
)


class StatusError(PerflabError):
    """The server refused or broke the status query."""


def parse(lines: list[str]) -> tuple[dict[str, float], set[str]]:
    """One batch of `mariadb --batch` rows -> ({name: value}, names that are gauges)."""
    values: dict[str, float] = {}
    gauges: set[str] = set()
    for line in lines:
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 2:
            continue
        try:
            values[parts[0]] = float(parts[1])
        except ValueError:
            continue  # ON, a status text, an empty value
        if (len(parts) > 2 and parts[2] == "value") or GAUGES.match(parts[0]):
            gauges.add(parts[0])
    return values, gauges


def figures(
    samples: list[tuple[float, dict[str, float]]],
    gauges: Set[str],
    transactions: int,
    queries: int | None = None,
    window_s: float | None = None,
) -> dict[str, Any]:
    """The cell's `server_status` fields: counters per transaction, gauges as window means.

    sysbench's window and the sampler's are not aligned to the millisecond (sysbench starts its
    clock tens of ms after perflab starts it; the last sample comes after it exited): 1.5% off
    in a 3 s window. So the transactions in the sampled span are counted by the server itself:
    its `Questions` growth, less the sampler's own statements, times sysbench's transactions
    per query. Gauges: the mean of the samples inside the window (t <= window_s - 0.5)."""
    if len(samples) < 2 or not transactions:
        return {"per_txn": {}, "gauges": {}, "samples": len(samples), "transactions": None}
    (_, first), (_, last) = samples[0], samples[-1]
    span_txns = float(transactions)
    if queries and "Questions" in first and "Questions" in last:
        ours = STATEMENTS * (len(samples) - 1)
        span_txns = (last["Questions"] - first["Questions"] - ours) * transactions / queries
    if span_txns <= 0:
        return {"per_txn": {}, "gauges": {}, "samples": len(samples), "transactions": None}
    per_txn = {
        name: round((last[name] - first[name]) / span_txns, 6)
        for name in sorted(first)
        if name in last and name not in gauges
    }
    inside = [v for t, v in samples if window_s is None or t <= window_s - 0.5] or [first]
    means = {}
    for name in sorted(gauges):
        values = [v[name] for v in inside if name in v]
        if values:
            means[name] = round(sum(values) / len(values), 3)
    return {"per_txn": per_txn, "gauges": means, "samples": len(samples), "transactions": round(span_txns, 1)}


class StatusSampler:
    """Samples the server that the `client` command (a `mariadb` client and its login) reaches every
    `interval` seconds in a thread, its stderr in the directory `errors`; a failed sample ends the
    sampling and is raised (StatusError) when the window ends. `enabled`: INNODB_METRICS' column that
    says a metric is on (the server's dialect: Kind.status)."""

    def __init__(
        self, client: list[str], errors: Path, interval: float = 1.0, lean: bool = False, enabled: str = "ENABLED"
    ) -> None:
        self.client, self.errors = client, errors
        self.interval = interval
        # lean: only COUNTERS (LEAN_QUERY), for a caller that needs no more than throughput
        query = QUERY.replace("{enabled}", enabled)
        self.query, self.statements = (LEAN_QUERY, LEAN_STATEMENTS) if lean else (query, STATEMENTS)
        self.selects = LEAN_SELECTS if lean else SELECTS
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.gauges: set[str] = set()
        self.error: StatusError | None = None
        self._child: Child | None = None
        self._stderr: IO[str] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="status-sampler", daemon=True)
        self._start = 0.0

    def argv(self) -> list[str]:
        return self.client

    def connect(self) -> StatusSampler:
        """Start the client and finish its connection now, with one round trip. Call it before
        the workload loads the server: at 1024 client threads on this 2-vCPU VM a client started
        at the window's start took seconds to start and connect, and its "first" sample then
        described the window's end (Threads_connected 888 of 1024 at t = 0, in CI)."""
        if self._child is None:
            self._stderr = open(self.errors / "status-client.err", "w+", encoding="utf-8")  # noqa: SIM115
            self._child = Child(
                self.argv(),
                env=clean_env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                text=True,
            )
            try:
                self._exchange(f"SELECT '{END}';\n")
            except StatusError:
                self.close()
                raise
        return self

    @property
    def pid(self) -> int | None:
        """The status client's pid (its CPU is perflab's, not the server's)."""
        return self._child.pid if self._child is not None else None

    def start_clock(self) -> None:
        """Time the samples from now, for a caller that takes them itself with `sample()` at
        moments of its choosing (run/interleave.py: at every turn's end) instead of entering."""
        self._start = time.monotonic()

    def __enter__(self) -> Self:
        self.connect()  # a no-op when the caller connected before the workload
        self._start = time.monotonic()
        try:
            self.sample()  # the window's first sample, and a refusal, now
        except StatusError:
            self.close()
            raise
        self._thread.start()
        return self

    def sample(self) -> None:
        """One batch: write the statements, read rows up to the end marker."""
        at = time.monotonic() - self._start
        values, gauges = parse(self._exchange(self.query))
        self.gauges |= gauges
        self.samples.append((round(at, 3), values))

    def _exchange(self, statements: str) -> list[str]:
        """Write `statements` (the last one selects the end marker); the rows before the marker."""
        assert self._child is not None and self._child.popen.stdin and self._child.popen.stdout
        try:
            self._child.popen.stdin.write(statements)
            self._child.popen.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._failure() from None
        lines: list[str] = []
        for line in self._child.popen.stdout:
            if line.startswith(END):
                return lines
            lines.append(line)
        raise self._failure()

    def _failure(self) -> StatusError:
        assert self._child is not None and self._stderr is not None
        code = self._child.wait(10) if self._child.poll() is None else self._child.poll()
        self._stderr.seek(0)
        lines = [ln.strip() for ln in self._stderr.read().splitlines() if ln.strip().strip("-")]
        said = next((ln for ln in lines if ln.startswith("ERROR")), " ".join(lines[-2:]))
        said = said or f"the client exited with code {code}"
        return StatusError(f"status sampling: SHOW GLOBAL STATUS failed: {said}", HINT)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except StatusError as exc:
                self.error = exc
                return

    def finish(self) -> dict[str, Any]:
        """The interleaved design's end of a window: the samples are the server's own counts,
        complete as they are (workloads/turn_counts.py's client counts complete theirs here)."""
        return {"source": "server"}

    def abort(self) -> None:
        """Kill the status client (a read waiting on a hung server then ends: StatusError)."""
        if self._child is not None:
            self._child.kill()

    def close(self) -> None:
        if self._child is not None:
            self._child.kill()
        if self._stderr is not None:
            self._stderr.close()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.interval + 30)
        if self._thread.is_alive() and self._child is not None:  # a server that stopped answering
            self._child.kill()  # its read ends with the client
            self._thread.join()
        try:
            if self.error is None and exc[0] is None:
                self.sample()  # the end of the window, exactly
        except StatusError as error:
            self.error = error
        finally:
            self.close()
        if self.error is not None and exc[0] is None:
            raise self.error

    def figures(self, transactions: int, queries: int | None = None, window_s: float | None = None) -> dict[str, Any]:
        return figures(self.samples, self.gauges, transactions, queries, window_s)
