"""`--target` and `--phase` on the profile verbs, a stall against its cell's window (`perflab diff
--phase-b stall`, per second), and the reports' explanation of a stall by what grew in it."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from perflab.analyze import phase_explain
from perflab.store import folded
from perflab.store.results import Results
from tests.conftest import perflab
from tests.unit.test_exports import build_matrix

SERVER = Counter({"start_thread;do_command;dispatch_command": 300, "start_thread;do_command;net_read": 100})
CLIENT = Counter({"start_thread;db_execute;mysql_stmt_execute;__poll": 400, "start_thread;lua_pcall;sb_event": 100})
# report 001's picture: during the stall the client's threads queue on mprotect from glibc's grow_heap
STALL = Counter(
    {"start_thread;db_execute;mysql_stmt_store_result;malloc;sysmalloc;grow_heap;mprotect_[k]": 390,
     "start_thread;db_execute;mysql_stmt_execute;__poll": 30}
)  # fmt: skip
PROFILES = {
    ("server", "measured"): (SERVER, 10.0),
    ("client", "measured"): (CLIENT, 10.0),
    ("client", "stall"): (STALL, 3.0),
}


def _store(results: Results, directory: Path, cell: dict, target: str, phase: str) -> None:
    stacks, seconds = PROFILES[(target, phase)]
    txn = cell["summary"]["transactions"] * (seconds / 10.0 if phase == "measured" else 0.01)
    base = folded.base(directory, cell["id"], "pmp", phase, target)
    path = folded.write(base, stacks, {"transactions": txn})
    results.commit_profile(
        {
            "cell_id": cell["id"],
            "source": "pmp",
            "target": target,
            "phase": phase,
            "path": str(path.relative_to(directory)),
            "samples": sum(stacks.values()),
            "seconds": seconds,
            "transactions": txn,
            "window_transactions": cell["summary"]["transactions"],
            "interval_s": 0.25,
            "call_graph": "libdw",
            "quality": {"notes": []},
            "top": [],
        }
    )


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """test_exports' matrix (cell 5 has a stall at 1-2 s) with pmp profiles of the server and the
    client over every cell's window, and of the client in cell 5's stall."""
    directory = build_matrix(tmp_path_factory.mktemp("target") / "matrix")
    with Results(directory) as results:
        for cell in results.cells():
            for target, phase in PROFILES:
                if phase == "measured" or cell["stalls"]:
                    _store(results, directory, cell, target, phase)
    return directory


def _json(*args: str) -> list[dict]:
    done = perflab(*args, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_target_picks_the_clients_stacks(profiled: Path):
    server = _json("profile", str(profiled), "--cell", "0", "--source", "pmp")
    client = _json("profile", str(profiled), "--cell", "0", "--source", "pmp", "--target", "client")
    assert server[0]["function"] == "dispatch_command" and client[0]["function"] == "__poll"
    assert {r["per"] for r in client} == {"transaction"}


def test_a_stall_profile_is_per_second_by_default(profiled: Path):
    rows = _json("profile", str(profiled), "--cell", "5", "--source", "pmp", "--target", "client", "--phase", "stall")
    top = rows[0]
    assert top["function"] == "mprotect_[k]" and top["per"] == "second"
    assert top["self_per_txn"] == pytest.approx(390 / 3.0)  # samples per second of the stall


def test_diff_compares_a_stall_with_its_cells_window(profiled: Path):
    args = ("diff", str(profiled), "--cell", "5", "--source", "pmp", "--target", "client", "--phase-b", "stall")
    rows = _json(*args)
    top = rows[0]
    assert top["function"] == "mprotect_[k]" and top["significant"] and top["per"] == "second"
    assert top["a_self_per_txn"] == 0 and top["b_self_per_txn"] == pytest.approx(130.0)
    poll = next(r for r in rows if r["function"] == "__poll")
    assert poll["delta_self_per_txn"] == pytest.approx(30 / 3.0 - 400 / 10.0)
    text = perflab(*args[:-2], "--phase-b", "stall")
    assert text.returncode == 0 and "per second" in text.stdout and "self/s" in text.stdout


def test_missing_phase_or_target_says_what_is_stored(profiled: Path):
    done = perflab("profile", str(profiled), "--cell", "0", "--source", "pmp", "--target", "client", "--phase", "stall")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no pmp profile of the client in phase 'stall'" in done.stderr
    assert "--target client --phase measured" in done.stderr and "--target server --phase measured" in done.stderr
    same = perflab("diff", str(profiled), "--cell", "0", "--source", "pmp")
    assert same.returncode == 2 and "A and B are the same profile" in same.stderr
    bad = perflab("profile", str(profiled), "--cell", "0", "--target", "sysbench")
    assert bad.returncode == 2 and "--target" in bad.stderr


def test_reports_explain_the_stall_by_what_grew(profiled: Path):
    with Results(profiled) as results:
        found = phase_explain.explain(results)
    assert [(e.cell_id, e.phase, e.target) for e in found] == [(5, "stall", "client")]
    grown = found[0].rows
    assert grown[0].function == "mprotect_[k]" and grown[0].phase == pytest.approx(130.0) and grown[0].noise > 0
    assert all(g.delta > g.noise for g in grown)
    text = perflab("report", str(profiled))
    assert text.returncode == 0 and "What grew" in text.stdout and "mprotect_[k] 0 -> 130/s" in text.stdout
    markdown = perflab("report", str(profiled), "--format", "markdown")
    assert "## Stalls and warm-ups: what grew" in markdown.stdout and "| mprotect_[k] |" in markdown.stdout


def test_schema_keys_profiles_by_target(profiled: Path):
    db = sqlite3.connect(profiled / "results.db")
    try:
        rows = db.execute("SELECT count(*) FROM profiles WHERE cell_id = 5").fetchone()[0]
    finally:
        db.close()
    assert rows == 3
