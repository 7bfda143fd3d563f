"""Profiles on a real mariadbd: perf and the stack sampler in every cell's window, folded,
stored, normalised per transaction, and the DISTINCT vs ORDER BY diff finding the
collation hash (reference report 003), through the CLI as a user runs it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import inferno_path, perflab
from tests.integration.helpers import processes, write_experiment

# alone (make test runs the quiet modules first, one at a time): a profile diff's significance, from samples
pytestmark = pytest.mark.quiet

WARMUP, DURATION = 1, 3

EXPERIMENT = f"""
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-profiles"
duration = "{DURATION}s"
warmup = "{WARMUP}s"
repeats = 2

[dataset]
tables = 2
table_size = 5000

[workload]
test = "oltp_read_only"
threads = [2]

[workload.options]
range_size = 1000
point_selects = 0
simple_ranges = 0
sum_ranges = 0
distinct_ranges = 0
order_ranges = 0
rand_type = "uniform"

[variants.query]
order    = {{ workload_options = {{ order_ranges = 1 }} }}
distinct = {{ workload_options = {{ distinct_ranges = 1 }} }}

[observe]
perf = {{ frequency = 199 }}
pmp = {{ interval = "250ms" }}
"""
HEX = re.compile(r"^(0x)?[0-9a-f]{6,}$")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("profiles")
    out = tmp / "results"
    done = perflab("run", str(write_experiment(tmp / "p.toml", EXPERIMENT)), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = perflab("export", str(out), "--format", "json")
    assert exported.returncode == 0, exported.stderr
    return out, json.loads(exported.stdout)


def _folded(out: Path, ref: dict) -> dict[str, int]:
    stacks = {}
    for line in (out / ref["path"]).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        stacks[stack] = int(count)
    return stacks


def _window(cell: dict) -> list[dict]:
    """The server's profiles of the measured window (perf also profiles the warm-up, its own phase)."""
    return [p for p in cell["profiles"] if p["phase"] == "measured" and p["target"] == "server"]


def test_every_cell_has_both_profiles(run):
    out, doc = run
    firsts = [c for c in doc["cells"] if c["retry_of"] is None]  # an unsettled cell is measured again: retry_of
    assert len(firsts) == 4 and all(c["status"] == "ok" for c in doc["cells"])
    for cell in doc["cells"]:
        refs = {p["source"]: p for p in _window(cell)}
        assert set(refs) == {"perf", "pmp"}
        perf, pmp = refs["perf"], refs["pmp"]
        # 199 Hz over ~3 s of a server using about one CPU
        assert perf["samples"] > 150 and perf["frequency_hz"] == 199 and perf["call_graph"] == "fp"
        assert pmp["samples"] >= 8 * 10 and pmp["interval_s"] == 0.25  # >= 8 samples of >= 10 threads
        for ref in (perf, pmp):
            stacks = _folded(out, ref)
            assert sum(stacks.values()) == ref["samples"]
            meta = json.loads((out / ref["path"].replace(".folded", ".json")).read_text())
            assert meta["format"] == "perflab-folded/1" and meta["samples"] == ref["samples"]
        cost = json.loads((out / pmp["path"].replace(".folded", ".json")).read_text())["sampler_cost"]
        assert cost["samples"] >= 8 and 0 < cost["held_ms_per_sample"] <= cost["sample_ms_mean"] * 1.01
        timed = (out / pmp["path"].replace(".folded", ".timed")).read_text().splitlines()
        times = [float(line.split(" ", 1)[0]) for line in timed]
        assert len(timed) == pmp["samples"] and 0 <= min(times) and max(times) <= DURATION + 0.5


def test_profiles_are_symbolised_and_kernel_frames_marked(run):
    out, doc = run
    for cell in doc["cells"]:
        for ref in _window(cell):
            frames = [f for stack, n in _folded(out, ref).items() for f in stack.split(";") for _ in range(n)]
            assert not [f for f in frames if HEX.match(f)], "bare addresses"
            named = [f for f in frames if "+0x" not in f and f != "[unknown]"]
            assert len(named) > 0.6 * len(frames)
            if ref["source"] == "perf":
                assert any(f.endswith("_[k]") for f in frames)  # syscalls of the connection threads
                assert {"do_command", "dispatch_command"} <= set(frames)


def test_transactions_match_the_window(run):
    out, doc = run
    for cell in doc["cells"]:
        window_txn = cell["summary"]["transactions"]
        for ref in _window(cell):
            assert ref["window_transactions"] == window_txn
            share = min(1.0, ref["seconds"] / DURATION)
            assert ref["transactions"] == pytest.approx(window_txn * share, rel=1e-3)  # seconds are stored rounded
            assert 0.8 * window_txn <= ref["transactions"] <= window_txn  # perf starts ~0.2 s late
            if ref["source"] == "pmp":  # started paused in the warm-up, resumed at the window's start
                assert ref["seconds"] >= DURATION - 0.06, ref  # attaching at the window took ~0.1 s


def test_profile_json_is_per_transaction(run):
    out, doc = run
    cell = doc["cells"][0]
    perf = next(p for p in _window(cell) if p["source"] == "perf")
    assert cell["profiles"][0] == perf  # the window's first: readers that took the first perf profile still do
    done = perflab("profile", str(out), "--cell", str(cell["id"]), "--format", "json", "--top", "0")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert {"function", "dso", "self_per_txn", "total_per_txn", "self_us_per_txn", "total_us_per_txn"} <= set(rows[0])
    # every sample is the leaf of exactly one stack: self per txn sums back to the sample count
    assert sum(r["self_per_txn"] for r in rows) * perf["transactions"] == pytest.approx(perf["samples"], rel=1e-3)
    assert all(r["total_per_txn"] >= r["self_per_txn"] - 1e-12 for r in rows)
    top = rows[0]
    assert top["self_us_per_txn"] == pytest.approx(top["self_per_txn"] * 1e6 / 199, rel=1e-3)
    assert perf["top"][0]["function"] == top["function"]


def test_distinct_vs_order_diff_finds_the_hash(run):
    out, _ = run
    done = perflab("diff", str(out), "query=order", "query=distinct", "--format", "json", "--top", "10")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    for name in (
        "a_self_per_txn",
        "b_self_per_txn",
        "delta_self_per_txn",
        "a_total_per_txn",
        "b_total_per_txn",
        "delta_total_per_txn",
        "delta_self_us_per_txn",
        "callers",
    ):
        assert name in rows[0]
    hashes = [r for r in rows[:3] if r["function"].startswith("my_hash_sort_simple")]
    assert hashes, [r["function"] for r in rows[:3]]
    h = hashes[0]
    assert h["dso"] == "mariadbd" and h["a_self_per_txn"] < 0.1 * h["b_self_per_txn"]
    assert h["delta_self_per_txn"] > 0 and h["significant"]
    text = perflab("diff", str(out), "order", "distinct")
    assert text.returncode == 0 and "my_hash_sort_simple" in text.stdout
    assert "stack quality" in text.stderr and "remedy" in text.stderr


def test_profile_text_states_stack_quality(run):
    out, doc = run
    done = perflab("profile", str(out), "query=distinct")
    assert done.returncode == 0, done.stderr
    assert "2 repeat(s)" in done.stdout and "self/txn" in done.stdout
    assert "stripped" in done.stderr and "frame pointer" in done.stderr
    quality = doc["cells"][0]["profiles"][0]["quality"]
    assert quality["binary"]["path"].endswith("mariadbd") and quality["notes"]
    assert 0 < quality["stacks_complete_pct"] <= 100
    pmp = perflab("profile", str(out), "distinct", "--source", "pmp", "--format", "json", "--top", "0")
    assert pmp.returncode == 0 and any(r["function"] == "__futex_abstimed_wait_common" for r in json.loads(pmp.stdout))
    # cut by time: the first second only, with the transactions of that second
    first = perflab(
        "profile",
        str(out),
        "distinct",
        "--source",
        "pmp",
        "--format",
        "json",
        "--top",
        "0",
        "--start",
        "0",
        "--end",
        "1",
    )
    assert first.returncode == 0, first.stderr
    whole, part = json.loads(pmp.stdout), json.loads(first.stdout)
    assert 0 < sum(r["self_samples"] for r in part) < 0.6 * sum(r["self_samples"] for r in whole)
    # per transaction, a steady second looks like the whole window (same threads, same waits)
    futex = lambda rows: next(r["self_per_txn"] for r in rows if r["function"] == "__futex_abstimed_wait_common")  # noqa: E731
    assert futex(part) == pytest.approx(futex(whole), rel=0.6)


def test_flame_graphs(run, tmp_path):
    out, _ = run
    svg, delta, scope = tmp_path / "d.svg", tmp_path / "diff.svg", tmp_path / "d.json"
    for args in (
        ["query=distinct", "-o", str(svg)],
        ["order", "distinct", "-o", str(delta)],  # A then B
        ["distinct", "-o", str(scope), "--format", "speedscope"],
    ):
        done = perflab("flame", str(out), *args)
        if inferno_path() is None and "speedscope" not in args:  # make setup skipped inferno (no Rust)
            assert done.returncode == 3 and "inferno-flamegraph not found" in done.stderr, done.stderr
            continue
        assert done.returncode == 0, done.stderr
    if inferno_path() is not None:
        assert "my_hash_sort_simple" in svg.read_text() and "<svg" in svg.read_text()
        assert "my_hash_sort_simple" in delta.read_text()
    doc = json.loads(scope.read_text())
    assert doc["profiles"][0]["type"] == "sampled" and doc["shared"]["frames"]


def test_selector_errors_are_usage_errors(run):
    out, _ = run
    done = perflab("diff", str(out), "query=nope", "order")
    assert done.returncode == 2 and "no label" in done.stderr and "Traceback" not in done.stderr


def test_no_profiler_left_running(run):
    _, doc = run
    workdir = doc["run"]["workdir"]
    left = [p for name in ("perf", "python3", "python", "eu-stack") for p in processes(name) if workdir in p[1]]
    assert left == []


def test_html_report_shows_profiles_and_a_real_flame_graph_zooms(run, tmp_path):
    """The report's profiles section on real profiles: top functions per variant, the
    differential table, and inferno flame graphs whose own script zooms on a click, offline."""
    from playwright.sync_api import sync_playwright

    out, _ = run
    report = tmp_path / "report.html"
    done = perflab("report", str(out), "--html", "-o", str(report))
    assert done.returncode == 0, done.stderr
    text = report.read_text(encoding="utf-8")
    assert 'id="profiles"' in text and "my_hash_sort_simple" in text
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        context = browser.new_context()
        requests: list[str] = []
        context.on("request", lambda r: requests.append(r.url))
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(report.as_uri())
        flames = page.locator("#profiles iframe.flame")
        if inferno_path() is None:  # without inferno the tables stand alone: nothing to zoom
            assert flames.count() == 0 and errors == [] and requests == [report.as_uri()]
            browser.close()
            return
        assert flames.count() >= 3  # one per variant and the differential one
        frame = page.frame_locator("#profiles iframe.flame").first
        unzoom = frame.locator("#unzoom")
        assert "hide" in (unzoom.get_attribute("class") or "")
        frame.locator("#frames g").nth(5).locator("rect").dispatch_event("click")  # a frame above the root
        assert "hide" not in (unzoom.get_attribute("class") or "")  # zoomed: "Reset Zoom" shows
        page.screenshot(path=str(tmp_path / "profiles.png"), full_page=True)
        assert errors == [] and requests == [report.as_uri()]
        browser.close()
