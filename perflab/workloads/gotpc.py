"""go-tpc (PingCAP's TPC-C driver, Apache-2.0): argv, and the parser of its per-second reports.

perflab runs go-tpc v1.0.12 (`make go-tpc` installs it with `go install`, pinned). It has two
drivers: MySQL's protocol ("mysql", MariaDB and MySQL), over TCP to 127.0.0.1 as the user
tpcc@127.0.0.1 perflab creates first, and PostgreSQL's ("postgres", lib/pq), through the cell
server's unix socket as its superuser: lib/pq takes a `host` that is a directory for a socket's,
and --conn-params' keys come after the URL's (see `connection`). The dataset is `go-tpc tpcc prepare
--warehouses N` into the database "tpcc"; a cell runs `go-tpc tpcc run --warehouses N -T THREADS
--time WARMUP+WINDOWs --interval 1s`, which prints, every second, one line per transaction type
that completed (names in sorted order; v1.0.12 prints them as v1.0.7 did):

    [Current] NEW_ORDER - Takes(s): 1.0, Count: 502, TPM: 30366.9, Sum(ms): 1071.6, Avg(ms): 2.1,
      50th(ms): 2.1, 90th(ms): 3.1, 95th(ms): 3.7, 99th(ms): 5.2, 99.9th(ms): 6.3, Max(ms): 6.8

(`NEW_ORDER_ERR` and the like for failed ones; with --wait, also `[Current] NEW_ORDER - 12.0s`,
the keying and think time, which is not a transaction's and is skipped), then `[Summary]` lines
over the whole run and `tpmC: 32429.6, tpmTotal: ..., efficiency: ...`. A second in which nothing
completed prints nothing, and the lines carry no time, so perflab stamps each line with its
arrival (workloads/client.py), in seconds since go-tpc's launch: `    3.012 | [Current] ...`. Each
report becomes the seconds since the previous one (its counts spread over them: a stall shows as
seconds with no transaction).

go-tpc cannot reset its statistics at the warm-up's end (sysbench's --report-checkpoints), so
the window's figures are summed from its seconds: counts and the latency sum are exact (the
average too); the maximum is exact; each percentile is the count-weighted median of the
seconds' percentiles (go-tpc prints no histogram, and its HDR histogram keeps 1 significant
digit: 2.1 ms stands for 2.0-2.2).

The analysis's throughput (`qps`) is new-order transactions per minute: NOPM, which go-tpc
prints as "tpmC" (without TPC-C's keying and think times, --wait, it is not a tpmC that the
specification would accept). Only new orders count, as in TPC-C, because the other four
transactions are paced by them; `tps` counts all five.

    summary, intervals = read_output(out, code, warmup)   # TpccSummary, per-second dicts

The Workload behind which perflab reaches it (checks, dataset, a cell's command) is tpcc.GO_TPC.
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from perflab.errors import ToolMissingError, WorkloadError
from perflab.places.proc import per_binary
from perflab.workloads.sysbench_output import Summary

VERSION = "v1.0.12"  # the Makefile's GO_TPC_VERSION (1.0.9 brought the postgres driver)
DATABASE = "tpcc"
USER = "tpcc"  # MySQL's protocol: tpcc@127.0.0.1, no password (go-tpc connects to it over TCP only)
NEW_ORDER = "NEW_ORDER"
TYPES = ("DELIVERY", "NEW_ORDER", "ORDER_STATUS", "PAYMENT", "STOCK_LEVEL")
WAREHOUSE_BYTES = 120 << 20  # one warehouse: ~100 MiB of InnoDB data and indexes; 121 MiB in PostgreSQL 15 and 18
GET = "make go-tpc (or make setup): go install github.com/pingcap/go-tpc/cmd/go-tpc@" + VERSION
# set by perflab itself; refused in workload options
RESERVED = {
    "warehouses",
    "threads",
    "time",
    "interval",
    "host",
    "port",
    "user",
    "password",
    "db",
    "driver",
    "count",
    "output_type",
    "output_dir",
    "tables",
    "dropdata",
    "parts",
    "max_procs",
    "acthreads",
    "targets",
}

_STAMP = re.compile(r"^\s*(?P<at>\d+(?:\.\d+)?) \| (?P<line>.*)$")
_REPORT = re.compile(
    r"^\[(?P<scope>Current|Summary)\] (?P<op>[A-Z_]+)\s*- Takes\(s\): (?P<takes>[\d.]+), Count: (?P<count>\d+), "
    r"TPM: [\d.]+, Sum\(ms\): (?P<sum>[\d.]+), Avg\(ms\): [\d.]+, 50th\(ms\): (?P<p50>[\d.]+), "
    r"90th\(ms\): (?P<p90>[\d.]+), 95th\(ms\): (?P<p95>[\d.]+), 99th\(ms\): (?P<p99>[\d.]+), "
    r"99\.9th\(ms\): (?P<p999>[\d.]+), Max\(ms\): (?P<max>[\d.]+)"
)
_TPMC = re.compile(r"^(?:\s*[\d.]+ \| )?tpmC: (?P<tpmc>[\d.]+)", re.MULTILINE)
PERCENTILES = ("p50", "p90", "p95", "p99", "p999")


@dataclass(frozen=True)
class Report:
    """One transaction type's line of one report."""

    op: str
    count: int
    sum_ms: float
    max_ms: float
    percentiles: dict[str, float]  # p50 p90 p95 p99 p999 (ms)


@dataclass
class Tick:
    """One report of go-tpc: the lines it printed at once. `at`: seconds since launch (None
    when the output was not stamped)."""

    at: float | None
    reports: dict[str, Report] = field(default_factory=dict)


@dataclass
class Second:
    """One second of the series: a report's counts spread over the seconds it covers."""

    t: int
    share: float  # 1 / the seconds its report covers
    tick: Tick

    def count(self, op: str) -> float:
        report = self.tick.reports.get(op)
        return report.count * self.share if report else 0.0

    def ok(self) -> float:
        return sum(self.count(op) for op in self.tick.reports if not op.endswith("_ERR"))

    def errors(self) -> float:
        return sum(self.count(op) for op in self.tick.reports if op.endswith("_ERR"))


@dataclass(frozen=True)
class TpccSummary(Summary):
    """The window's figures; `qps` is NOPM (new orders per minute), `tps` all five types per
    second, `queries` the new orders; latency_ms is NEW_ORDER's. transaction_types: per type."""

    transaction_types: dict[str, dict[str, float | None]] = field(default_factory=dict)
    tool_tpmc: float | None = None  # go-tpc's own "tpmC:" line: the whole run, warm-up included


def go_tpc_binary() -> str:
    """go-tpc on $PATH, or where `go install` puts it (GOBIN=/usr/local/bin, or ~/go/bin)."""
    found = shutil.which("go-tpc") or next(
        (p for p in ("/usr/local/bin/go-tpc", os.path.expanduser("~/go/bin/go-tpc")) if os.access(p, os.X_OK)), None
    )
    if not found:
        raise ToolMissingError("go-tpc not found", GET)
    return found


def connection(
    port: int, socket_dir: Path | None = None, user: str = USER, params: str = "", driver: str = "postgres"
) -> list[str]:
    """go-tpc's connection flags. MySQL's protocol: TCP to 127.0.0.1:PORT as tpcc. PostgreSQL
    (`socket_dir`): its driver through the socket in that directory, as `user` (its superuser),
    with no password (the socket's own authentication lets root in; a password would be in argv,
    which every account reads). go-tpc hands lib/pq the URL `postgres://USER:@HOST:PORT/tpcc?
    CONN-PARAMS`, which lib/pq (url.go, ParseURL) turns into key=value pairs: an empty value left
    out, a query key's first value only, the pairs sorted by their text, the last of a key winning.
    So the URL's host is left empty (the hidden --targets=:PORT; `-H ""` leaves go-tpc no target at
    all): with 127.0.0.1 there, `host=127.0.0.1` would sort after `host=/DIR` and win. `params`: the
    experiment's own conn_params, after perflab's keys (whose first values are the ones kept)."""
    if socket_dir is None:
        return ["-H", "127.0.0.1", "-P", str(port), "-U", user, "-D", DATABASE]
    ours = f"host={quote(str(socket_dir), safe='/')}&port={port}&sslmode=disable"
    return [f"--driver={driver}", f"--targets=:{port}", "-U", user, "-D", DATABASE,
            f"--conn-params={ours}{'&' + params if params else ''}"]  # fmt: skip


def login_connection(address: str, port: int, user: str, params: str = "") -> list[str]:
    """go-tpc's connection flags to a PostgreSQL server on another host (or reached from one), as
    the run's role over TCP: lib/pq gets `postgres://USER:@ADDRESS:PORT/tpcc`, whose empty password
    it leaves out, so it reads the password from the file PGPASSFILE names (lib/pq 1.10's
    handlePgpass: mode 0600), never from the command line."""
    target = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    return ["--driver=postgres", f"--targets={target}", "-U", user, "-D", DATABASE,
            f"--conn-params=sslmode=disable{'&' + params if params else ''}"]  # fmt: skip


def argv(
    command: str,
    *,
    port: int,
    warehouses: int,
    threads: int,
    seconds: int | None = None,
    options: dict[str, Any] | None = None,
    socket_dir: Path | None = None,
    user: str = USER,
    driver: str = "postgres",
    address: str | None = None,
    binary: str | None = None,
) -> list[str]:
    """`go-tpc tpcc prepare|run`; workload options become --key-with-dashes=value. `socket_dir`:
    a PostgreSQL server's, as `user` through `driver` (`connection`), which takes the options'
    conn_params; `address`: a PostgreSQL server's over TCP as `user`, its password in PGPASSFILE
    (`login_connection`). `binary`: go-tpc's path (a host's), else this machine's."""
    options = dict(options or {})
    params = str(options.pop("conn_params", "")) if socket_dir is not None or address is not None else ""
    if address is not None:
        reach = login_connection(address, port, user, params)
    else:
        reach = connection(port, socket_dir, user, params, driver)
    args = [binary or go_tpc_binary(), "tpcc", command, *reach]
    args += [f"--warehouses={warehouses}", f"--threads={threads}"]
    if command == "run":
        args += [f"--time={seconds}s", "--interval=1s"]
    for key, value in options.items():
        shown = str(value).lower() if isinstance(value, bool) else value
        args.append(f"--{key.replace('_', '-')}={shown}")
    return args


def parse_ticks(text: str) -> list[Tick]:
    """The [Current] reports, one Tick per report: a new one where a line's stamp is half a
    second past the report's first, or its type does not follow the last in sorted order."""
    ticks: list[Tick] = []
    last_op = ""
    for raw in text.splitlines():
        stamp = _STAMP.match(raw)
        at, line = (float(stamp["at"]), stamp["line"]) if stamp else (None, raw)
        m = _REPORT.match(line)
        if not m or m["scope"] != "Current":
            continue
        current = ticks[-1] if ticks else None
        late = current is not None and at is not None and current.at is not None and at - current.at > 0.5
        if current is None or late or m["op"] <= last_op:
            current = Tick(at)
            ticks.append(current)
        current.reports[m["op"]] = Report(
            m["op"], int(m["count"]), float(m["sum"]), float(m["max"]), {p: float(m[p]) for p in PERCENTILES}
        )
        last_op = m["op"]
    return ticks


def seconds_of(ticks: list[Tick]) -> list[Second]:
    """Each report's seconds since the previous one (its stamp rounded: go-tpc's ticker fires
    whole seconds after its launch; unstamped: one second each)."""
    out: list[Second] = []
    previous = 0
    for tick in ticks:
        t = max(previous + 1, round(tick.at) if tick.at is not None else previous + 1)
        out += [Second(s, 1.0 / (t - previous), tick) for s in range(previous + 1, t + 1)]
        previous = t
    return out


def interval(second: Second, warmup: int) -> dict[str, Any]:
    """A second in sysbench's shape: `qps` NOPM, `tps` every completed transaction, `p95_ms` NEW_ORDER's."""
    new_order = second.tick.reports.get(NEW_ORDER)
    return {
        "t": second.t,
        "tps": round(second.ok(), 3),
        "qps": round(second.count(NEW_ORDER) * 60, 2),
        "reads": None,
        "writes": None,
        "other": None,
        "p95_ms": new_order.percentiles["p95"] if new_order else None,
        "errors_per_s": float(round(second.errors(), 3)),
        "reconnects_per_s": 0.0,
        "warmup": int(second.t <= warmup),
    }


def weighted_median(pairs: list[tuple[float, float]]) -> float | None:
    """The value at half the total weight of (value, weight) pairs."""
    pairs = sorted(p for p in pairs if p[1] > 0)
    total = sum(w for _, w in pairs)
    seen = 0.0
    for value, weight in pairs:
        seen += weight
        if seen >= total / 2:
            return value
    return None


def type_figures(window: list[Second], op: str, span: int) -> dict[str, float | None]:
    """One transaction type over the window's seconds."""
    count = sum(s.count(op) for s in window)
    reports = [(s.tick.reports[op], s.share) for s in window if op in s.tick.reports]
    latency_sum = sum(r.sum_ms * share for r, share in reports)
    figures: dict[str, float | None] = {
        "count": round(count),
        "per_minute": round(count / span * 60, 2),
        "errors": round(sum(s.count(op + "_ERR") for s in window)),
        "avg_ms": round(latency_sum / count, 3) if count else None,
        "max_ms": max((r.max_ms for r, _ in reports), default=None),
    }
    for p in PERCENTILES:
        figures[f"{p}_ms"] = weighted_median([(r.percentiles[p], r.count * share) for r, share in reports])
    return figures


def window_summary(seconds: list[Second], warmup: int, text: str = "") -> TpccSummary | None:
    """The window's figures: every second after the warm-up. None when it holds no new order."""
    window = [s for s in seconds if s.t > warmup]
    span = len(window)
    new_orders = sum(s.count(NEW_ORDER) for s in window)
    if not span or not new_orders:
        return None
    ok, errors = sum(s.ok() for s in window), sum(s.errors() for s in window)
    seen = sorted({op for s in window for op in s.tick.reports if not op.endswith("_ERR")} | set(TYPES))
    types = {op: type_figures(window, op, span) for op in seen}
    no = types[NEW_ORDER]
    tool = _TPMC.search(text)
    return TpccSummary(
        transactions=round(ok),
        queries=round(new_orders),
        tps=round(ok / span, 2),
        qps=round(new_orders / span * 60, 2),
        errors=round(errors),
        errors_per_s=round(errors / span, 3),
        reconnects=0,
        total_time_s=float(span),
        latency_ms={
            "min": None,
            "avg": no["avg_ms"],
            "max": no["max_ms"],
            "p50": no["p50_ms"],
            "p95": no["p95_ms"],
            "p99": no["p99_ms"],
        },
        transaction_types=types,
        tool_tpmc=float(tool["tpmc"]) if tool else None,
    )


def read_output(out: Path, code: int, warmup: int) -> tuple[TpccSummary, list[dict[str, Any]]]:
    """The window's summary and the per-second intervals; WorkloadError if go-tpc failed."""
    text = out.read_text(encoding="utf-8", errors="replace")
    seconds = seconds_of(parse_ticks(text))
    summary = window_summary(seconds, warmup, text)
    if code != 0 or summary is None:
        tail = "\n".join(text.strip().splitlines()[-10:])
        how = f"died: signal {-code} ({signal.Signals(-code).name})" if code < 0 else f"exited with code {code}"
        why = how if code != 0 else "reported no new order after the warm-up"
        raise WorkloadError(f"go-tpc {why}:\n{tail}", f"full output: {out}")
    return summary, [interval(s, warmup) for s in seconds]


def known_options() -> set[str]:
    """The long flags of `go-tpc tpcc run --help` (and the global ones it lists), '_' for '-'."""
    done = subprocess.run(
        [go_tpc_binary(), "tpcc", "run", "--help"], capture_output=True, text=True, check=False, timeout=60
    )
    return {m.replace("-", "_") for m in re.findall(r"--([a-zA-Z][\w-]*)", done.stdout + done.stderr)}


_MODULE = re.compile(rb"mod\tgithub\.com/pingcap/go-tpc\t(v[0-9][\w.+-]*)")


def built_version(binary: str) -> str | None:
    """The go-tpc module version a binary was built from, read from the build information Go
    embeds in it (what `go version -m` prints: "mod github.com/pingcap/go-tpc v1.0.12 h1:..."); `go
    install` builds report "Release version: dev". None: not found (another build)."""
    try:
        with open(binary, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            found = _MODULE.search(data)
            return found.group(1).decode() if found else None
    except (OSError, ValueError):
        return None


def version() -> str | None:
    """"go-tpc v1.0.12 (go install)", as its build information says; None: not installed."""
    try:
        binary = go_tpc_binary()
    except ToolMissingError:
        return None

    def said() -> str:
        return f"go-tpc {built_version(binary) or 'of an unknown version'} (go install)"

    return per_binary([binary], ("go-tpc version",), said)
