"""pgbench: argv, and the cell's run (its per-transaction log's parser: pgbench_log.py).

A cell runs one `pgbench -n -c CLIENTS -j JOBS -T WARMUP+WINDOW+TAIL -P 1 -M prepared --max-tries N
--log --log-prefix RUN/pgbench_log {-b BUILTIN | -f SCRIPT}`. pgbench has no checkpoint that
resets its statistics (sysbench's --report-checkpoints), so the window's figures come from the
per-transaction log (one line per transaction, PostgreSQL 15 format):
    client_id transaction_no time_us script_no time_epoch time_epoch_us [retries]
    0 1 657 0 1795389218 608537 0
`time_us` is "failed" for a transaction that failed (serialization or deadlock, after its tries).
Only transactions that ended after the window's start count, so the latency percentiles are
the window's alone; the window is perflab's (start, end) marks, and pgbench runs past it until
perflab ends it (run/window.py), so no backend exits inside (exact: every
transaction is logged, not --aggregate-interval's bins, which hold no percentiles). The
per-second series is counted from the same log, in seconds from its start (every client
connected: `wait_connected`); -P 1's progress lines stay in the cell's pgbench.txt for a reader.

    summary = window_summary(load_log(rundir / "pgbench_log"), (start_epoch, end_epoch), 1)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from perflab.workloads.base import Workload
from perflab.workloads.pgbench_argv import DATABASE, TAIL_S, argv, cell_argv, init_argv, statements
from perflab.workloads.pgbench_log import intervals, load_log, rate_record, window_summary
from perflab.workloads.sysbench_output import Summary

if TYPE_CHECKING:
    from perflab.errors import Problem
    from perflab.servers.managed import Managed
    from perflab.spec.matrix import Cell, Experiment
    from perflab.spec.schema import ExperimentFile

class Pgbench(Workload):
    """pgbench on PostgreSQL: its cells are measured by run/window.py (the
    per-transaction log), its dataset filled by servers/postgresql/dataset.py."""

    name = "pgbench"
    database = DATABASE
    throughput = "statements per second (transactions x the script's statements)"
    dataset_size = ("dataset.scale", "scale")
    client_packages: ClassVar[dict[str, str]] = {"pgbench": "postgresql-client-15"}
    client_dirs = ("/usr/lib/postgresql/15/bin",)  # Debian's, where postgresql-client-15 puts it

    def file_problems(self, spec: ExperimentFile, kind: Any) -> list[Any]:
        from perflab.errors import Problem

        if not kind.runs_pgbench:
            return [
                Problem(
                    "workload.tool", f"sysbench or go-tpc on {kind.title}", '"pgbench"', 'set server = "postgresql"'
                )
            ]
        if spec.workload.warehouses is not None:
            return [
                Problem(
                    "workload.warehouses",
                    "no warehouses with pgbench",
                    str(spec.workload.warehouses),
                    "warehouses is go-tpc's: pgbench's dataset is [dataset] scale",
                )
            ]
        if "test" not in spec.workload.model_fields_set:
            return [
                Problem(
                    "workload.test",
                    "a pgbench test",
                    "none (sysbench's oltp_read_only is the default)",
                    'test = "select-only" (or tpcb-like, simple-update, or a script path)',
                )
            ]
        sysbench_keys = sorted(spec.dataset.model_fields_set & {"tables", "table_size"})
        if sysbench_keys:
            return [
                Problem(
                    f"dataset.{sysbench_keys[0]}",
                    "scale (pgbench's dataset), not sysbench's tables",
                    sysbench_keys[0],
                    "write [dataset] scale = N: pgbench -i -s N, 100,000 rows per unit",
                )
            ]
        return []

    def prepare_argv(self, spec: ExperimentFile | None, server: Managed) -> list[str]:
        """`pgbench -i -s SCALE`, by the server build's own pgbench when it has one."""
        from perflab.servers.postgresql.server import SUPERUSER, of, pg_binary

        binary = pg_binary("pgbench", of(server).bindir)
        assert spec is not None, "a workload prepares the dataset of its experiment file"
        return init_argv(spec.dataset.scale or 1, socket_dir=server.rundir, port=server.port, user=SUPERUSER, binary=binary)

    def remote_prepare_argv(
        self, spec: ExperimentFile, server: Managed, login: dict[str, str], password: str
    ) -> tuple[list[str], dict[str, str]]:
        """`pgbench -i -s SCALE` over TCP as the run's role, its password in a passfile (PGPASSFILE)."""
        from perflab.workloads.pgbench_argv import prepare_argv

        return prepare_argv(spec, server, password)

    def login_command(
        self, spec: ExperimentFile, cell: Cell, server: Managed, login: dict[str, str], seconds: int
    ) -> tuple[list[str], dict[str, str] | None]:
        from perflab.workloads.pgbench_argv import login_command

        return login_command(spec, cell, server, login, seconds)

    def host_command(
        self, spec: ExperimentFile, cell: Cell, server: Managed, login: dict[str, str], remote: Any, seconds: int | None = None
    ) -> tuple[list[str], dict[str, str] | None, str | None]:
        from perflab.workloads.pgbench_argv import host_command

        return host_command(spec, cell, server, login, remote, seconds)

    def fetch_log(self, remote: Any, cell: Cell, local: Path) -> None:
        from perflab.workloads.pgbench_log import fetch_log

        fetch_log(remote, cell, local)

    def training_argv(self, spec: ExperimentFile, server: Managed, seconds: int) -> list[str]:
        """The installed pgbench (its own counts are not the server's), without a transaction log."""
        from perflab.servers.postgresql.server import SUPERUSER, pg_binary

        clients = max(spec.workload.threads)
        return argv(
            spec.workload.test,
            socket_dir=server.rundir,
            port=server.port,
            user=SUPERUSER,
            clients=clients,
            jobs=clients,
            seconds=seconds,
            log_prefix=None,
            options=spec.workload.options,
            binary=pg_binary("pgbench"),
        )

    def spec_problems(self, exp: Experiment) -> list[Problem]:
        """Its options and script, asked of the server's own pgbench."""
        from perflab.workloads.pgbench_check import pgbench_problems

        return pgbench_problems(exp)

    def dataset_estimate(self, exp: Experiment) -> int:
        """pgbench -i -s SCALE: about 16 MiB a unit, with room."""
        return int((exp.file.dataset.scale or 1) * SCALE_BYTES * 1.2)

    def effective_options(self, spec: ExperimentFile, argv_used: list[str]) -> dict[str, str]:
        from perflab.workloads.sysbench import effective_options

        return effective_options({}, argv_used)

    # a sequential cell (run/window.py): -T reaches TAIL_S past the window, and perflab
    # ends pgbench as -T would (SIGALRM: each client finishes its transaction) once the window's end
    # mark is taken: every backend still runs then, however late a busy or paused machine takes the
    # mark, so their context switches and PSS are read live (an exited one's are lost; with a 1 s
    # tail, a mark 1 s late read a negative sum)
    tail_s = TAIL_S

    def run_argv(
        self, spec: ExperimentFile, cell: Cell, server: Managed, seconds: int, checkpoint: int | None, jobs: int | None = None
    ) -> list[str]:
        """pgbench cannot reset its statistics (`checkpoint` unused): every transaction is logged."""
        return cell_argv(spec, cell, server, seconds, jobs or cell.threads)

    def start_watch(self, server: Managed, end: Any, cell: Cell, child: Any, out: Path, deadline_s: float) -> Any:
        """Every client connected (`wait_connected`): its log's seconds count from there."""
        from functools import partial

        from perflab.workloads.client import StartWatch

        return StartWatch(partial(wait_connected, server, end, child, cell.threads, deadline_s, out))

    def end_now(self, child: Any) -> None:
        end_now(child)

    def read_output(self, out: Path, code: int, warmup: int) -> tuple[Summary, list[dict[str, Any]]]:
        raise NotImplementedError("pgbench's figures are cut from its log at the window's marks: window_output")

    def window_output(
        self,
        spec: ExperimentFile,
        out: Path,
        code: int,
        warmup: int,
        server: Managed,
        launched: float,
        window: tuple[float, float],
        rate: int | None = None,
    ) -> tuple[Summary, list[dict[str, Any]]]:
        """The window's figures from the per-transaction log in the server's run directory, cut at
        perflab's marks; WorkloadError when pgbench failed or logged nothing inside. `rate`: the
        cell's --rate, whose log carries each transaction's schedule lag (`summary.rate`)."""
        from dataclasses import replace

        from perflab.errors import WorkloadError

        log = load_log(server.rundir / "pgbench_log", lag=bool(rate))
        per_txn = statements(spec.workload.test)
        summary = window_summary(log, window, per_txn)
        if rate and summary is not None:
            summary = replace(summary, rate=rate_record(log, launched, window, rate, warmup))
        if code != 0 or summary is None:
            text = out.read_text(encoding="utf-8", errors="replace")
            tail = "\n".join(text.strip().splitlines()[-10:])
            raise WorkloadError(f"pgbench exited with code {code}:\n{tail}", f"full output: {out}")
        return summary, intervals(log, launched, window[1], per_txn, warmup)

    # the interleaved design: counted from the per-transaction log (workloads/turn_log.py)
    def seat_client(self, seat: Any, seconds: int) -> None:
        """pgbench logging every transaction into the seat's run directory (here, or its directory on
        its client host); connected once the postmaster has a backend on its database for every
        client. (No client variants: PostgreSQL refuses them.)"""
        spec, server, end = seat.runner.exp.file, seat.server, seat.end
        # where it runs (`end`: here, or its client host, its log there fetched at the end): as a
        # sequential cell's, for `seconds`; over TCP as the run's role, its password in a passfile
        seat.command, env = end.command(seat.runner, seat.cell, server, seconds)
        seat.child = end.start(seat.command, env, seat.out)
        seat.client_fields = end.seat_started(seat.child, seat.cell, seat.out)
        wait_connected(server, end, seat.child, seat.cell.threads, spec.experiment.timeout_margin, seat.out)

    def seat_counts(self, seat: Any) -> Any:
        from perflab.workloads.turn_log import LogCounts

        rundir = seat.server.rundir  # its log, written here or fetched here from its client host
        fetched = lambda: seat.end.fetched_log(rundir)  # noqa: E731
        return LogCounts(rundir / "pgbench_log", statements(seat.runner.exp.file.workload.test), seat.spans, fetched)

    def seat_end(self, seat: Any) -> None:
        """End pgbench as its -T does (SIGALRM, then SIGCONT): each client finishes its
        transaction and the logs are flushed; WorkloadError if it fails or hangs."""
        from perflab.errors import WorkloadError

        child, margin = seat.child, seat.runner.exp.file.experiment.timeout_margin
        end_now(child)
        seat.resume()
        try:
            code = child.wait(margin)
        except TimeoutError:
            raise WorkloadError(
                f"pgbench did not end within {margin:.0f} s of its SIGALRM", f"its output: {seat.out}"
            ) from None
        finally:
            seat.pause()
        if code != 0:
            from perflab.places.proc import read_tail

            tail = read_tail(seat.out, 10) or ""
            raise WorkloadError(f"pgbench exited with code {code}:\n{tail}", f"full output: {seat.out}")


def end_now(child: Any) -> None:
    """End a running pgbench as its -T does: SIGALRM (PostgreSQL 15's and 18's pgbench still
    time -T with alarm()), after which each client finishes its transaction and it exits."""
    import signal

    on_host = getattr(child, "signal_client", None)  # hosts/child.RemoteChild: pgbench alone, there
    if on_host is not None:
        on_host("ALRM")
        return
    try:
        os.kill(child.pid, signal.SIGALRM)
    except ProcessLookupError:
        pass


def wait_connected(server: Managed, end: Any, child: Any, clients: int, deadline_s: float, out: Path) -> float:
    """time.monotonic() once every client of pgbench has connected and no other backend serves
    DATABASE: pgbench holds a socket for each of its `clients` (counted where it runs, by the client
    `end`; its first connection, which reads the scale, is closed before they open) and the server's
    postmaster has `clients` backends on DATABASE, no more (their titles name it, read where it runs:
    that first connection's backend has exited). Until 2026-11-30 a window with no warm-up began at
    pgbench's launch and one with a server host counted the backends once: both took in that backend's
    exit and the clients' start ([observe] alloc, CI: 3.99 mallocs a transaction for 2.00).
    WorkloadError if pgbench exits first or is not connected after `deadline_s`."""
    import time

    from perflab.errors import WorkloadError
    from perflab.places.proc import read_tail
    from perflab.servers.postgresql.server import of

    postgres, deadline = of(server), time.monotonic() + deadline_s
    while time.monotonic() < deadline and child.poll() is None:
        if end.connections(child) >= clients and postgres.client_backends(DATABASE) == clients:
            return time.monotonic()
        time.sleep(0.02)
    tail = read_tail(out, 10) or ""
    code = child.poll()
    said = f"exited with code {code}" if code is not None else f"had not connected after {deadline_s:.0f} s"
    raise WorkloadError(f"pgbench {said}:\n{tail}", f"full output: {out}")


SCALE_BYTES = 16 << 20  # pgbench -i -s 1: 100,000 accounts, about 15 MiB with the index
PGBENCH = Pgbench()
