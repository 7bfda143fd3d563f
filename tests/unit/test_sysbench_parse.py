"""sysbench 1.0.20: argv, and the parsers against real recorded outputs (tests/data/sysbench).

Each recording NAME.txt has NAME.json next to it (written by tests/data/regen_sysbench.py):
how it was recorded and what the parsers returned then. Besides comparing with that, the
tests check facts that hold for any real output, found independently of the parsers.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from perflab.workloads import sysbench, sysbench_output

DATA = Path(__file__).resolve().parents[1] / "data" / "sysbench"
RECORDINGS = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(DATA.glob("*.json"))}
RUNS = sorted(n for n, doc in RECORDINGS.items() if "intervals" in doc)
OK_RUNS = sorted(n for n in RUNS if RECORDINGS[n]["recorded_with"]["exit_code"] == 0)
HELPS = sorted(n for n, doc in RECORDINGS.items() if "options" in doc)

# sysbench's latency histogram: 1024 buckets, logarithmic from 0.001 ms to 100 s; an event
# goes to the nearest bucket, whose printed value is within half a bucket of the event's.
HALF_BUCKET = math.exp(0.5 * math.log(100_000 / 0.001) / 1023)
# queries per transaction of oltp_read_only: these counts, plus BEGIN and COMMIT
QUERY_KINDS = ("point_selects", "simple_ranges", "sum_ranges", "order_ranges", "distinct_ranges")


def text_of(name: str) -> str:
    return (DATA / f"{name}.txt").read_text(encoding="utf-8")


def recorded(name: str) -> dict[str, Any]:
    return RECORDINGS[name]["recorded_with"]


def final_block(text: str) -> str:
    return text[text.rindex("SQL statistics:") :]


def stat(label: str, text: str) -> float:
    """A number of the final statistics block, read without the parser under test."""
    match = re.search(rf"^\s+{re.escape(label)}:\s+([\d.]+)", final_block(text), re.MULTILINE)
    assert match, label
    return float(match.group(1))


def test_recordings_present() -> None:
    assert {"oltp_read_only_t2", "order_by_only_t2", "oltp_read_only_t2_checkpoint"} <= set(OK_RUNS)
    assert "failed_wrong_socket" in RUNS and "failed_wrong_socket" not in OK_RUNS
    assert {"help_general", "help_oltp_read_only"} <= set(HELPS)
    for name in RECORDINGS:
        assert (DATA / f"{name}.txt").is_file()
        assert RECORDINGS[name]["sysbench"].startswith("sysbench 1.0.20")


# --- golden: the parsers still return what they returned for these recordings -------------


@pytest.mark.parametrize("name", RUNS)
def test_run_golden(name: str) -> None:
    text, want = text_of(name), RECORDINGS[name]
    assert [dataclasses.asdict(iv) for iv in sysbench_output.parse_intervals(text)] == want["intervals"]
    assert [list(row) for row in sysbench_output.parse_histogram(text)] == want["histogram"]
    summary = sysbench_output.parse_summary(text)
    assert (summary.to_dict() if summary else None) == want["summary"]


@pytest.mark.parametrize("name", HELPS)
def test_help_golden(name: str) -> None:
    assert sysbench.parse_options_help(text_of(name)) == RECORDINGS[name]["options"]


# --- facts about real runs, independent of the golden files --------------------------------


@pytest.mark.parametrize("name", OK_RUNS)
def test_intervals(name: str) -> None:
    text, rec = text_of(name), recorded(name)
    intervals = sysbench_output.parse_intervals(text)
    assert len(intervals) == text.count("] thds: ")  # every per-second line, nothing else
    # sysbench 1.0.20 races its last per-second report with the end of the run: the line for
    # the final second is often missing (seen for 1 to 4 s runs). Never more than --time.
    assert rec["time"] - 1 <= len(intervals) <= rec["time"]
    assert [iv.t for iv in intervals] == list(range(1, len(intervals) + 1))
    for iv in intervals:
        assert iv.threads == rec["threads"]
        assert iv.qps == pytest.approx(iv.reads + iv.writes + iv.other, abs=0.03)
        assert iv.writes == 0.0  # a read-only test
        assert iv.tps > 0 and iv.p95_ms >= 0
        assert iv.errors_per_s == 0.0 and iv.reconnects_per_s == 0.0


@pytest.mark.parametrize("name", OK_RUNS)
def test_histogram(name: str) -> None:
    text = text_of(name)
    rows = sysbench_output.parse_histogram(text)
    block = text[text.index("Latency histogram") : text.rindex("SQL statistics:")]
    assert len(rows) == block.count(" |")
    values = [v for v, _ in rows]
    # one row per bucket, ascending; below ~0.1 ms neighbouring buckets print the same
    # 3-decimal value (0.053, 0.053), so values may repeat: never key anything by value
    assert values == sorted(values)
    assert all(count > 0 for _, count in rows)  # sysbench prints only non-empty buckets
    summary = sysbench_output.parse_summary(text)
    assert summary is not None
    # the histogram holds every event of the (final) window
    assert sum(c for _, c in rows) == summary.transactions == stat("total number of events", text)
    # the extreme buckets hold the fastest and the slowest event (min and max print 2 decimals)
    lat = summary.latency_ms
    assert lat["min"] / HALF_BUCKET - 0.005 <= values[0] <= lat["min"] * HALF_BUCKET + 0.005
    assert lat["max"] / HALF_BUCKET - 0.005 <= values[-1] <= lat["max"] * HALF_BUCKET + 0.005


@pytest.mark.parametrize("name", OK_RUNS)
def test_summary(name: str) -> None:
    text, rec = text_of(name), recorded(name)
    summary = sysbench_output.parse_summary(text)
    assert summary is not None
    assert summary.transactions == stat("transactions", text) and summary.transactions > 0
    assert summary.queries == stat("queries", text)
    assert summary.errors == summary.reconnects == 0 and summary.errors_per_s == 0.0
    window = rec["time"] - (rec.get("checkpoint") or 0)  # a checkpoint resets the statistics
    assert summary.total_time_s == pytest.approx(window, abs=0.1)
    assert summary.tps == pytest.approx(summary.transactions / summary.total_time_s, rel=0.01)
    assert summary.qps == pytest.approx(summary.queries / summary.total_time_s, rel=0.01)
    lat = summary.latency_ms
    assert set(lat) == {"min", "avg", "max", "p50", "p95", "p99"}
    assert 0 < lat["min"] <= lat["avg"] <= lat["max"]
    # p50 and p99 come from the histogram (3 decimals), p95 is sysbench's own (2 decimals)
    assert lat["min"] - 0.005 <= lat["p50"] <= lat["p95"] + 0.005
    assert lat["p95"] <= lat["p99"] + 0.005
    assert lat["p99"] <= lat["max"] * HALF_BUCKET + 0.005


@pytest.mark.parametrize("name", OK_RUNS)
def test_p95_is_sysbench_percentile_of_the_histogram(name: str) -> None:
    """sysbench prints its percentile rounded to 2 decimals; the parser computes it the same way."""
    text = text_of(name)
    mine = sysbench_output.histogram_percentile(sysbench_output.parse_histogram(text), 95)
    assert mine is not None
    assert abs(mine - stat("95th percentile", text)) <= 0.005 + 1e-9


@pytest.mark.parametrize("name", OK_RUNS)
def test_queries_per_transaction_follow_the_options(name: str) -> None:
    """The workload options reached sysbench (written --key-with-dashes by argv): each
    transaction ran exactly the queries they ask for, per the test's own defaults."""
    text, rec = text_of(name), recorded(name)
    options = {**RECORDINGS["help_oltp_read_only"]["options"], **{k: str(v) for k, v in rec["options"].items()}}
    per_txn = sum(int(options[k]) for k in QUERY_KINDS) + (0 if options["skip_trx"] == "on" else 2)
    summary = sysbench_output.parse_summary(text)
    assert summary is not None
    if rec.get("checkpoint"):
        # transactions in flight at the checkpoint: some of their queries count before it
        assert abs(summary.queries - per_txn * summary.transactions) < per_txn * rec["threads"]
        txns = [int(t) for t in re.findall(r"^\s+transactions:\s+(\d+)", text, re.M)]
        queries = [int(q) for q in re.findall(r"^\s+total:\s+(\d+)", text, re.M)]
        assert len(txns) == len(queries) == 2
        assert sum(queries) == per_txn * sum(txns)  # over the whole run it adds up exactly
    else:
        assert summary.queries == per_txn * summary.transactions
    if name.startswith("order_by_only"):
        assert per_txn == 3  # BEGIN, one ORDER BY range, COMMIT


def test_checkpoint_summary_is_the_window_after_it() -> None:
    text = text_of("oltp_read_only_t2_checkpoint")
    assert text.count("SQL statistics:") == 2 and "Checkpoint report:" in text
    first = re.search(r"^\s+transactions:\s+(\d+)", text, re.M)
    assert first
    summary = sysbench_output.parse_summary(text)
    assert summary is not None
    assert summary.transactions != int(first.group(1))
    assert summary.transactions == stat("transactions", text)
    # the histogram is printed once, for the window after the checkpoint
    assert text.count("Latency histogram") == 1


def test_failed_run() -> None:
    text = text_of("failed_wrong_socket")
    assert recorded("failed_wrong_socket")["exit_code"] != 0
    assert "FATAL" in text and "Can't connect" in text
    assert sysbench_output.parse_summary(text) is None
    assert sysbench_output.parse_intervals(text) == []
    assert sysbench_output.parse_histogram(text) == []


# --- option help -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", HELPS)
def test_help_lists_every_option(name: str) -> None:
    text = text_of(name)
    names = re.findall(r"^\s+--([\w-]+)", text, re.MULTILINE)
    assert names
    assert set(sysbench.parse_options_help(text)) == {n.replace("-", "_") for n in names}


def test_help_defaults() -> None:
    general = sysbench.parse_options_help(text_of("help_general"))
    assert general["threads"] == "1" and general["time"] == "10" and general["percentile"] == "95"
    assert general["report_interval"] == "0" and general["histogram"] == "off"
    assert general["mysql_ignore_errors"] == "1213,1020,1205"  # a list default
    assert general["mysql_socket"] == ""  # no default
    assert general["report_checkpoints"] == ""  # an empty default: []
    assert general["rand_type"] == "special"  # the {choices} before the default are not it
    test = sysbench.parse_options_help(text_of("help_oltp_read_only"))
    assert test["point_selects"] == "10" and test["range_size"] == "100" and test["skip_trx"] == "off"
    assert test["pgsql_variant"] == ""


def test_known_options_merges_general_and_test_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sysbench, "sysbench_binary", lambda: "/usr/bin/sysbench")
    outputs = {("--help",): text_of("help_general"), ("oltp_read_only", "help"): text_of("help_oltp_read_only")}
    calls = []

    def fake_run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        return subprocess.CompletedProcess(args, 0, stdout=outputs[tuple(args[1:])], stderr="")

    monkeypatch.setattr(sysbench.subprocess, "run", fake_run)
    sysbench.known_options.cache_clear()  # asked once a test (another test may have asked already)
    known = sysbench.known_options("oltp_read_only")
    sysbench.known_options.cache_clear()  # the recorded help is not this machine's
    assert calls == [["/usr/bin/sysbench", "--help"], ["/usr/bin/sysbench", "oltp_read_only", "help"]]
    assert known == {**RECORDINGS["help_general"]["options"], **RECORDINGS["help_oltp_read_only"]["options"]}
    assert known["range_size"] == "100" and known["threads"] == "1"


# --- argv and effective options ----------------------------------------------------------------


@pytest.fixture
def binary(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(sysbench, "sysbench_binary", lambda: "/usr/bin/sysbench")
    return "/usr/bin/sysbench"


OPTIONS = {
    "range_size": 100,
    "skip_trx": True,
    "secondary": False,
    "rand_type": "uniform",
    "point-selects": 0,
    "mysql_ignore_errors": "all",
}


def test_argv_run(binary: str) -> None:
    args = sysbench.argv(
        "oltp_read_only",
        "run",
        socket=Path("/tmp/x/mysqld.sock"),
        tables=2,
        table_size=500,
        threads=4,
        seconds=10,
        options=OPTIONS,
    )
    assert args[:2] == [binary, "oltp_read_only"]
    assert args[-1] == "run"
    for expected in (
        "--db-driver=mysql",
        "--mysql-socket=/tmp/x/mysqld.sock",
        "--mysql-user=root",
        "--mysql-db=sbtest",
        "--tables=2",
        "--table-size=500",
        "--threads=4",
        "--time=10",
        "--events=0",
        "--report-interval=1",
        "--histogram=on",
        f"--percentile={sysbench.PERCENTILE}",
        # workload options: `_` becomes `-`, True -> on, False -> off
        "--range-size=100",
        "--skip-trx=on",
        "--secondary=off",
        "--rand-type=uniform",
        "--point-selects=0",
        "--mysql-ignore-errors=all",
    ):
        assert expected in args
    flags = args[2:-1]
    assert all(re.fullmatch(r"--[a-z0-9]+(-[a-z0-9]+)*=\S+", a) for a in flags), flags
    # the workload options come after perflab's own
    assert flags.index("--range-size=100") > flags.index("--percentile=95")


def test_argv_prepare(binary: str) -> None:
    args = sysbench.argv(
        "oltp_read_only",
        "prepare",
        socket=Path("/s.sock"),
        tables=3,
        table_size=10,
        threads=2,
        options={"mysql_storage_engine": "innodb"},
    )
    assert args[-1] == "prepare"
    assert "--tables=3" in args and "--table-size=10" in args and "--threads=2" in args
    assert "--mysql-storage-engine=innodb" in args
    assert not any(a.startswith(("--time", "--report-interval", "--histogram", "--percentile")) for a in args)


@pytest.mark.parametrize(
    ("value", "text"), [(True, "on"), (False, "off"), (1, "1"), (0, "0"), (2.5, "2.5"), ("uniform", "uniform")]
)
def test_format_value(value: object, text: str) -> None:
    assert sysbench.format_value(value) == text


def test_effective_options(binary: str) -> None:
    defaults = {
        "threads": "1",
        "time": "10",
        "range_size": "100",
        "rand_type": "special",
        "skip_trx": "off",
        "db_ps_mode": "auto",
    }
    args = sysbench.argv(
        "oltp_read_only",
        "run",
        socket=Path("/s.sock"),
        tables=1,
        table_size=10,
        threads=8,
        seconds=30,
        options={"range_size": 5, "skip_trx": True},
    )
    effective = sysbench.effective_options(defaults, args)
    assert effective["threads"] == "8" and effective["time"] == "30"
    assert effective["range_size"] == "5" and effective["skip_trx"] == "on"
    assert effective["rand_type"] == "special" and effective["db_ps_mode"] == "auto"  # untouched defaults
    assert effective["mysql_socket"] == "/s.sock" and effective["table_size"] == "10"
    assert not any("-" in key for key in effective)
    assert defaults["threads"] == "1"  # not modified in place


# --- percentiles from a histogram ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "pct", "value"),
    [
        ([], 50, None),
        ([(1.0, 0)], 50, None),
        ([(1.0, 9), (2.0, 1)], 50, 1.0),
        ([(1.0, 9), (2.0, 1)], 90, 1.0),
        # sysbench: the first bucket where the running count reaches floor(n * pct / 100 + 0.5)
        ([(1.0, 9), (2.0, 1)], 94, 1.0),  # 9.4 events -> 9
        ([(1.0, 9), (2.0, 1)], 95, 2.0),  # 9.5 events -> 10
        ([(1.0, 9), (2.0, 1)], 100, 2.0),
        ([(0.5, 1), (1.5, 1), (2.5, 1), (3.5, 1)], 60, 1.5),  # 2.4 events -> 2
        ([(0.5, 1), (1.5, 1), (2.5, 1), (3.5, 1)], 65, 2.5),  # 2.6 events -> 3
        ([(0.5, 1)], 1, 0.5),
    ],
)
def test_histogram_percentile(rows: list[tuple[float, int]], pct: float, value: float | None) -> None:
    assert sysbench_output.histogram_percentile(rows, pct) == value


@pytest.mark.parametrize("name", OK_RUNS)
def test_histogram_percentile_is_monotonic(name: str) -> None:
    rows = sysbench_output.parse_histogram(text_of(name))
    values = [sysbench_output.histogram_percentile(rows, p) for p in range(1, 101)]
    assert values == sorted(values)
    assert values[-1] == rows[-1][0]


# --- synthetic edge cases of the line formats ---------------------------------------------------

LINE = (
    "[ {t}s ] thds: 64 tps: 6180.24 qps: 98910.71 (r/w/o: 86548.24/0.00/12362.47) lat (ms,95%): 0.37 "
    "err/s: 1.50 reconn/s: 0.25"
)


@pytest.mark.parametrize("t", [1, 10, 100, 3600])
def test_interval_line(t: int) -> None:
    """A report's rates are over all the time since the report before (here: since the start), so a
    lone report at t stands for each second up to t."""
    intervals = sysbench_output.parse_intervals("noise\n" + LINE.format(t=t) + "\n[ 2s ] Checkpoint report:\n")
    assert [iv.t for iv in intervals] == list(range(1, t + 1))
    assert all(iv == dataclasses.replace(intervals[-1], t=iv.t) for iv in intervals)
    assert intervals[-1] == sysbench_output.Interval(
        t=t,
        threads=64,
        tps=6180.24,
        qps=98910.71,
        reads=86548.24,
        writes=0.0,
        other=12362.47,
        p95_ms=0.37,
        errors_per_s=1.5,
        reconnects_per_s=0.25,
    )


def test_histogram_block_ends_at_first_other_line() -> None:
    text = (
        "Latency histogram (values are in milliseconds)\n"
        "       value  ------------- distribution ------------- count\n"
        "       0.280 |*                                        6\n"
        "       1.000 |****************************************  250\n"
        " \n"
        "       9.000 |*                                        7\n"
    )
    assert sysbench_output.parse_histogram(text) == [(0.28, 6), (1.0, 250)]
    assert sysbench_output.parse_histogram("no histogram here\n       0.280 |*    6\n") == []


def test_a_late_report_inside_the_histogram_is_passed_over() -> None:
    """sysbench's last per-second report races the end of its run: a report (and, at a rate, its
    queue line) printed between two rows must not cut the histogram short (its p99 would be wrong)."""
    text = (
        "Latency histogram (values are in milliseconds)\n"
        "       value  ------------- distribution ------------- count\n"
        "       0.280 |*                                        6\n"
        f"{_report(25, 1000)}\n"
        "[ 25s ] queue length: 0, concurrency: 1\n"
        "       1.000 |****************************************  250\n"
        " \n"
    )
    assert sysbench_output.parse_histogram(text) == [(0.28, 6), (1.0, 250)]


def _report(t: int, qps: float) -> str:
    return (
        f"[ {t}s ] thds: 2 tps: {qps / 10:.2f} qps: {qps:.2f} (r/w/o: {qps:.2f}/0.00/0.00) "
        "lat (ms,95%): 0.20 err/s: 0.00 reconn/s: 0.00"
    )


def test_a_late_report_takes_the_second_it_was_due_and_every_second_has_one() -> None:
    """On a loaded machine sysbench's reporter wakes late: the report due at 5 s, printed at 5.6 s,
    says "[ 6s ]", and so does the next, on time. Seen in make test with modules in parallel: two
    intervals of one second failed the store's key and took the whole run down. The late one covers
    (4, 5.75] (taken at t - LATE_AT), the next the rest of second 6."""
    text = "\n".join(_report(t, q) for t, q in [(1, 100), (2, 101), (3, 102), (4, 103), (6, 104), (6, 105), (7, 106)])
    intervals = sysbench_output.parse_intervals(text)
    assert [(iv.t, iv.qps) for iv in intervals] == [
        (1, 100),
        (2, 101),
        (3, 102),
        (4, 103),
        (5, 104),
        (6, 104.25),
        (7, 106),
    ]
    assert len({iv.t for iv in intervals}) == len(intervals)
    # two late in a row: each takes the seconds it covered, none is dropped
    text = "\n".join(_report(t, q) for t, q in [(1, 100), (3, 101), (3, 102), (4, 103), (4, 104), (5, 105)])
    assert [(iv.t, iv.qps) for iv in sysbench_output.parse_intervals(text)] == [
        (1, 100),
        (2, 101),
        (3, 101.25),
        (4, 103.25),
        (5, 105),
    ]


def test_a_reporter_that_could_not_run_for_seconds_is_spread_over_them() -> None:
    """Recorded 2026-11-30: sysbench (paced at 200 a second) stopped by SIGSTOP for 2.6 s from 3.3 s:
    no report for second 4, the late one at 5.9 s ("[ 6s ]", its rate over the 2.9 s since 3 s),
    then the on-time one at 6 s, its catch-up burst over a tenth of a second. Each second's
    transactions add up to what the client did: 26 a second over the stop, not a missing second
    and 1,775 for second 6 (before: 4 to 7 summed 2,406 against the 796 sysbench counted)."""
    text = "\n".join(
        _report(t, q) for t, q in [(1, 599.31), (2, 627.30), (3, 641.67), (6, 78.70), (6, 5354.90), (7, 1812.95)]
    )
    intervals = sysbench_output.parse_intervals(text)
    assert [iv.t for iv in intervals] == [1, 2, 3, 4, 5, 6, 7]
    assert [iv.qps for iv in intervals[3:5]] == [78.70, 78.70]
    assert intervals[5].qps == pytest.approx(0.75 * 78.70 + 0.25 * 5354.90, abs=0.01)
    assert sum(iv.qps for iv in intervals[3:]) < 0.7 * (78.70 + 5354.90 + 1812.95)
