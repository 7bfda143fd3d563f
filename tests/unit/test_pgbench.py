"""pgbench's output and log (recorded from pgbench 15.18), postgresql.conf lines, and what the
spec allows on PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from perflab import spec
from perflab.errors import SpecError
from perflab.workloads import pgbench_argv, pgbench_log
from perflab.servers.postgresql.server import conf_line

# two threads' per-transaction logs (client, txn, latency_us, script, epoch_s, epoch_us, retries)
LOG_0 = "0 1 657 0 1795389218 608537 0\n0 2 68 0 1795389219 100000 0\n0 3 failed 0 1795389219 200000 1\n"
LOG_1 = "1 1 718 0 1795389218 608619 0\n1 2 64 0 1795389219 300000 0\n1 3 2000 0 1795389220 500000 0\n"


@pytest.fixture
def log(tmp_path: Path) -> np.ndarray:
    (tmp_path / "pgbench_log.77").write_text(LOG_0, encoding="ascii")
    (tmp_path / "pgbench_log.77.1").write_text(LOG_1, encoding="ascii")
    (tmp_path / "pgbench_log.other").write_text("", encoding="ascii")
    return pgbench_log.load_log(tmp_path / "pgbench_log")


def test_log_rows_are_latency_and_end_time(log):
    assert log.shape == (6, 2)
    assert sorted(log[:, 0].tolist()) == [-1, 64, 68, 657, 718, 2000]  # "failed" -> -1
    assert log[:, 1].min() == pytest.approx(1795389218.608537)


def test_window_summary_counts_only_transactions_inside_the_window(log):
    window = (1795389219.0, 1795389221.0)  # leaves out the two that ended in the warm-up
    summary = pgbench_log.window_summary(log, window, statements_per_txn=7)
    assert summary is not None
    assert summary.transactions == 3 and summary.errors == 1
    assert summary.tps == 1.5 and summary.qps == 10.5 and summary.total_time_s == 2.0
    assert summary.latency_ms["min"] == 0.064 and summary.latency_ms["max"] == 2.0
    assert summary.latency_ms["p50"] == 0.068  # nearest rank of 64, 68, 2000 us
    assert pgbench_log.window_summary(log, (1795389300.0, 1795389301.0), 1) is None


def test_per_second_series_is_counted_from_the_log_up_to_the_end_mark(log):
    """Second t holds what ended in (launch + t - 1, launch + t]; every whole second before the
    end mark is there, an empty one as 0 (a stall); what ended after the mark is not."""
    series = pgbench_log.intervals(log, 1795389218.0, 1795389221.004, 7, warmup=1)
    assert [iv["t"] for iv in series] == [1, 2, 3]
    assert [iv["tps"] for iv in series] == [2.0, 2.0, 1.0] and series[0]["qps"] == 14.0
    assert [iv["warmup"] for iv in series] == [1, 0, 0]
    assert series[0]["p95_ms"] == 0.718 and series[1]["p95_ms"] == 0.068 and series[2]["p95_ms"] == 2.0
    assert [iv["errors_per_s"] for iv in series] == [0.0, 1.0, 0.0]
    longer = pgbench_log.intervals(log, 1795389218.0, 1795389222.9, 1, warmup=1)
    assert [iv["tps"] for iv in longer] == [2.0, 2.0, 1.0, 0.0] and longer[3]["p95_ms"] is None
    cut = pgbench_log.intervals(log, 1795389218.0, 1795389219.98, 1, warmup=1)  # 20 ms short of second 2
    assert [iv["t"] for iv in cut] == [1] and cut[0]["tps"] == 2.0
    empty = pgbench_log.intervals(np.empty((0, 2)), 1795389218.0, 1795389220.0, 1, warmup=0)
    assert [(iv["t"], iv["tps"], iv["warmup"]) for iv in empty] == [(1, 0.0, 0), (2, 0.0, 0)]


def test_argv_is_a_list_with_perflab_settings_last_word_database(tmp_path):
    argv = pgbench_argv.argv(
        "select-only", socket_dir=tmp_path, port=5432, user="postgres", clients=4, jobs=2, seconds=11,
        log_prefix=tmp_path / "pgbench_log", options={"max_tries": 3},
    )  # fmt: skip
    assert "--builtin=select-only" in argv and "--protocol=prepared" in argv and "--max-tries=3" in argv
    assert "--client=4" in argv and "--jobs=2" in argv and "--time=11" in argv and "--progress=1" in argv
    assert argv[-1] == pgbench_argv.DATABASE
    script = pgbench_argv.argv("/x/my.sql", socket_dir=tmp_path, port=5432, user="u", clients=1, jobs=4, seconds=1,
                          log_prefix=tmp_path / "l")  # fmt: skip
    assert "--file=/x/my.sql" in script and "--jobs=1" in script


def test_statements_per_transaction(tmp_path):
    assert pgbench_argv.statements("tpcb-like") == 7
    script = tmp_path / "s.sql"
    script.write_text("\\set aid random(1, 100)\n-- a comment\nSELECT 1;\nUPDATE t\n  SET a = 1;\nSELECT 2\n")
    assert pgbench_argv.statements(str(script)) == 3


def test_script_verdict_from_pgbench_output():
    parsed = 'pgbench: error: connection to server on socket "/nonexistent/.s.PGSQL.5432" failed'
    assert pgbench_argv.script_problem(parsed) is None
    bad = 'pgbench: error: /tmp/bad.sql:2: syntax error in command "set"\n\\set aid random(1,\n'
    assert "syntax error" in pgbench_argv.script_problem(bad)


def test_conf_lines_are_quoted():
    assert conf_line("fsync", False) == "fsync = 'off'"
    assert conf_line("shared_buffers", "256MB") == "shared_buffers = '256MB'"
    assert conf_line("search_path", "it's") == "search_path = 'it''s'"
    with pytest.raises(ValueError):
        conf_line("bad name", 1)
    with pytest.raises(ValueError):
        conf_line("x", "a\nb")


PG = """
[experiment]
name = "pg"
server = "postgresql"
[workload]
tool = "{tool}"
test = "{test}"
{dataset}
"""


def problems(tool: str, test: str, dataset: str = "") -> list[str]:
    try:
        spec.parse(PG.format(tool=tool, test=test, dataset=dataset))
    except SpecError as exc:
        return [p.path for p in exc.problems]
    return []


def test_spec_accepts_pgbench_and_read_only_sysbench_on_postgresql():
    assert problems("pgbench", "select-only", "[dataset]\nscale = 2") == []
    assert problems("pgbench", "scripts/x.sql") == []
    assert problems("sysbench", "oltp_point_select") == []
    for write in ("oltp_read_write", "oltp_write_only", "oltp_insert", "oltp_update_index"):  # issue 35
        assert problems("sysbench", write) == [], write


def test_spec_refuses_what_postgresql_cannot_run():
    assert problems("sysbench", "oltp_delete") == ["workload.test"]
    assert problems("pgbench", "select-only", "[dataset]\ntables = 2") == ["dataset.tables"]
    assert problems("sysbench", "oltp_read_only", "[dataset]\nscale = 2") == ["dataset.scale"]
    assert problems("pgbench", "-M") == ["workload.test"]
    with pytest.raises(SpecError) as exc:
        spec.parse('[experiment]\nname = "m"\n[workload]\ntool = "pgbench"\ntest = "select-only"\n')
    assert exc.value.problems[0].path == "workload.tool" and "postgresql" in exc.value.problems[0].hint


def test_spec_refuses_mariadb_side_observers_and_client_variants_on_postgresql():
    base = "[dataset]\nscale = 1\n"
    assert problems("pgbench", "select-only", base + "[observe]\nstatus = true") == ["observe.status"]
    client = base + '[variants.c]\na = {}\nb = { client_env = { X = "1" } }\n'
    assert problems("pgbench", "select-only", client) == ["variants.c.b.client_env"]


def test_the_host_facts_name_the_pgbench_that_ran() -> None:
    from perflab import hostinfo
    from perflab.report.model import HOST_FACTS

    assert {"postgres", "pgbench"} <= set(HOST_FACTS)
    assert hostinfo.collect()["pgbench"].startswith("pgbench (PostgreSQL) 15")


def test_without_a_log_prefix_pgbench_logs_no_transaction(tmp_path):
    # a PGO training run (servers/postgresql/train.py) needs no per-transaction log
    argv = pgbench_argv.argv("select-only", socket_dir=tmp_path, port=5432, user="u", clients=2, jobs=2, seconds=1,
                        log_prefix=None)  # fmt: skip
    assert not [a for a in argv if a.startswith("--log")]
    assert "--builtin=select-only" in argv


def test_a_cells_command_and_window_through_the_workload_interface(tmp_path: Path, monkeypatch) -> None:
    """servers/postgresql/cell.py asks the Workload: pgbench's -T is the window plus its tail, its
    jobs the client's CPUs where pinned; its figures are cut from the log at perflab's marks, and a
    pgbench that failed or logged nothing there is a WorkloadError with its output's tail."""
    from types import SimpleNamespace

    from perflab.errors import WorkloadError
    from perflab import workloads

    monkeypatch.setattr("perflab.servers.postgresql.server.pg_binary", lambda name, bindir=None: name)
    exp = spec.parse(
        '[experiment]\nname = "t"\nserver = "postgresql"\n[dataset]\nscale = 1\n'
        '[workload]\ntool = "pgbench"\ntest = "tpcb-like"\nthreads = [4]\n'
    )
    wl, cell = workloads.of(exp.file), exp.cells()[0]
    server = SimpleNamespace(rundir=tmp_path, bindir=None, port=5432, client_target=(tmp_path, 5432, "postgres"))
    argv = wl.run_argv(exp.file, cell, server, 13 + wl.tail_s, 3, jobs=2)
    assert f"--time={13 + pgbench_argv.TAIL_S}" in argv and "--jobs=2" in argv and "--client=4" in argv
    assert "--jobs=4" in wl.run_argv(exp.file, cell, server, 13, 3)

    (tmp_path / "pgbench_log.9").write_text(LOG_0 + LOG_1, encoding="ascii")
    out = tmp_path / "pgbench.txt"
    out.write_text("progress: 1.0 s, 2.0 tps\n", encoding="utf-8")
    summary, series = wl.window_output(exp.file, out, 0, 1, server, 1795389218.0, (1795389219.0, 1795389221.0))
    assert summary.transactions == 3 and summary.qps == 10.5  # tpcb-like: 7 statements a transaction
    assert [iv["t"] for iv in series] == [1, 2, 3] and [iv["warmup"] for iv in series] == [1, 0, 0]
    with pytest.raises(WorkloadError, match="exited with code 1"):
        wl.window_output(exp.file, out, 1, 1, server, 1795389218.0, (1795389219.0, 1795389221.0))
    with pytest.raises(WorkloadError, match="progress: 1.0 s"):  # nothing inside: its output said why
        wl.window_output(exp.file, out, 0, 1, server, 1795389218.0, (1795389300.0, 1795389301.0))


class _Looks:
    """What each look of `wait_connected` reads: pgbench's sockets and the server's backends on its
    database, one pair a look (the last one again once they run out)."""

    def __init__(self, looks: list[tuple[int, int]], code: int | None = None) -> None:
        self.looks, self.code, self.seen = looks, code, 0

    def _look(self) -> tuple[int, int]:
        return self.looks[min(self.seen, len(self.looks)) - 1]

    def connections(self, child) -> int:
        self.seen += 1
        return self._look()[0]

    def client_backends(self, database: str) -> int:
        assert database == pgbench_argv.DATABASE
        return self._look()[1]

    def poll(self) -> int | None:  # pgbench's exit once every look is read
        return self.code if self.seen >= len(self.looks) else None


def test_the_window_waits_for_every_client_and_no_other_backend(tmp_path: Path) -> None:
    """pgbench's first connection (it reads the scale) closes before its clients connect, but its
    backend exits on its own time: a look that counted two backends for two clients while it still
    lived began the window beside its exit and a client's start (CI: 3.99 mallocs a transaction for
    2.00). Its start is the look where pgbench holds every client's socket and the database has as
    many backends, no more."""
    from perflab.workloads.pgbench import wait_connected

    # (sockets, backends): the first connection; it closed and a client connected, its backend still
    # there (2 backends); both clients connected, it still there (3); it gone
    looks = _Looks([(1, 1), (1, 2), (2, 3), (2, 2)])
    wait_connected(looks, looks, looks, 2, 10.0, tmp_path / "out")
    assert looks.seen == 4


def test_a_pgbench_that_exits_before_connecting_says_so(tmp_path: Path) -> None:
    from perflab.errors import WorkloadError
    from perflab.workloads.pgbench import wait_connected

    out = tmp_path / "pgbench.txt"
    out.write_text('pgbench: error: connection to server failed: FATAL:  sorry, too many clients already\n')
    looks = _Looks([(0, 0), (0, 0)], code=1)
    with pytest.raises(WorkloadError, match="exited with code 1(.|\n)*too many clients"):
        wait_connected(looks, looks, looks, 2, 10.0, out)


def test_sockets_counts_a_processs_open_sockets() -> None:
    import os
    import socket
    import subprocess

    from perflab.places.proc import sockets

    before = sockets(os.getpid())
    with socket.socket() as one, socket.socket() as two:
        assert (one, two) and sockets(os.getpid()) == before + 2
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid names no process
    assert sockets(gone.pid) == 0
