"""The value types of an experiment file, each with its own validator and limits.

A value is checked where it stands, so every bad entry of a table is reported at its own key
path (`variants.alloc.je.env.LD_PRELOAD`), even when another entry of the same table is bad.
A validator raises `fail(expected, hint)`; spec/problems.py turns it into a Problem.

    Duration: "20s" -> 20.0    Fraction: "1%" -> 0.01    ServerOptions: {"sort_buffer_size": "2M"}
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ConfigDict, StrictBool, StrictInt
from pydantic_core import PydanticCustomError

from perflab import allocators
from perflab.units import parse_duration

# \Z, not $: `$` also matches before a final newline, which let "name\n" through
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
OPTION_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*\Z")
# sysbench options perflab sets itself; a user value would silently break the measurement
RESERVED_SYSBENCH = {
    "threads",
    "time",
    "events",
    "tables",
    "table_size",
    "report_interval",
    "histogram",
    "percentile",
    "db_driver",
    "mysql_socket",
    "mysql_host",
    "mysql_port",
    "mysql_user",
    "mysql_password",
    "mysql_db",
    "warmup_time",
    "pgsql_host",
    "pgsql_port",
    "pgsql_user",
    "pgsql_password",
    "pgsql_db",
}
# environment perflab controls; a variant setting it would bypass the allocator check
RESERVED_ENV = {"LD_PRELOAD", "LD_LIBRARY_PATH"}
# and what loads code into a process beside it (issue 48: an experiment file's processes run as root):
# every variable of the dynamic loader (LD_AUDIT, LD_BIND_NOW, ...) and iconv's module path
RESERVED_ENV_PREFIX = "LD_"
RESERVED_LOADER_ENV = {"GCONV_PATH"}
# server options perflab writes itself (its own files on tmpfs, its port); compared with '-' as '_'
RESERVED_SERVER = {"datadir", "socket", "port", "bind_address", "pid_file", "log_error", "tmpdir", "user"}
# and PostgreSQL's (server = "postgresql": its postgresql.conf is perflab's)
RESERVED_SERVER |= {
    "listen_addresses",
    "unix_socket_directories",
    "data_directory",
    "config_file",
    "dynamic_shared_memory_type",
    "logging_collector",
    "hba_file",
    "ident_file",
}
# who may reach the server and what files it may read or write (docs/trust.md, issue 48)
RESERVED_SERVER |= {"skip_networking", "secure_file_priv", "unix_socket_permissions", "unix_socket_group"}

# Limits on hostile or mistaken input: each is far beyond a real experiment, and keeps
# validation, the matrix and the option file bounded (a huge number is an error, not a hang).
MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 12  # tables and arrays inside each other; variants.axis.label.env.NAME is 5
MAX_LINE_DOTS = 32  # tomllib takes quadratic time in a dotted key's parts: 10,000 take seconds
MAX_DURATION_S = 7 * 24 * 3600
MAX_THREADS = 10_000  # one server connection each
MAX_TABLES = 10_000
MAX_TABLE_SIZE = 2**31 - 1  # sysbench's id column is a signed INT
MAX_PGBENCH_SCALE = 100_000  # 100,000 x 100,000 rows: far beyond any tmpfs
MAX_WAREHOUSES = 1000  # go-tpc tpcc --warehouses: about 100 MB of tmpfs each (docs/workloads.md)
MAX_REPEATS = 1000
# [workload] rate: transactions a second over all client threads (sysbench's and pgbench's --rate);
# sysbench's event queue holds 131,072 events, so a rate far beyond a server fills it within a second
MAX_RATE = 1_000_000
MAX_CELLS = 20_000
INT64 = 2**63

STRICT = ConfigDict(extra="forbid", frozen=True)  # every section and table: unknown keys are errors; frozen


def fail(expected: str, hint: str | None = None, found: str | None = None) -> PydanticCustomError:
    context = {"expected": expected, "hint": hint or "", "found": found or ""}  # found: "" -> the input, shown
    return PydanticCustomError("perflab", "{expected}", context)


PGBENCH_BUILTINS = ("select-only", "tpcb-like", "simple-update")


def pgbench_test(value: str) -> str:
    """A pgbench builtin, or a script's path (an argument of pgbench: never one starting with '-')."""
    if value in PGBENCH_BUILTINS:
        return value
    if value.startswith("-") or not value.isprintable() or "@" in value or value.endswith("/"):
        raise fail(
            f"a pgbench builtin ({', '.join(PGBENCH_BUILTINS)}) or the path of a script file",
            'test = "select-only", or test = "scripts/my.sql" (pgbench -f)',
        )
    return value


SYSBENCH_TEST = re.compile(r"^[A-Za-z0-9_]+\Z")
GOTPC_TESTS = ("tpcc",)  # go-tpc's tpch and ch need another dataset and report no per-second NOPM


def sysbench_test(value: str) -> str:
    """A sysbench test name, or a .lua script's path (an argument of sysbench: never one starting with '-')."""
    lua = value.endswith(".lua") and value.isprintable() and not value.startswith("-")
    if not SYSBENCH_TEST.match(value) and not lua:
        raise fail(
            "a sysbench test name such as oltp_read_only, or a path to a .lua script",
            "the tests are the .lua files in /usr/share/sysbench",
        )
    return value


def gotpc_test(value: str) -> str:
    if value not in GOTPC_TESTS:
        raise fail(f"a go-tpc test perflab runs ({', '.join(GOTPC_TESTS)})", 'test = "tpcc"')
    return value


TEST_CHECKS = {"sysbench": sysbench_test, "pgbench": pgbench_test, "go-tpc": gotpc_test}  # by [workload] tool


def storage_value(value: str) -> str:
    """[experiment] storage: "tmpfs", or an absolute path (whether it exists is the machine's
    question, asked by preflight: run/storage.py)."""
    if value == "tmpfs":
        return value
    if not value.startswith("/") or not value.isprintable() or len(value) > 4096:
        raise fail('"tmpfs" or the absolute path of a directory on disk', 'e.g. storage = "/var/tmp/perflab"')
    return value


def _duration(value: Any) -> float:
    try:
        seconds = parse_duration(value)
    except (ValueError, TypeError, AttributeError, OverflowError):
        raise fail("a duration", 'write it like "20s", "1m30s" or "500ms"') from None
    if seconds > MAX_DURATION_S:
        raise fail("a duration of at most 7 days", 'write it like "20s", "1m30s" or "500ms"')
    return seconds


Duration = Annotated[float, BeforeValidator(_duration)]
OptionValue = str | StrictInt | float | StrictBool


# Keys and values are checked one by one (not the whole table at once) so that every bad
# entry is reported at its own key path, even when another entry of the table is also bad.
def _server_option_name(name: str) -> str:
    if not OPTION_NAME_RE.match(name):
        raise fail("a server option name like sort_buffer_size", "letters, digits, '_' and '-'")
    if name.lower().replace("-", "_") in RESERVED_SERVER:
        raise fail(f"no {name} (perflab sets it)", "each server gets its own datadir, socket, port and logs on tmpfs")
    return name


def _one_line(value: Any) -> Any:
    if isinstance(value, str) and ("\n" in value or "\r" in value):
        raise fail("a one-line value", "option files hold one option per line")
    if isinstance(value, str) and _control(value):
        raise fail("a value without control characters", f"remove the {_control(value)}")
    return value


def _control(text: str) -> str:
    """The first control character in `text` (a tab is text), spelled as an escape; or ''."""
    bad = next((c for c in text if (ord(c) < 0x20 and c != "\t") or 0x7F <= ord(c) < 0xA0), "")
    return f"\\u{ord(bad):04x}" if bad else ""


def _argv_value(value: Any) -> Any:
    if isinstance(value, str) and "\0" in value:
        raise fail("a value without NUL bytes", "remove the \\u0000: a command-line argument cannot hold one")
    return value


def _workload_option_name(key: str) -> str:
    if key.replace("-", "_") in RESERVED_SYSBENCH:
        raise fail(
            f"no '{key}' (perflab sets it)",
            "use workload.threads, dataset.tables/table_size, experiment.duration",
        )
    if not OPTION_NAME_RE.match(key):
        raise fail("an option name of letters, digits and '_'", "see `sysbench <test> help` for the names")
    return key


def _env_name(name: str) -> str:
    if not ENV_NAME_RE.match(name):
        raise fail(
            "an environment variable name like MALLOC_ARENA_MAX", "letters, digits and '_', not starting with a digit"
        )
    if name in RESERVED_ENV:
        raise fail(f"no {name} in env (reserved: perflab's own)", 'use preload = "jemalloc" or a path instead')
    if name.startswith(RESERVED_ENV_PREFIX) or name in RESERVED_LOADER_ENV:
        raise fail(
            f"no {name} in env (reserved: LD_* and GCONV_PATH load code into processes perflab runs as root)",
            "a library goes in with preload = \"jemalloc\" or a path (client_preload for the client); "
            "see `perflab docs trust-experiment-files`",
        )
    if name == allocators.TRACER_ENV:
        raise fail(
            f"no {name} in env (perflab sets it)",
            "it names the allocation counter's file: set alloc = true under [observe] and perflab gives the "
            "counter a file of its own",
        )
    return name


def _env_value(value: Any) -> Any:
    """An environment variable's value as the process gets it: 8 and 0.5 as "8" and "0.5"."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise fail("a string, an integer or a number", 'write it like "text", 3 or 2.5')
    if "\0" in str(value):
        raise fail("a value without NUL bytes", "remove the \\u0000")
    return str(value)


def check_axis_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise fail("an axis name of letters, digits, '.', '_' or '-'", "it names a column of the report")
    return name


LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*\Z")


def check_label(name: str) -> str:
    if not LABEL_RE.match(name):
        raise fail(
            "a variant label of letters, digits, '.', '_', '+' or '-'",
            "labels name cells (axis=label/tN/rN): no spaces, '/', ',' or '='",
        )
    return name


def check_non_empty_axis(entries: dict[str, Any]) -> dict[str, Any]:
    if not entries:
        raise fail("at least one variant", "add e.g. baseline = {} under the axis, or remove the axis")
    return entries


ServerOptions = dict[
    Annotated[str, AfterValidator(_server_option_name)], Annotated[OptionValue, AfterValidator(_one_line)]
]
EnvVars = dict[
    Annotated[str, AfterValidator(_env_name)], Annotated[str, BeforeValidator(_env_value)]
]
WorkloadOptions = dict[
    Annotated[str, AfterValidator(_workload_option_name)], Annotated[OptionValue, AfterValidator(_argv_value)]
]


def _fraction(value: Any) -> float:
    """ "1%" or 0.01 -> 0.01."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            value = float(value.strip()[:-1]) / 100
        except ValueError:
            raise fail("a percentage", 'write it like "1%" or 0.01') from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail("a percentage", 'write it like "1%" or 0.01')
    if not 0 < value < 1:
        raise fail("a percentage between 0% and 100%", 'write it like "1%" or 0.01')
    return float(value)


Fraction = Annotated[float, BeforeValidator(_fraction)]
MAX_MARGIN = 0.25


def _margin(value: float) -> float:
    if value > MAX_MARGIN:
        raise fail(
            f"a margin of at most {MAX_MARGIN:.0%}",
            'write it like "2%": ratios whose interval lies within 0.98-1.02 are equivalent',
        )
    return value


Margin = Annotated[float, BeforeValidator(_fraction), AfterValidator(_margin)]
CELL_OVERHEAD_S = 3.0  # restore + start + stop of one cell, measured here at about 1-2 s (run/scheduler.py)
AUTO_FIELDS = ("stop", "target_ci", "min_repeats", "max_repeats", "time_budget", "budget", "spending")


def _rate(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(
            "a whole number of transactions a second, such as 1500",
            "rate = N: N transactions a second over all client threads "
            "(`perflab docs workloads#load-at-a-fixed-rate-open-loop`)",
        )
    if not 1 <= value <= MAX_RATE:
        raise fail(
            f"a rate from 1 to {MAX_RATE:,} transactions a second",
            "leave rate out for a closed loop (each client sends its next transaction when the last returns)",
        )
    return value


# [workload] rate and a variant's rate (a rate axis): open loop at that many transactions a second
Rate = Annotated[Any, AfterValidator(_rate)]
