"""sysbench: argv, and parsers for its per-second lines, final summary and histogram.

Input (sysbench 1.0.20 `run --report-interval=1 --histogram=on --percentile=95`):
    [ 1s ] thds: 2 tps: 6180.24 qps: 98910.71 (r/w/o: 86548.24/0.00/12362.47) lat (ms,95%): 0.37 err/s: 0.00 ...
followed by a latency histogram ("value |*** count") and the "SQL statistics" summary.
Output: Interval and Summary dataclasses; p50/p99 come from the histogram. `SYSBENCH` is the
tool behind perflab's Workload interface (run/workloads/__init__.py).
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from perflab.errors import ToolMissingError
from perflab.run.workloads import Workload

PERCENTILE = 95

_INTERVAL = re.compile(
    r"^\[\s*(?P<t>\d+)s\s*\]\s+thds:\s*(?P<thds>\d+)\s+tps:\s*(?P<tps>[\d.]+)\s+qps:\s*(?P<qps>[\d.]+)\s+"
    r"\(r/w/o:\s*(?P<r>[\d.]+)/(?P<w>[\d.]+)/(?P<o>[\d.]+)\)\s+"
    r"lat\s+\(ms,(?P<pct>[\d.]+)%\):\s*(?P<lat>[\d.]+)\s+err/s:\s*(?P<err>[\d.]+)\s+reconn/s:\s*(?P<reconn>[\d.]+)"
)
_HIST_ROW = re.compile(r"^\s*(?P<value>[\d.]+)\s+\|\**\s+(?P<count>\d+)\s*$")
_OPTION = re.compile(r"^\s+--(?P<name>[\w-]+)(?:\[?=(?P<kind>[^\]\s]+)\]?)?\s+.*?(?:\[(?P<default>[^\]]*)\])?\s*$")


@dataclass(frozen=True)
class Interval:
    t: int  # seconds since the start of this sysbench run
    threads: int
    tps: float
    qps: float
    reads: float
    writes: float
    other: float
    p95_ms: float
    errors_per_s: float
    reconnects_per_s: float


@dataclass(frozen=True)
class Summary:
    transactions: int
    queries: int
    tps: float
    qps: float
    errors: int
    errors_per_s: float
    reconnects: int
    total_time_s: float
    latency_ms: dict[str, float | None]  # min avg max p50 p95 p99

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sysbench_binary() -> str:
    found = shutil.which("sysbench")
    if not found:
        raise ToolMissingError("sysbench not found", "apt-get install sysbench (or `make setup`)")
    return found


def argv(
    test: str,
    command: str,
    *,
    socket: Path,
    tables: int,
    table_size: int,
    threads: int,
    seconds: int | None = None,
    checkpoint: int | None = None,
    options: dict[str, Any] | None = None,
    driver: str = "mysql",
    connect: list[str] | None = None,
    binary: str | None = None,
) -> list[str]:
    """The sysbench command line; workload options become --key-with-dashes=value.
    driver "pgsql": `socket` is the PostgreSQL server's socket directory (libpq's host).

    `checkpoint` (seconds) makes sysbench print a full report and reset its counters and
    histogram then: the final summary covers only the time after it (the warm-up's end).
    `connect` and `binary`: another connection and sysbench, for a client on a remote host (run/remote_client.py)."""
    args = [binary or sysbench_binary(), test, *(connect if connect is not None else connection(driver, socket))] + [
        f"--tables={tables}",
        f"--table-size={table_size}",
        f"--threads={threads}",
    ]
    if command == "run":
        args += [
            f"--time={seconds}",
            "--events=0",
            "--report-interval=1",
            "--histogram=on",
            f"--percentile={PERCENTILE}",
        ]
        if checkpoint:
            args.append(f"--report-checkpoints={checkpoint}")
    for key, value in (options or {}).items():
        args.append(f"--{key.replace('_', '-')}={format_value(value)}")
    return args + [command]


def connection(driver: str, socket: Path) -> list[str]:
    """How sysbench reaches the server: MariaDB's socket, or PostgreSQL's socket directory."""
    if driver == "pgsql":
        pgsql = {"host": socket, "port": 5432, "user": "postgres", "db": "sbtest"}
        return ["--db-driver=pgsql", *(f"--pgsql-{key}={value}" for key, value in pgsql.items())]
    return ["--db-driver=mysql", f"--mysql-socket={socket}", "--mysql-user=root", "--mysql-db=sbtest"]


def format_value(value: Any) -> str:
    if value is True:
        return "on"
    if value is False:
        return "off"
    return str(value)


def parse_intervals(text: str) -> list[Interval]:
    """sysbench's per-second reports, one per second of the run (see one_per_second)."""
    out = []
    for line in text.splitlines():
        m = _INTERVAL.match(line)
        if m:
            out.append(
                Interval(
                    t=int(m["t"]),
                    threads=int(m["thds"]),
                    tps=float(m["tps"]),
                    qps=float(m["qps"]),
                    reads=float(m["r"]),
                    writes=float(m["w"]),
                    other=float(m["o"]),
                    p95_ms=float(m["lat"]),
                    errors_per_s=float(m["err"]),
                    reconnects_per_s=float(m["reconn"]),
                )
            )
    return one_per_second(out)


def one_per_second(reports: list[Interval]) -> list[Interval]:
    """sysbench labels a report with the time since the threads started, rounded to the second.
    On a loaded machine its reporter can wake more than half a second late: that report (due at
    second t - 1) is labelled t, and the next one, on time again, is labelled t too. The late one
    takes t - 1 where that second has no report; else (several late in a row) it is dropped, so
    every second of a cell's series has one report (the store keys them by second)."""
    out: list[Interval] = []
    for report in reports:
        if out and report.t <= out[-1].t:
            late = out.pop()
            if late.t - 1 > (out[-1].t if out else 0):
                out.append(replace(late, t=late.t - 1))
        out.append(report)
    return out


def parse_histogram(text: str) -> list[tuple[float, int]]:
    """(latency_ms, count) rows of the `--histogram=on` block."""
    rows: list[tuple[float, int]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("Latency histogram"):
            inside = True
            continue
        if inside:
            m = _HIST_ROW.match(line)
            if m:
                rows.append((float(m["value"]), int(m["count"])))
            elif rows:
                break
    return rows


def histogram_percentile(rows: list[tuple[float, int]], pct: float) -> float | None:
    """The smallest bucket value at or above `pct` percent of events, as sysbench computes it
    (sb_histogram.c: the first bucket where the running count reaches floor(n * pct / 100 + 0.5))."""
    total = sum(c for _, c in rows)
    if not total:
        return None
    need = math.floor(total * pct / 100.0 + 0.5)
    seen = 0
    for value, count in rows:
        seen += count
        if seen >= need:
            return value
    return rows[-1][0]


def _number(pattern: str, text: str, cast: type = float) -> Any:
    m = re.search(pattern, text, re.MULTILINE)
    return cast(m.group(1)) if m else None


def parse_summary(text: str) -> Summary | None:
    """The final statistics block; None if sysbench did not get that far.

    With --report-checkpoints, earlier "Checkpoint report" blocks come first; the last block
    covers only the time since the last checkpoint, but its "total time" counts from the
    start, so the window's length is derived from its own events and rate."""
    if "SQL statistics:" not in text:
        return None
    hist = parse_histogram(text)
    text = text[text.rindex("SQL statistics:") :]
    total_time = _number(r"^\s+total time:\s+([\d.]+)s", text) or 0.0
    window_tps = _number(r"^\s+transactions:\s+\d+\s+\(([\d.]+) per sec", text)
    window_txn = _number(r"^\s+transactions:\s+(\d+)", text, int)
    if window_tps and window_txn:
        total_time = round(window_txn / window_tps, 4)
    errors = _number(r"^\s+ignored errors:\s+(\d+)", text, int) or 0
    return Summary(
        transactions=_number(r"^\s+transactions:\s+(\d+)", text, int) or 0,
        queries=_number(r"^\s+queries:\s+(\d+)", text, int) or 0,
        tps=_number(r"^\s+transactions:\s+\d+\s+\(([\d.]+) per sec", text) or 0.0,
        qps=_number(r"^\s+queries:\s+\d+\s+\(([\d.]+) per sec", text) or 0.0,
        errors=errors,
        errors_per_s=errors / total_time if total_time else 0.0,
        reconnects=_number(r"^\s+reconnects:\s+(\d+)", text, int) or 0,
        total_time_s=total_time,
        latency_ms={
            "min": _number(r"^\s+min:\s+([\d.]+)", text),
            "avg": _number(r"^\s+avg:\s+([\d.]+)", text),
            "max": _number(r"^\s+max:\s+([\d.]+)", text),
            "p50": histogram_percentile(hist, 50),
            # from the histogram like p50/p99 (sysbench prints the same figure rounded to 0.01 ms,
            # which could otherwise put p95 above p99)
            "p95": histogram_percentile(hist, 95) or _number(r"^\s+95th percentile:\s+([\d.]+)", text),
            "p99": histogram_percentile(hist, 99),
        },
    )


def parse_options_help(text: str) -> dict[str, str]:
    """Option name -> default value from `sysbench [test] help` output ('' when none)."""
    options = {}
    for line in text.splitlines():
        m = _OPTION.match(line)
        if m:
            options[m["name"].replace("-", "_")] = (m["default"] or "").strip()
    return options


def known_options(test: str) -> dict[str, str]:
    """Every option sysbench accepts for `test`, with its default: general, mysql driver, test."""
    binary = sysbench_binary()
    out: dict[str, str] = {}
    for args in ([binary, "--help"], [binary, test, "help"]):
        done = subprocess.run(args, capture_output=True, text=True, check=False, timeout=60)
        out.update(parse_options_help(done.stdout))
    return out


def effective_options(defaults: dict[str, str], argv_used: list[str]) -> dict[str, str]:
    """Defaults overlaid with what perflab passed: what sysbench actually ran with."""
    effective = dict(defaults)
    for arg in argv_used:
        if arg.startswith("--") and "=" in arg:
            key, value = arg[2:].split("=", 1)
            effective[key.replace("-", "_")] = value
    return effective


def version() -> str:
    done = subprocess.run([sysbench_binary(), "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


TEST_RE = re.compile(r"^[A-Za-z0-9_]+\Z")
# sysbench's bundled tests a server without `sysbench_writes` runs (PostgreSQL): those that only
# read, and the OLTP writes, whose deadlocks sysbench 1.0.20 rolls back and counts as ignored
# errors at read committed (42 in 8 s of oltp_read_write here; docs/storage.md)
READ_ONLY = ("oltp_read_only", "oltp_point_select", "select_random_points", "select_random_ranges")
OLTP_WRITES = ("oltp_read_write", "oltp_write_only", "oltp_insert", "oltp_update_index")
TESTS_DIR = "/usr/share/sysbench"


class Sysbench(Workload):
    name = "sysbench"
    database = "sbtest"
    throughput = "queries per second (sysbench's qps)"
    started_line = b"Threads started!"  # its clock (its reports, its checkpoint) starts here
    links_client_library = True
    remote_client = True

    def check_test(self, test: str) -> str:
        from perflab.spec.fields import fail

        # a script path is an argument of sysbench: one starting with "-" would be read as an option
        lua = test.endswith(".lua") and test.isprintable() and not test.startswith("-")
        if not TEST_RE.match(test) and not lua:
            raise fail(
                "a sysbench test name such as oltp_read_only, or a path to a .lua script",
                "the tests are the .lua files in /usr/share/sysbench",
            )
        return test

    def file_problems(self, spec: Any, kind: Any) -> list[Any]:
        from perflab.errors import Problem

        if spec.dataset.scale is not None:
            return [
                Problem(
                    "dataset.scale",
                    "tables and table_size with sysbench",
                    f"scale = {spec.dataset.scale}",
                    'scale is pgbench\'s: set tool = "pgbench", or use tables/table_size',
                )
            ]
        if spec.workload.warehouses is not None:
            return [
                Problem(
                    "workload.warehouses",
                    "no warehouses with sysbench",
                    str(spec.workload.warehouses),
                    'warehouses is go-tpc\'s: set tool = "go-tpc", or use [dataset] tables/table_size',
                )
            ]
        test = spec.workload.test
        if not kind.sysbench_writes and not test.endswith(".lua") and test not in READ_ONLY + OLTP_WRITES:
            return [
                Problem(
                    "workload.test",
                    f"a sysbench test that runs on {kind.title} ({', '.join(READ_ONLY + OLTP_WRITES)})",
                    repr(test),
                    "Debian's sysbench 1.0.20 aborts a pgsql run at the first error it cannot ignore; "
                    'or use tool = "pgbench" (tpcb-like or simple-update retry with --max-tries)',
                )
            ]
        return []

    def spec_problems(self, exp: Any) -> list[Any]:
        """The test exists and every workload option is one of its (a "did you mean" otherwise)."""
        return option_problems(exp)

    def prepare_argv(self, spec: Any, server: Any) -> list[str]:
        """`sysbench TEST prepare`, with the server kind's driver (PostgreSQL: pgsql, on its socket directory)."""
        import os

        threads = min(spec.dataset.tables, os.cpu_count() or 1)
        return self._argv(spec, server, "prepare", threads=threads, options=spec.workload.options)

    def run_argv(self, spec: Any, cell: Any, server: Any, seconds: int, checkpoint: int | None) -> list[str]:
        options = {**spec.workload.options, **cell.workload_options}
        return self._argv(
            spec, server, "run", threads=cell.threads, seconds=seconds, checkpoint=checkpoint, options=options
        )

    def training_argv(self, spec: Any, server: Any, seconds: int) -> list[str]:
        threads = max(spec.workload.threads)
        return self._argv(spec, server, "run", threads=threads, seconds=seconds, options=spec.workload.options)

    @staticmethod
    def _argv(spec: Any, server: Any, command: str, **given: Any) -> list[str]:
        """`argv` for the file's test, dataset and the server kind's driver, on `server`'s socket."""
        from perflab import servers

        driver = servers.kind(spec.experiment.server).sysbench_driver
        return argv(
            spec.workload.test,
            command,
            socket=server.socket,
            tables=spec.dataset.tables,
            table_size=spec.dataset.table_size,
            driver=driver,
            **given,
        )

    def read_output(self, out: Path, code: int, warmup: int) -> tuple[Summary, list[dict[str, Any]]]:
        from perflab.run import client

        return client.read_output(out, code, warmup)

    def effective_options(self, runner: Any, argv_used: list[str]) -> dict[str, str]:
        return effective_options(runner.sysbench_defaults, argv_used)


def option_problems(exp: Any) -> list[Any]:
    import difflib
    import os

    from perflab.errors import Problem

    test = exp.file.workload.test
    done = subprocess.run(["sysbench", test, "help"], capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0 or "options:" not in done.stdout:
        tests = os.listdir(TESTS_DIR) if os.path.isdir(TESTS_DIR) else []
        known = sorted(p.removesuffix(".lua") for p in tests if p.endswith(".lua"))
        return [Problem("workload.test", "a sysbench test", repr(test), f"known: {', '.join(known)}")]
    known_opts = known_options(test)
    problems = []
    places = [("workload.options", exp.file.workload.options)] + [
        (f"variants.{axis}.{label}.workload_options", v.workload_options)
        for axis, entries in exp.file.variants.items()
        for label, v in entries.items()
    ]
    for where, options in places:
        for key in options:
            name = key.replace("-", "_")
            if name not in known_opts:
                close = difflib.get_close_matches(name, list(known_opts), n=3)
                hint = f"did you mean {', '.join(close)}?" if close else f"see `sysbench {test} help`"
                problems.append(Problem(f"{where}.{key}", f"an option of sysbench {test}", "unknown option", hint))
    return problems


SYSBENCH = Sysbench()
