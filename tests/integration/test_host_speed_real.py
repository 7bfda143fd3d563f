"""[observe] host_speed on real servers: the canary runs beside a real mariadbd (and postgres),
each cell stores the window's figure, the verdicts of a run with enough cells are adjusted for
it (with the unadjusted estimate beside), and no canary outlives its run."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from perflab.analyze import host_slope, host_speed, summary
from perflab.store.calibration import MAX_SLOPE
from perflab.store.results import Results
from tests.conftest import perflab
from tests.freezes import Freezes
from tests.integration.helpers import pgbench_experiment, runs_tmpfs, used, write_experiment

ROUNDS = 5

MARIADB = f"""
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-host-speed"
duration = "3s"
warmup = "2s"
repeats = {ROUNDS}

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_point_select"
threads = [2]

[variants.copy]
a = {{}}
b = {{ env = {{ PERFLAB_AA = "1" }} }}

[observe]
host_speed = true
"""


def canaries() -> list[str]:
    """The canaries of this test process's runs (their binary is built in the run's work directory,
    under PERFLAB_TMPFS: tests/conftest.py), still running. Another worker's runs are not ours."""
    found, ours = [], runs_tmpfs()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        if "perflab-canary" in cmdline and ours in cmdline:
            found.append(cmdline)
    return found


@pytest.fixture(scope="module")
def mariadb_freezes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Freezes]:
    tmp = tmp_path_factory.mktemp("host-speed")
    out = tmp / "results"
    with Freezes() as freezes:  # the canary sleeps through a pause of this VM: its samples then are missing
        done = perflab("run", str(write_experiment(tmp / "hs.toml", MARIADB)), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    return out, freezes


@pytest.fixture(scope="module")
def mariadb_out(mariadb_freezes: tuple[Path, Freezes]) -> Path:
    return mariadb_freezes[0]


@pytest.fixture(scope="module")
def mariadb_run(mariadb_out: Path) -> dict:
    exported = perflab("export", str(mariadb_out), "--format", "json")
    assert exported.returncode == 0, exported.stderr
    return json.loads(exported.stdout)


def test_every_cell_stores_the_windows_host_speed(mariadb_run: dict, mariadb_freezes: tuple[Path, Freezes]):
    freezes = mariadb_freezes[1]
    cells = mariadb_run["cells"]
    # an unsettled cell is measured again in its round (retry_of): ROUNDS first measurements of each
    assert len([c for c in cells if c["retry_of"] is None]) == 2 * ROUNDS and all(c["status"] == "ok" for c in cells)
    for cell in cells:
        speed = cell["host_speed"]
        assert speed["period_ms"] == 200
        cpus = sorted(os.sched_getaffinity(0))  # one pinned thread on each CPU perflab may use
        assert sorted(map(int, speed["per_cpu"])) == cpus, speed["per_cpu"]
        assert all(1e5 < work < 1e8 for work in speed["per_cpu"].values())
        # 3 s at one sample per 200 ms and ~1 ms of work, on each CPU; each thread sleeps through a
        # pause of this VM, so the periods a pause in the cell's span covers are not sampled
        lost = freezes.in_cell(cell)
        missed = math.ceil(lost / (speed["period_ms"] / 1000))
        assert (10 - missed) * len(cpus) <= speed["samples"] <= 16 * len(cpus), (speed, freezes.pauses)
        assert 1e5 < speed["work_ns"] < 1e8 and speed["spread"] >= 0
        geomean = math.exp(sum(math.log(w) for w in speed["per_cpu"].values()) / len(cpus))
        assert speed["work_ns"] == pytest.approx(geomean, rel=1e-4)
        # a figure for each second of the window (0, 1, 2 and the end's), but a second a pause took whole
        seconds = [s for s, _ in speed["seconds"]]
        assert seconds == sorted(set(seconds)) and set(seconds) <= {0, 1, 2, 3}, seconds
        assert len({0, 1, 2} - set(seconds)) <= math.ceil(lost), (seconds, freezes.pauses)
        assert all(work > 0 for _, work in speed["seconds"])
        # the pointer chase after each spin: its own figure, per CPU too
        assert sorted(map(int, speed["chase_per_cpu"])) == cpus, speed["chase_per_cpu"]
        assert 1e4 < speed["chase_ns"] < 1e8 and all(1e4 < ns < 1e8 for ns in speed["chase_per_cpu"].values())
    assert not canaries(), "a canary outlived its run"


def test_the_verdicts_are_adjusted_with_the_plain_estimate_beside(mariadb_run: dict):
    """Whichever way the run went (a disturbed machine leaves fewer than 8 settled cells; a
    variant may move the canary), the row must be what its cells call for, recomputed here
    from the stored cells: the branch, the message, the ratios."""
    (row,) = [c for c in mariadb_run["comparisons"] if c["metric"] == "qps"]
    assert row["baseline"] == {"copy": "a"} and row["variant"] == {"copy": "b"}
    usable = [c for c in mariadb_run["cells"] if c["status"] == "ok" and c["settled"] and c["host_speed"]["work_ns"]]
    sides = {v: {c["repeat"]: c for c in usable if c["variant"]["copy"] == v} for v in ("a", "b")}
    both = sorted(set(sides["a"]) & set(sides["b"]))
    d = np.array([math.log(sides["b"][r]["summary"]["qps"] / sides["a"][r]["summary"]["qps"]) for r in both])
    x = np.array([math.log(sides["a"][r]["host_speed"]["work_ns"] / sides["b"][r]["host_speed"]["work_ns"])
                  for r in both])  # fmt: skip  # the sides' difference in log speed (speed = 1 / work)
    assert row["pairs"] == len(both) >= 2 and row["method"] == "paired", (row, both)
    assert row["unadjusted_ratio"] == pytest.approx(math.exp(d.mean()), rel=1e-3)
    if len(usable) < host_speed.MIN_CELLS:
        reason = "not adjusted for host speed: fewer than 8 settled cells with a canary figure"
    elif stats.ttest_1samp(x, 0.0).pvalue < host_speed.BALANCE_P:
        reason = "beside the variant than beside the baseline"  # the variant may move the canary itself
    else:
        reason = None
    if reason is None:  # adjusted within rounds: d = delta + slope * x by least squares, the ratio exp(delta)
        slope, delta = np.polyfit(x, d, 1)
        assert row["adjusted"] and row["adjustment"] == f"host speed: slope {slope:.2f} within {len(both)} rounds"
        assert row["ratio"] == pytest.approx(math.exp(delta), rel=1e-3), (row, d, x)
    else:
        assert not row["adjusted"] and reason in row["adjustment"], row
        assert row["ratio"] == row["unadjusted_ratio"]


def test_compare_and_the_report_say_how_the_verdicts_were_adjusted(mariadb_out: Path, mariadb_run: dict):
    row = next(c for c in mariadb_run["comparisons"] if c["metric"] == "qps")
    text = perflab("compare", str(mariadb_out))
    assert text.returncode == 0, text.stderr
    said = " ".join(text.stdout.split())
    assert "host speed" in said
    if row["adjusted"]:
        assert "adjusted for the host's speed" in said
    markdown = perflab("report", str(mariadb_out), "--format", "markdown")
    assert markdown.returncode == 0 and "host speed" in markdown.stdout


def test_postgresql_cells_store_it_too(tmp_path: Path):
    body = pgbench_experiment("it-host-speed-pg", rest="[observe]\nhost_speed = true\n")
    out = tmp_path / "results"
    with Freezes() as freezes:  # the canary sleeps through a pause of this VM: its samples then are missing
        done = perflab("run", str(write_experiment(tmp_path / "pg.toml", body)), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = used(json.loads(perflab("export", str(out)).stdout)["cells"])
    speed = cell["host_speed"]
    # 3 s at one sample per 200 ms on each CPU, less the periods a pause of the VM in the cell covers
    missed = math.ceil(freezes.in_cell(cell) / (speed["period_ms"] / 1000))
    assert cell["status"] == "ok" and speed["samples"] >= 10 - missed and speed["work_ns"] > 0, (speed, freezes.pauses)
    assert not canaries()


def ols_slope(cells: list[dict], chase_weight: float, steal_weight: float) -> tuple[float, float, float]:
    """log QPS on the canary's log speed with a dummy per (variant, threads) and per round, by
    ordinary least squares over the settled cells with a figure: the slope, its standard error and
    the partial correlation (t / sqrt(t^2 + df))."""
    rows = [(c, host_speed.log_speed(c, chase_weight, steal_weight)) for c in cells if host_speed.usable_cell(c)]
    rows = [(c, x) for c, x in rows if x is not None and host_speed.metric_value(c, "qps")]
    groups = sorted({(str(c["variant"]), c["threads"]) for c, _ in rows})
    blocks = sorted({c["repeat"] for c, _ in rows})[1:]
    design = np.array([[x] + [float((str(c["variant"]), c["threads"]) == g) for g in groups]
                       + [float(c["repeat"] == b) for b in blocks] for c, x in rows])  # fmt: skip
    y = np.log([host_speed.metric_value(c, "qps") for c, _ in rows])
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    df = len(y) - np.linalg.matrix_rank(design)
    residual = y - design @ beta
    se = math.sqrt(float(residual @ residual) / df * float(np.linalg.pinv(design.T @ design)[0, 0]))
    t = beta[0] / se
    return float(beta[0]), se, float(t / math.sqrt(t * t + df))


def test_calibrate_measures_the_slope_and_a_run_uses_it_fixed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """perflab calibrate --chase of a file that does not set [observe] host_speed runs the canary and fits
    its within-round slope on its A/A cells and saves it; a run of the same file then turns the
    canary on and judges with a resolved slope, fixed (meta calibration.host_speed, the
    comparison's adjustment names it), and with an unresolved one fits its own and says why."""
    monkeypatch.setenv("PERFLAB_CACHE", str(tmp_path / "cache"))
    unset = MARIADB.replace(f"repeats = {ROUNDS}", "repeats = 5").replace("[observe]\nhost_speed = true\n", "")
    unset = unset.replace('duration = "3s"\nwarmup = "2s"', 'duration = "2s"\nwarmup = "1s"')  # 20 cells: short
    assert 'duration = "2s"' in unset
    assert "host_speed" not in unset
    toml = write_experiment(tmp_path / "hs.toml", unset)
    done = perflab("calibrate", str(toml), "--rounds", "5", "--budget", "5m", "-o", str(tmp_path / "aa"),
                   "--format", "json", "--chase")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    aa = json.loads(perflab("export", doc["results"]).stdout)["cells"]
    assert all(c["host_speed"] and c["host_speed"]["work_ns"] for c in aa if c["status"] == "ok")  # the canary ran
    settled = sum(1 for c in aa if c["status"] == "ok" and c["settled"])
    # 10 cells of 2 s windows are too short to be judged unsettled (analyze/steady.detect), so all count
    assert settled >= host_speed.MIN_CELLS, settled
    slope = doc["host_speed"]
    saved = Path(doc["file"])
    assert json.loads(saved.read_text())["host_speed"] == slope
    check = perflab("run", str(toml), "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    if slope is None:
        # a fit of 10 cells in 5 rounds (3 degrees of freedom left) can be wild on a busy machine (a CI
        # run beside four workers): no slope saved, and perflab says why, with the fit it refused
        missing = doc["host_speed_missing"]
        assert missing.startswith(f"the fit on {settled} cells, slope ") and "is beyond ±5" in missing, missing
        assert abs(float(missing.split("slope ")[1].split(" ")[0])) > MAX_SLOPE, missing
        assert "host_speed on" not in check.stdout, check.stdout  # nothing turns the file's canary on
        slope = {"slope": 0.0, "se": 1.0, "r": 0.0, "cells": settled, "rounds": 5, "chase_weight": None,
                 "steal_weight": None, "restart": None, "per_second": None, "plan": None}  # fmt: skip
    else:
        # perflab measured a slope, and it is the fit it says: refitted here by ordinary least squares
        # with a dummy per variant and per round (not perflab's within-round arithmetic), on the
        # covariate its weights define
        assert doc["host_speed_missing"] is None
        assert slope["cells"] == settled and slope["rounds"] == 5 and slope["se"] > 0
        with Results(Path(doc["results"])) as results:
            _, loaded = summary.load(results)
        fitted, se, r = ols_slope(loaded, slope["chase_weight"] or 0.0, slope["steal_weight"] or 0.0)
        assert slope["slope"] == pytest.approx(fitted, abs=2e-4), (slope, fitted)
        assert slope["se"] == pytest.approx(se, abs=2e-4) and slope["r"] == pytest.approx(r, abs=2e-4), (slope, se, r)
        assert slope["chase_weight"] is None or 0 < slope["chase_weight"] <= 5  # --chase: weighed in when resolved
        assert slope["steal_weight"] is None or 0 < slope["steal_weight"] <= 20  # steal: weighed in when resolved
        assert all(c["host_speed"]["chase_ns"] > 0 for c in aa if c["status"] == "ok" and c["settled"])
        if host_slope.usable_slope(slope) is None:  # resolved: the noise left after adjusting, and its plan
            assert slope["restart"] is None or (slope["restart"] >= 0 and 0 < slope["plan"]["effect"] < 1)
            assert "[observe] host_speed on, as the calibration measured its slope" in " ".join(check.stdout.split())
        else:  # 5 A/A rounds on a quiet host rarely resolve it: the file's canary stays off
            assert slope["restart"] is None and slope["plan"] is None
            assert "host_speed on" not in check.stdout, check.stdout
            told = write_experiment(tmp_path / "told.toml", unset + "\n[observe]\nhost_speed = true\n")
            check = perflab("run", str(told), "--check")  # asked for: it runs, fits its own and says why
            assert check.returncode == 0 and "so the run fits its own" in check.stdout, check.stdout
    assert all(c["resources"]["steal_cpu_cores"] >= 0 for c in aa if c["status"] == "ok")  # what it is fitted on
    # what a longer calibration gives (a resolved slope), written into the saved file: the run uses it
    stored = json.loads(saved.read_text())
    stored["host_speed"] = {**slope, "slope": 0.5, "se": 0.05, "chase_weight": 0.8, "steal_weight": 1.5}  # both in
    saved.write_text(json.dumps(stored))
    out = tmp_path / "results"
    done = perflab("run", str(toml), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())  # the note is wrapped at the terminal's width
    assert "host-speed slope 0.50, chase weight 0.80, steal weight 1.50" in said, said
    assert "fixed for the verdicts" in said, said
    assert "[observe] host_speed on, as the calibration measured its slope" in done.stdout, done.stdout
    run = json.loads(perflab("export", str(out)).stdout)
    assert all(c["host_speed"]["work_ns"] > 0 for c in run["cells"] if c["status"] == "ok")  # the canary ran
    assert run["run"]["calibration"]["host_speed"]["slope"] == 0.5
    assert run["run"]["calibration"]["host_speed"]["chase_weight"] == 0.8
    assert run["run"]["calibration"]["host_speed"]["steal_weight"] == 1.5
    (row,) = [c for c in run["comparisons"] if c["metric"] == "qps"]
    if row["adjusted"]:
        weighed = "host speed: calibrated slope 0.50, chase weight 0.80, steal weight 1.50 (perflab calibrate"
        assert row["adjustment"].startswith(weighed)
        assert row["method"] in ("paired", "welch") and row["unadjusted_ratio"] is not None
    else:  # the canary differed between the sides beyond chance, or a cell had no figure: said so
        assert row["adjustment"].startswith("not adjusted for host speed")
    # a calibration far from what this run's own cells say (a slope of 50): every report warns, names both
    with Results(out) as results:
        calibration = results.meta()["calibration"]
        results.set_meta(calibration={**calibration, "host_speed": {**calibration["host_speed"], "slope": 50.0}})
        calibrated = host_speed.calibrated_slope(results.meta())
    report = " ".join(perflab("report", str(out)).stdout.split())
    # 8 settled cells with a figure whose own slope is resolved enough to lie apart from 50 (a run
    # on a machine busy with other work can have a slope's standard error that reaches it)
    if host_slope.disagreement(run["cells"], calibrated) is not None:
        assert "host speed: this run's own within-round slope is" in report, report
        assert "the calibrated one its verdicts used 50.00 ± 0.05" in report and "over-adjusts" in report, report
    else:
        assert "own within-round slope" not in report
    off = write_experiment(tmp_path / "off.toml", unset + "\n[observe]\nhost_speed = false\n")
    check = perflab("run", str(off), "--check")  # told no canary: neither the canary nor the slope
    assert check.returncode == 0 and "host_speed on" not in check.stdout and "host-speed slope" not in check.stdout
    assert not canaries()
