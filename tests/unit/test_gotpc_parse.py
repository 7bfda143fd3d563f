"""go-tpc's per-second reports -> perflab's per-second series and the window's summary, on
output recorded from the real go-tpc against perflab's servers (tests/data/gotpc/, re-recorded by
tests/data/regen_gotpc.py): run-stamped.txt and run-stall.txt as a cell writes them (each line
stamped with its arrival), run-unstamped.txt as go-tpc prints them; run-stall.txt by v1.0.7, the
others by v1.0.12 against MariaDB, and run-pg-stamped.txt by v1.0.12 against PostgreSQL 15 (its
postgres driver), run-pg-wait.txt with --wait (TPC-C's keying and think times)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from perflab.errors import WorkloadError
from perflab.workloads import gotpc, tpcc

DATA = Path(__file__).resolve().parents[1] / "data" / "gotpc"


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _new_orders(text: str) -> list[int]:
    """NEW_ORDER's Count of every [Current] report, read with a regex of its own."""
    return [int(n) for n in re.findall(r"\[Current\] NEW_ORDER\s+- Takes\(s\): [\d.]+, Count: (\d+)", text)]


RECORDED = ["run-stamped.txt", "run-stall.txt", "run-unstamped.txt", "run-pg-stamped.txt"]


@pytest.mark.parametrize("name", RECORDED)
def test_every_report_is_one_second_and_counts_are_kept(name: str) -> None:
    text = _text(name)
    ticks = gotpc.parse_ticks(text)
    counts = _new_orders(text)
    assert len(ticks) == len(counts) > 5
    seconds = gotpc.seconds_of(ticks)
    assert [s.t for s in seconds] == list(range(1, len(seconds) + 1))
    series = [gotpc.interval(s, warmup=2) for s in seconds]
    assert [iv["qps"] for iv in series] == [n * 60 for n in counts]  # NOPM: new orders per minute
    assert [iv["warmup"] for iv in series[:3]] == [1, 1, 0]
    # tps counts all five types: more than the new orders, never the errors
    assert all(iv["tps"] > iv["qps"] / 60 for iv in series)


def test_the_window_summary_adds_up_the_seconds_after_the_warm_up() -> None:
    text = _text("run-stamped.txt")
    counts = _new_orders(text)
    warmup = 5
    summary, series = gotpc.read_output(DATA / "run-stamped.txt", 0, warmup)
    window = counts[warmup:]
    assert summary.queries == sum(window)
    assert summary.total_time_s == len(window) == len([iv for iv in series if not iv["warmup"]])
    assert summary.qps == pytest.approx(sum(window) / len(window) * 60, abs=0.01)
    types = summary.transaction_types
    assert set(types) == set(gotpc.TYPES)
    assert types["NEW_ORDER"]["count"] == sum(window)
    assert summary.transactions == sum(t["count"] for t in types.values())
    # the average is exact (Sum(ms) / Count over the window); the max the largest second's
    sums = [float(x) for x in re.findall(r"\[Current\] NEW_ORDER\s+- .*?Sum\(ms\): ([\d.]+)", text)][warmup:]
    assert summary.latency_ms["avg"] == pytest.approx(sum(sums) / sum(window), abs=0.001)
    maxima = [float(x) for x in re.findall(r"\[Current\] NEW_ORDER\s+- .*?Max\(ms\): ([\d.]+)", text)][warmup:]
    assert summary.latency_ms["max"] == max(maxima)
    assert summary.latency_ms["p50"] <= summary.latency_ms["p95"] <= summary.latency_ms["p99"]
    # go-tpc's own tpmC covers the whole run, warm-up included
    whole = sum(counts) / len(counts) * 60
    assert summary.tool_tpmc == pytest.approx(whole, rel=0.1)


def test_a_second_without_a_report_is_a_stall_not_a_lost_second() -> None:
    """go-tpc prints nothing for a second in which no transaction completed: the next report's
    stamp says how many seconds it covers, and its counts are spread over them."""
    lines = _text("run-stamped.txt").splitlines()
    kept = [ln for ln in lines if not 6.5 < float(ln.split("|", 1)[0]) < 8.5]  # the reports of seconds 7 and 8
    ticks = gotpc.parse_ticks("\n".join(kept))
    seconds = gotpc.seconds_of(ticks)
    full = gotpc.seconds_of(gotpc.parse_ticks("\n".join(lines)))
    assert len(ticks) == len(full) - 2
    assert [s.t for s in seconds] == [s.t for s in full] == list(range(1, len(full) + 1))
    nine = [s for s in seconds if s.t in (7, 8, 9)]
    assert all(s.tick is nine[0].tick for s in nine) and nine[0].share == pytest.approx(1 / 3)
    assert sum(s.count("NEW_ORDER") for s in nine) == pytest.approx(full[8].count("NEW_ORDER"))


def test_failed_transactions_are_errors_not_throughput() -> None:
    line = (
        "[Current] {op} - Takes(s): 1.0, Count: {n}, TPM: 60.0, Sum(ms): 2.0, Avg(ms): 2.0, 50th(ms): 2.1, "
        "90th(ms): 2.1, 95th(ms): 2.1, 99th(ms): 2.1, 99.9th(ms): 2.1, Max(ms): 2.1"
    )
    text = "\n".join(
        f"{t + 0.01:9.3f} | " + line.format(op=op, n=n)
        for t in (1, 2)
        for op, n in (("NEW_ORDER", 10), ("NEW_ORDER_ERR", 3), ("PAYMENT", 7))
    )
    seconds = gotpc.seconds_of(gotpc.parse_ticks(text))
    iv = gotpc.interval(seconds[1], warmup=0)
    assert (iv["qps"], iv["tps"], iv["errors_per_s"]) == (600.0, 17.0, 3.0)
    summary = gotpc.window_summary(seconds, 0)
    assert summary is not None and summary.errors == 6 and summary.transaction_types["NEW_ORDER"]["errors"] == 6


def test_a_run_that_failed_or_never_left_its_warm_up_is_a_workload_error(tmp_path: Path) -> None:
    out = tmp_path / "go-tpc.txt"
    out.write_text("Error 1045: Access denied for user 'tpcc'@'127.0.0.1'\n", encoding="utf-8")
    with pytest.raises(WorkloadError, match="exited with code 1"):
        gotpc.read_output(out, 1, 0)
    with pytest.raises(WorkloadError, match="no new order after the warm-up"):
        gotpc.read_output(DATA / "run-stamped.txt", 0, 100)


def test_argv_is_the_documented_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gotpc, "go_tpc_binary", lambda: "/usr/local/bin/go-tpc")
    argv = gotpc.argv("run", port=3307, warehouses=4, threads=8, seconds=25, options={"wait": True})
    assert argv == [
        "/usr/local/bin/go-tpc",
        "tpcc",
        "run",
        "-H",
        "127.0.0.1",
        "-P",
        "3307",
        "-U",
        "tpcc",
        "-D",
        "tpcc",
        "--warehouses=4",
        "--threads=8",
        "--time=25s",
        "--interval=1s",
        "--wait=true",
    ]
    assert tpcc.GO_TPC.effective_options(None, argv)["warehouses"] == "4"


def test_prepare_loads_without_the_consistency_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """go-tpc's TPC-C 3.3.2 checks read back the rows just loaded: 77 of a warehouse's 80 s here."""
    monkeypatch.setattr(gotpc, "go_tpc_binary", lambda: "/usr/local/bin/go-tpc")
    spec = SimpleNamespace(experiment=SimpleNamespace(server="mariadb"), workload=SimpleNamespace(warehouses=2))
    argv = tpcc.GO_TPC.prepare_argv(spec, SimpleNamespace(port=3307, client=lambda argv: argv))
    assert argv[:3] == ["/usr/local/bin/go-tpc", "tpcc", "prepare"] and "--warehouses=2" in argv
    assert argv[-1] == "--no-check=true"


def test_a_missing_go_tpc_names_the_make_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gotpc.shutil, "which", lambda name: None)
    monkeypatch.setattr(gotpc.os, "access", lambda path, mode: False)
    problems = tpcc.GO_TPC.tool_problems()
    assert len(problems) == 1 and "make go-tpc" in problems[0].hint and gotpc.VERSION in problems[0].hint


def test_the_prepare_recording_loaded_every_table() -> None:
    text = _text("prepare.txt")
    for table in ("warehouse", "district", "customer", "history", "new_order", "orders", "order_line", "item", "stock"):
        assert f"creating table {table}" in text
