"""`perflab history` and `history import` as a user runs them, on results directories cloned from
the recorded tiny run (tests/unit/history_runs.py), in a throwaway SQLite index; and the index itself."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from perflab.errors import ResultsFormatError
from perflab.history import index, provenance, record
from tests.conftest import perflab
from tests.unit.history_runs import make_run


def nights(tmp: Path, levels: list[float], seed: int = 1, **kw) -> list[Path]:
    """One run per level, 4 repeats each at 1% CV, a 0.5% run effect."""
    rng = np.random.default_rng(seed)
    out = []
    for i, level in enumerate(levels):
        mean = 1000 * level * (1 + rng.normal(0, 0.005))
        extra = kw.get("per_night", lambda i: {})(i)
        out.append(make_run(tmp / f"run{i:02d}", i, [float(v) for v in mean * (1 + rng.normal(0, 0.01, 4))], **extra))
    return out


def imported(tmp: Path, dirs: list[Path]) -> str:
    where = str(tmp / "history.sqlite")
    done = perflab("history", "import", *map(str, dirs), "--history", where)
    assert done.returncode == 0, done.stderr
    return where


def test_a_record_holds_the_reports_estimate_and_the_provenance(tmp_path: Path):
    run = make_run(tmp_path / "r", 0, [1000.0, 1010.0, 990.0], git={"experiment": "abc123"}, host={"kernel": "6.1.0-x"})
    rec = record.read(run)
    qps = next(e for e in rec.estimates if e.metric == "qps")
    assert (qps.mean, qps.n, qps.values) == (pytest.approx(1000.0), 3, pytest.approx([1000.0, 1010.0, 990.0]))
    assert qps.low < 1000 < qps.high  # the t interval of the three repeats, as `perflab report` shows it
    assert rec.provenance["git.experiment"] == "abc123" and rec.provenance["host.kernel"] == "6.1.0-x"
    assert rec.provenance["package.mariadbd"].startswith("/usr/sbin/mariadbd")
    assert len(rec.provenance["host.fingerprint"]) == 8


def test_provenance_differences_name_each_field():
    assert provenance.differences({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == [
        {"field": "b", "before": "2", "after": "3"},
        {"field": "c", "before": None, "after": "4"},
    ]
    same = {"hostname": "vm", "cpu_model": "x", "cores": 2, "machine": "x86_64", "memory_bytes": 1}
    assert provenance.fingerprint(same) == provenance.fingerprint({**same, "kernel": "other"})
    assert provenance.fingerprint(same) != provenance.fingerprint({**same, "cores": 4})


def test_the_index_replaces_a_run_recorded_again_and_keeps_its_version(tmp_path: Path):
    rec = record.read(make_run(tmp_path / "r", 0, [1000.0, 1010.0, 990.0]))
    where = str(tmp_path / "h.sqlite")
    with index.Index.open(where) as idx:
        idx.record(rec)
        idx.record(rec)
        runs = idx.runs("nightly")
    assert len(runs) == 1 and runs[0].record == rec  # once, and every field round-trips
    db = sqlite3.connect(where)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'index_version'")
    db.commit()
    db.close()
    with pytest.raises(ResultsFormatError, match="version 99"):
        index.Index.open(where)


def test_history_shows_the_step_its_cause_and_the_diff(tmp_path: Path):
    git = {"per_night": lambda i: {"git": {"experiment": "aaaa" if i < 12 else "bbbb"}}}
    where = imported(tmp_path, nights(tmp_path, [1.0] * 12 + [0.94] * 6, **git))
    done = perflab("history", "nightly", "--history", where)
    assert done.returncode == 0, done.stderr
    assert "change at run 13" in done.stdout and "regression, ratio 0.9" in done.stdout
    assert "what changed: git.experiment: aaaa -> bbbb" in done.stdout
    assert (
        f"diff: perflab diff {tmp_path / 'run11'} log=OFF/t2 log=OFF/t2 --against {tmp_path / 'run12'}" in done.stdout
    )
    doc = json.loads(perflab("history", "nightly", "--history", where, "--format", "json").stdout)
    assert doc["format"] == "perflab-history/2" and doc["metric"] == "qps"
    (series,) = doc["series"]
    assert [r["run"] for r in series["runs"]] == list(range(1, 19)) and series["runs"][0]["n"] == 4
    (change,) = series["change_points"]
    assert change["run"] == 13 and change["direction"] == "regression" and change["high"] < 1
    assert change["provenance"] == [{"field": "git.experiment", "before": "aaaa", "after": "bbbb"}]
    assert change["diff_top"] is None  # these runs stored no profiles: the command is named, not run
    assert [(s["first_run"], s["last_run"]) for s in series["segments"]] == [(1, 12), (13, 18)]


def test_a_cause_a_few_runs_from_the_change_point_is_named_with_its_offset(tmp_path: Path):
    """On noisy runs a change point is placed a few runs off its step (a real general_log step in
    a noisy hour was placed 2 runs early): where nothing differs across it, the changes within
    NEARBY runs are named, nearest first, with how far they are."""
    git = {"per_night": lambda i: {"git": {"experiment": "aaaa" if i < 14 else "bbbb"}}}
    where = imported(tmp_path, nights(tmp_path, [1.0] * 12 + [0.94] * 8, **git))
    done = perflab("history", "nightly", "--history", where)
    assert done.returncode == 0, done.stderr
    assert "change at run 13" in done.stdout and "what changed: nothing perflab records" in done.stdout
    assert "changed 2 runs after it: git.experiment: aaaa -> bbbb" in done.stdout, done.stdout
    doc = json.loads(perflab("history", "nightly", "--history", where, "--format", "json").stdout)
    (change,) = doc["series"][0]["change_points"]
    assert change["provenance"] == []
    assert change["provenance_nearby"] == [{"field": "git.experiment", "before": "aaaa", "after": "bbbb", "offset": 2}]
    page = tmp_path / "h.html"
    assert perflab("history", "nightly", "--history", where, "--format", "html", "-o", str(page)).returncode == 0
    assert "Changed 2 runs after it: <code>git.experiment</code>: aaaa &rarr; bbbb" in page.read_text()
    far = {"per_night": lambda i: {"git": {"experiment": "aaaa" if i < 17 else "bbbb"}}}  # 5 runs after: not its cause
    where = imported(tmp_path / "far", nights(tmp_path / "far", [1.0] * 12 + [0.94] * 8, **far))
    doc = json.loads(perflab("history", "nightly", "--history", where, "--format", "json").stdout)
    (change,) = doc["series"][0]["change_points"]
    assert change["run"] == 13 and change["provenance"] == [] and change["provenance_nearby"] == []


def test_the_gate_fails_on_a_newest_run_that_drops(tmp_path: Path):
    where = imported(tmp_path, nights(tmp_path, [1.0] * 12 + [0.9]))
    done = perflab("history", "nightly", "--history", where, "--fail-on", "slower:3%")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "the newest run is slower by more than 3% than runs 1-12" in done.stderr
    assert perflab("history", "nightly", "--history", where, "--fail-on", "slower:15%").returncode == 0


def test_a_newest_run_on_the_hosts_other_level_is_no_regression(tmp_path: Path):
    """A host that moves between two levels 7.5% apart and stays at each for runs (measured on
    this VM, docs/results.md): successive runs differ little, so the series' tau is small, but the
    reference runs' own spread says a run on the lower level is what this host does."""
    levels = [1.0] * 4 + [0.925] * 3 + [1.0] * 5 + [0.925] * 3 + [1.0] * 2 + [0.925]
    where = imported(tmp_path, nights(tmp_path, levels, seed=5))
    done = perflab("history", "nightly", "--history", where, "--fail-on", "slower:3%", "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    (verdict,) = json.loads(done.stdout)["gate"]["verdicts"]
    assert verdict["verdict"] == "inconclusive" and verdict["ci_low"] < 0.9, verdict
    drop = [1.0] * 4 + [0.925] * 3 + [1.0] * 5 + [0.925] * 3 + [1.0] * 2 + [0.8]  # beyond both levels
    where = imported(tmp_path / "drop", nights(tmp_path / "drop", drop, seed=5))
    assert perflab("history", "nightly", "--history", where, "--fail-on", "slower:3%").returncode == 4


def test_a_steady_newest_run_passes_the_gate(tmp_path: Path):
    where = imported(tmp_path, nights(tmp_path, [1.0] * 14, seed=3))
    done = perflab("history", "nightly", "--history", where, "--fail-on", "slower:3%", "--format", "json")
    assert done.returncode == 0, done.stderr
    gate = json.loads(done.stdout)["gate"]
    assert gate["passed"] and gate["failed"] == []
    assert all(v["verdict"] in ("equivalent", "inconclusive") for v in gate["verdicts"])
    for line in gate["inconclusive"]:  # never silent: each is on stderr with what would settle it
        assert line.split(": inconclusive")[0] in done.stderr and ("round(s)" in line or "no number" in line)


def test_workloads_under_one_name_are_separate_series(tmp_path: Path):
    dirs = nights(tmp_path, [1.0] * 4)
    dirs += [make_run(tmp_path / f"other{i}", 10 + i, [500.0, 505.0, 495.0], workload={"test": "oltp_point_select"})
             for i in range(3)]  # fmt: skip
    done = perflab("history", "nightly", "--history", imported(tmp_path, dirs))
    assert done.returncode == 0, done.stderr
    assert "note: 2 different workloads were run under this name: each is its own series" in done.stdout
    assert "oltp_point_select" in done.stdout and "oltp_read_only" in done.stdout
    assert "4 runs" in done.stdout and "3 runs" in done.stdout


def test_a_corrupt_results_directory_is_skipped_with_its_reason(tmp_path: Path):
    good = nights(tmp_path, [1.0, 1.0])
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "results.db").write_bytes(b"not a database at all" * 100)
    where = str(tmp_path / "h.sqlite")
    done = perflab("history", "import", *map(str, [*good, empty, broken]), "--history", where)
    assert done.returncode == 0, done.stderr
    assert f"skipped: {empty}: no results.db here" in done.stderr
    assert f"skipped: {broken}: unreadable results (DatabaseError" in done.stderr
    assert "2 run(s) recorded" in done.stdout and "2 skipped" in done.stdout


def test_an_unknown_name_lists_the_names_the_index_has(tmp_path: Path):
    where = imported(tmp_path, nights(tmp_path, [1.0]))
    done = perflab("history", "nightly-typo", "--history", where)
    assert done.returncode == 2
    assert "no runs of 'nightly-typo'" in done.stderr and "names it has: nightly" in done.stderr


def test_an_unreachable_postgresql_index_exits_3(tmp_path: Path):
    done = perflab("history", "nightly", "--history", "postgresql://perflab:secret@127.0.0.1:1/history")
    assert done.returncode == 3, done.stderr
    assert "is unreachable" in done.stderr and "secret" not in done.stderr


def test_the_page_is_written_with_every_run(tmp_path: Path):
    where = imported(tmp_path, nights(tmp_path, [1.0] * 8 + [0.9] * 5))
    page = tmp_path / "h.html"
    done = perflab("history", "nightly", "--history", where, "--format", "html", "-o", str(page))
    assert done.returncode == 0 and f"history page: {page}" in done.stdout, done.stderr
    html = page.read_text()
    assert html.count('<circle class="run"') == 13 and html.count('class="change"') == 1
    assert "<script" not in html and "http" not in html.split("</style>")[0]


def test_a_finished_run_records_itself_unless_history_is_off(tmp_path: Path, capsys: pytest.CaptureFixture):
    from perflab.cli.history import record_run

    run = make_run(tmp_path / "r", 0, [1000.0, 1010.0, 990.0])
    record_run(run, "off")
    assert not list(tmp_path.glob("*.sqlite"))
    where = tmp_path / "h.sqlite"
    record_run(run, str(where))
    assert f"history: recorded in {where} (perflab history nightly)" in capsys.readouterr().out
    with index.Index.open(str(where)) as idx:
        assert [r.record.directory for r in idx.runs("nightly")] == [str(run.resolve())]
    record_run(run, "postgresql://nobody@127.0.0.1:1/none")  # the run is kept; one line says how to add it later
    assert f"later: perflab history import {run}" in capsys.readouterr().err.replace("\n", " ")


def test_the_profiles_either_side_of_a_change_point_are_diffed(tmp_path: Path):
    """Runs that stored perf profiles: the change point carries the diff's first functions, and
    the command it names runs (B's profiles from the other directory)."""
    before = {"main;do_command;dispatch;select_it": 400, "main;do_command;dispatch;parse": 100}
    after = {**before, "main;do_command;dispatch;log_general": 300}
    per_night = {"per_night": lambda i: {"profile": before if i < 8 else after}}
    where = imported(tmp_path, nights(tmp_path, [1.0] * 8 + [0.9] * 5, **per_night))
    doc = json.loads(perflab("history", "nightly", "--history", where, "--format", "json").stdout)
    (change,) = doc["series"][0]["change_points"]
    assert change["run"] == 9 and change["diff_top"][0]["function"] == "log_general"
    assert change["diff_top"][0]["a_self_per_txn"] == 0 < change["diff_top"][0]["delta_self_per_txn"]
    done = perflab(*change["diff"][1:], "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["function"] == "log_general"


def test_an_interrupted_run_is_recorded_only_once_its_resume_completes(tmp_path: Path):
    from perflab.cli.history import record_run
    from perflab.store.results import Results

    run = make_run(tmp_path / "r", 0, [1000.0, 1010.0, 990.0])
    with Results(run) as results:
        results.set_meta(status="interrupted")
    where = tmp_path / "h.sqlite"
    record_run(run, str(where))
    with index.Index.open(str(where)) as idx:
        assert idx.names() == []
    with Results(run) as results:  # `perflab run --resume` stored the rest: complete
        results.set_meta(status="complete")
    record_run(run, str(where))
    with index.Index.open(str(where)) as idx:
        assert idx.names() == ["nightly"]


def alloc_record(bytes_per_txn: float) -> dict:
    """A cell's `alloc` as [observe] alloc stores it."""
    return {
        "calls_per_txn": {"malloc": 12.0, "calloc": 0.0, "realloc": 1.0, "free": 13.0, "memalign": 0.0, "new": 4.0,
                          "delete": 4.0},
        "bytes_per_txn": bytes_per_txn,
        "syscalls_per_txn": {"mmap": 0.0, "munmap": 0.0, "mprotect": 0.0, "madvise": 0.0, "brk": 0.0},
        "by_size_class": [],
    }  # fmt: skip


def test_allocations_and_server_counters_either_side_of_a_change_point(tmp_path: Path):
    def extra(i: int) -> dict:
        after = i >= 8
        status = {"per_txn": {"Handler_read_next": 20.0 if after else 10.0, "Com_select": 1.0}, "gauges": {}}
        return {"cell_extra": {"alloc": alloc_record(33554432.0 if after else 2097152.0), "server_status": status}}

    where = imported(tmp_path, nights(tmp_path, [1.0] * 8 + [0.9] * 5, per_night=extra))
    doc = json.loads(perflab("history", "nightly", "--history", where, "--format", "json").stdout)
    (change,) = doc["series"][0]["change_points"]
    assert change["status_diff"][0]["counter"] == "Handler_read_next"
    assert change["status_diff"][0]["delta"] == pytest.approx(10.0)
    bytes_row = change["alloc_diff"][0]  # the largest difference beyond noise first
    assert bytes_row["metric"] == "bytes_requested" and bytes_row["beyond_noise"]
    assert bytes_row["delta"] == pytest.approx(33554432.0 - 2097152.0)
    done = perflab(*change["alloc_diff_command"][1:], "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["figures"][0]["metric"] == "bytes_requested"
    text = perflab("history", "nightly", "--history", where).stdout
    assert "allocations: bytes_requested +3.146e+07 bytes/txn" in text
    assert "server counters per transaction: Handler_read_next 10 -> 20" in text
