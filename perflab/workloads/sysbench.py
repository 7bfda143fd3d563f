"""sysbench: its argv, its options and tests, and `SYSBENCH`, the tool behind perflab's Workload
interface (workloads/__init__.py). Its output's parsers (per-second lines, summary, histogram)
are in workloads/sysbench_output.py, and importable from here too.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from perflab.errors import ToolMissingError, did_you_mean
from perflab.workloads import client, rate
from perflab.workloads.base import Workload
from perflab.workloads.sysbench_output import Summary

if TYPE_CHECKING:
    from perflab.errors import Problem
    from perflab.servers.managed import Managed
    from perflab.spec.matrix import Cell, Experiment
    from perflab.spec.schema import ExperimentFile

PERCENTILE = 95

_OPTION = re.compile(r"^\s+--(?P<name>[\w-]+)(?:\[?=(?P<kind>[^\]\s]+)\]?)?\s+.*?(?:\[(?P<default>[^\]]*)\])?\s*$")


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
    `connect` and `binary`: another connection and sysbench, for a client on a remote host (hosts/client.py)."""
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


def login_file(rundir: Path, login: dict[str, str]) -> Path:
    """sysbench's connection options (the kind's remote_login, password included) in a file only its
    owner reads, in `rundir`: its --config-file."""
    path = rundir / "sysbench.conf"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("".join(f"{key}={value}\n" for key, value in login.items() if key != "db-driver"))
    return path


def format_value(value: Any) -> str:
    if value is True:
        return "on"
    if value is False:
        return "off"
    return str(value)


def parse_options_help(text: str) -> dict[str, str]:
    """Option name -> default value from `sysbench [test] help` output ('' when none)."""
    options = {}
    for line in text.splitlines():
        m = _OPTION.match(line)
        if m:
            options[m["name"].replace("-", "_")] = (m["default"] or "").strip()
    return options


@functools.lru_cache(maxsize=16)
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


# sysbench's bundled tests a server without `sysbench_writes` runs (PostgreSQL): those that only
# read, and the OLTP writes, whose deadlocks sysbench 1.0.20 rolls back and counts as ignored
# errors at read committed (42 in 8 s of oltp_read_write here; docs/storage.md)
READ_ONLY = ("oltp_read_only", "oltp_point_select", "select_random_points", "select_random_ranges")
OLTP_WRITES = ("oltp_read_write", "oltp_write_only", "oltp_insert", "oltp_update_index")
TESTS_DIR = "/usr/share/sysbench"


def cell_argv(spec: ExperimentFile, cell: Cell, socket: Path, **remote: Any) -> list[str]:
    """The command line of a cell's client: the experiment's workload with the variant's options over it
    (`remote`: sysbench.argv's connect and binary, for a client on another host)."""
    from perflab import servers

    warmup, seconds = client.window_seconds(spec)
    return argv(
        spec.workload.test,
        "run",
        socket=socket,
        tables=spec.dataset.tables,
        table_size=spec.dataset.table_size,
        threads=cell.threads,
        seconds=warmup + seconds,
        checkpoint=warmup or None,
        options=rate.options(spec, cell),
        driver=servers.kind(spec.experiment.server).sysbench_driver,
        **remote,
    )

@dataclass(frozen=True)
class Prepare:
    """`sysbench TEST prepare` of `tables` x `table_size` rows on a MariaDB or MySQL server's socket,
    as a kind's dataset preparation takes a tool (servers/kind.Tool): the benches' datasets, without an
    experiment file (bench/restore.py: mysqld_dataset.prepare(work, Prepare("oltp_read_only", 4, 10000)))."""

    test: str
    tables: int
    table_size: int
    options: dict[str, Any] = field(default_factory=dict)
    name: ClassVar[str] = "sysbench"
    database: ClassVar[str] = "sbtest"
    connects_by_tcp: ClassVar[bool] = False

    def setup_sql(self) -> str:
        return ""

    def prepare_argv(self, spec: ExperimentFile | None, server: Managed) -> list[str]:
        threads = min(self.tables, os.cpu_count() or 1)
        return argv(self.test, "prepare", socket=server.socket, tables=self.tables, table_size=self.table_size,
                    threads=threads, options=self.options)  # fmt: skip

    def training_argv(self, spec: ExperimentFile, server: Managed, seconds: int) -> list[str]:
        raise NotImplementedError("a bench's dataset trains no build")


class Sysbench(Workload):
    name = "sysbench"
    database = "sbtest"
    throughput = "queries per second (sysbench's qps)"
    links_client_library = True
    client_packages: ClassVar[dict[str, str]] = {"sysbench": "sysbench"}

    def start_watch(self, server: Managed, end: Any, cell: Cell, child: Any, out: Path, deadline_s: float) -> Any:
        """Its "Threads started!": every thread connected; its clock (its reports, its checkpoint) starts there."""
        return client.StartWatch(functools.partial(client.wait_threads_started, out, child, deadline_s))

    def file_problems(self, spec: ExperimentFile, kind: Any) -> list[Any]:
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

    def spec_problems(self, exp: Experiment) -> list[Problem]:
        """The test exists and every workload option is one of its (a "did you mean" otherwise)."""
        return option_problems(exp)

    def prepare_argv(self, spec: ExperimentFile | None, server: Managed) -> list[str]:
        """`sysbench TEST prepare`, with the server kind's driver (PostgreSQL: pgsql, on its socket directory)."""
        import os

        assert spec is not None, "a workload prepares the dataset of its experiment file"
        threads = min(spec.dataset.tables, os.cpu_count() or 1)
        return self._argv(spec, server, "prepare", threads=threads, options=spec.workload.options)

    def remote_prepare_argv(
        self, spec: ExperimentFile, server: Managed, login: dict[str, str], password: str
    ) -> tuple[list[str], dict[str, str]]:
        """`sysbench TEST prepare` over TCP, its login in --config-file (mode 600, beside the server's files)."""
        import os

        from perflab.places.proc import clean_env

        path = server.rundir / "sysbench-prepare.conf"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("".join(f"{key}={value}\n" for key, value in login.items() if key != "db-driver"))
        connect = [f"--db-driver={login['db-driver']}", f"--config-file={path}"]
        threads = min(spec.dataset.tables, os.cpu_count() or 1)
        argv = self._argv(spec, server, "prepare", threads=threads, options=spec.workload.options, connect=connect)
        return argv, clean_env()

    def run_argv(
        self, spec: ExperimentFile, cell: Cell, server: Managed, seconds: int, checkpoint: int | None, jobs: int | None = None
    ) -> list[str]:
        options = rate.options(spec, cell)
        return self._argv(
            spec, server, "run", threads=cell.threads, seconds=seconds, checkpoint=checkpoint, options=options
        )

    def training_argv(self, spec: ExperimentFile, server: Managed, seconds: int) -> list[str]:
        threads = max(spec.workload.threads)
        return self._argv(spec, server, "run", threads=threads, seconds=seconds, options=spec.workload.options)

    @staticmethod
    def _argv(spec: ExperimentFile, server: Managed, command: str, **given: Any) -> list[str]:
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
        return client.read_output(out, code, warmup)

    def effective_options(self, spec: ExperimentFile, argv_used: list[str]) -> dict[str, str]:
        """The test's defaults (asked of this machine's sysbench once: known_options) under what perflab passed."""
        return effective_options(known_options(spec.workload.test), argv_used)

    def login_command(
        self, spec: ExperimentFile, cell: Cell, server: Managed, login: dict[str, str], seconds: int
    ) -> tuple[list[str], dict[str, str] | None]:
        """Its connection options, password included, in a file only its owner reads (--config-file)."""
        path = login_file(server.rundir, login)
        return cell_argv(spec, cell, Path(server.socket), connect=[f"--db-driver={login['db-driver']}",
                                                                     f"--config-file={path}"]), None  # fmt: skip

    def host_command(
        self, spec: ExperimentFile, cell: Cell, server: Managed, login: dict[str, str], remote: Any, seconds: int | None = None
    ) -> tuple[list[str], dict[str, str] | None, str | None]:
        options = {key: value for key, value in login.items() if key != "db-driver"}
        connect = [f"--db-driver={login['db-driver']}", f"--config-file={remote.write_config(options, cell.order)}"]
        argv, script = remote.command(spec, cell, server.socket, connect)
        return argv, None, script

    turn_clock = True

    def seat_client(self, seat: Any, seconds: int) -> None:
        """The test through turns.lua (the seat's TurnClock), where its client runs (`seat.end`: here,
        its client variant's environment checked in its maps; or on its client host); connected once it
        prints "Threads started!". Over TCP as the run's login (`seat.login`: a server or a client on a
        host), its password in a file only its owner reads."""
        spec, server, login, end = seat.runner.exp.file, seat.server, seat.login, seat.end
        connect = None
        if login is not None:
            path = end.config_file(server, login, seat.cell.order)
            connect = [f"--db-driver={login['db-driver']}", f"--config-file={path}"]
        script, test = end.turns_test(spec.workload.test)
        seat.command = argv(
            script,
            "run",
            socket=server.socket,
            tables=spec.dataset.tables,
            table_size=spec.dataset.table_size,
            threads=seat.cell.threads,
            seconds=seconds,
            options={**spec.workload.options, **seat.cell.workload_options},  # no rate: design refuses it
            driver=seat.runner.kind.sysbench_driver,
            connect=connect,
            binary=end.binary,
        )
        env = end.seat_env(seat.cell, server, seat.clock.environment(test))
        seat.child = end.seat_start(seat.command, env, seat.out)
        watch = client.StartWatch(functools.partial(client.wait_threads_started, seat.out, seat.child, spec.experiment.timeout_margin))
        seat.client_fields = end.seat_started(seat.child, seat.cell, seat.out)
        watch.wait()


def option_problems(exp: Experiment) -> list[Problem]:
    import difflib
    import os

    from perflab.errors import Problem

    test = exp.file.workload.test
    done = subprocess.run(["sysbench", test, "help"], capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0 or "options:" not in done.stdout:
        tests = os.listdir(TESTS_DIR) if os.path.isdir(TESTS_DIR) else []
        known = sorted(p.removesuffix(".lua") for p in tests if p.endswith(".lua"))
        hint = did_you_mean(test, known, f"known: {', '.join(known)}")
        return [Problem("workload.test", "a sysbench test", repr(test), hint)]
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
