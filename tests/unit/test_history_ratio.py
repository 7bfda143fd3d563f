"""Ratio series (each variant's ratio to the baseline measured inside each run, with its interval),
their change points and the gate on them, and provenance listed at the run it changed: synthetic
series with known answers (seeded), and results directories cloned from the recorded tiny run.

The drift: issue 51's six nightly runs, whose absolute QPS moved 13.7% from run to run (67k, 78k,
94k, then 78k, 72k, 68k) while a 20% step (general_log ON) happened at run 4."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from perflab.analyze.gate import parse
from perflab.history import changes, gate, index, record
from perflab.history.index import StoredRun
from perflab.history.series import RATIO, History, Series
from tests.conftest import perflab
from tests.unit.history_runs import make_paired_run
from tests.unit.rates import assert_at_most

DRIFT = [67000.0, 78000.0, 94000.0, 78000.0, 72000.0, 68000.0]  # issue 51's absolute QPS, run by run


def ratio_points(levels: list[float], seed: int, se: float = 0.02, tau: float = 0.0, pairs: int = 3) -> list:
    """A ratio per run: its true level, a run effect tau, and the paired estimate over `pairs`
    rounds whose se is itself estimated from those rounds (df = pairs - 1)."""
    rng = np.random.default_rng(seed)
    out = []
    for level in levels:
        measured_se = se * float(np.sqrt(rng.chisquare(pairs - 1) / (pairs - 1)))
        mean = level * float(np.exp(rng.normal(0, se) + rng.normal(0, tau)))
        out.append(changes.Point(mean, [], n=pairs, var=measured_se**2, df=pairs - 1))
    return out


def test_six_runs_show_a_20_percent_step_in_a_ratio_series_at_run_4():
    """With each run's interval in the test, three runs either side place the step, every time."""
    for seed in range(10):
        points = ratio_points([1.0] * 3 + [0.8] * 3, seed)
        (c,) = changes.detect(points, test=changes.INTERVAL).change_points
        assert c.index == 3 and c.high < 0.9 and c.p <= changes.ALPHA, c


def test_stable_ratio_series_have_at_most_one_false_change_point_per_100_runs():
    """A/A: ratios whose runs differ by a run effect (1%) beyond the interval they measured (2%)."""
    false = sum(
        len(changes.detect(ratio_points([1.0] * 50, 300 + s, tau=0.01), test=changes.INTERVAL).change_points)
        for s in range(40)
    )
    assert_at_most(false, 40 * 50, 0.01)


def test_a_ratio_with_a_wide_interval_weighs_less():
    """Three runs 6% low after nine: a change point when each measured its ratio to 0.5%; with
    the same ratios measured to 10% (an interval some 40% wide at 3 pairs), not evidence enough."""
    base = ratio_points([1.0] * 9, 7, se=0.005)
    tight = [changes.Point(p.mean * 0.94, [], n=3, var=0.005**2, df=2) for p in ratio_points([1.0] * 3, 8, se=0.005)]
    wide = [changes.Point(p.mean, [], n=3, var=0.1**2, df=2) for p in tight]
    assert [c.index for c in changes.detect(base + tight, test=changes.INTERVAL).change_points] == [9]
    assert changes.detect(base + wide, test=changes.INTERVAL).change_points == []


def ratio_series(ratios: list[float], se: float = 0.01) -> Series:
    s = Series("k", "w", {"config": "nightly"}, 2, "qps", kind=RATIO, baseline={"config": "reference"})
    for i, value in enumerate(ratios):
        r = record.Ratio(s.variant, s.baseline, 2, "qps", value, None, None, 3, "paired", se, 2.0)
        run = record.RunRecord("n", "k", {}, f"2026-11-{i + 1:02d}", None, f"/r{i}", "complete", {}, [], [r])
        s.runs.append(StoredRun(i, run))
        s.estimates.append(r)
    s.analysis = s.detect(s.points())
    return s


def absolute_series(values: list[float]) -> Series:
    s = Series("k", "w", {"config": "nightly"}, 2, "qps")
    for i, mean in enumerate(values):
        e = record.Estimate(s.variant, 2, "qps", mean, None, None, 3, [mean * f for f in (0.99, 1.0, 1.01)])
        run = record.RunRecord("n", "k", {}, f"2026-11-{i + 1:02d}", None, f"/r{i}", "complete", {}, [e])
        s.runs.append(StoredRun(i, run))
        s.estimates.append(e)
    s.analysis = s.detect(s.points())
    return s


def test_a_drifting_absolute_series_whose_ratio_is_flat_raises_no_alarm():
    """The machine drifts (the issue's runs after five at 94,000: a 0.72 drop by the end): the
    ratio, flat within its interval, has no change point and passes the gate."""
    drift = [94000.0, 93000.0, 95000.0, 94500.0, 93500.0, *DRIFT]
    threshold = parse("slower:5%")
    assert absolute_series(drift).analysis.tau > 0.05  # the machine's run-to-run variation
    rng = np.random.default_rng(4)
    flat = ratio_series([float(v) for v in 1 + rng.normal(0, 0.008, len(drift))])
    assert flat.analysis.change_points == []
    (found,) = gate.check([flat], threshold)
    assert not gate.fails(found, threshold) and found.comparison.verdict in ("equivalent", "inconclusive")


def test_the_gate_on_a_ratio_series_passes_three_runs_and_fails_the_sixth():
    threshold = parse("slower:5%")
    rng = np.random.default_rng(9)
    ratios = [float(v) for v in np.array([1.0] * 3 + [0.83] * 3) * (1 + rng.normal(0, 0.01, 6))]
    (third,) = gate.check([ratio_series(ratios[:3])], threshold)
    assert not gate.fails(third, threshold), third.comparison
    (sixth,) = gate.check([ratio_series(ratios)], threshold)
    assert sixth.confirmed is not None and sixth.confirmed.index == 3 and gate.fails(sixth, threshold)
    assert "a regression segment starts at the run of 2026-11-04" in gate.failure_line(sixth, threshold)


def test_the_newest_ratio_far_below_fails_on_its_own_interval():
    """The newest run's own part of the interval is its ratio's se: a 15% drop measured to 1% fails."""
    threshold = parse("slower:5%")
    (found,) = gate.check([ratio_series([1.0, 1.01, 0.99, 1.0, 1.005, 0.85])], threshold)
    assert found.comparison.verdict == "slower" and gate.fails(found, threshold)
    (vague,) = gate.check([ratio_series([1.0, 1.01, 0.99, 1.0, 1.005, 0.85], se=0.5)], threshold)
    assert not gate.fails(vague, threshold)


def test_the_gate_without_data_exits_2():
    from perflab.cli.history import _exit_on, _gate
    from perflab.errors import UsageError

    section, failed = _gate(History("n", "qps", [], []), parse("slower:5%"))
    assert section["exit_code"] == 2 and not section["passed"]
    with pytest.raises(UsageError, match="no data"):
        _exit_on(section, failed)


# ------------------------------------------------------------------ the CLI on results directories

SPEC = """[experiment]
name = "nightly"

[variants.config]
reference = {{ server_options = {{ general_log = "OFF" }} }}
nightly = {{ server_options = {{ general_log = "{log}" }} }}
"""


def drifting_nights(tmp: Path, count: int, step_at: int = 3) -> list[Path]:
    """The issue's runs: the reference drifts (DRIFT), the nightly configuration is its equal in
    each round until general_log is turned on at run `step_at` + 1, then 17% slower."""
    rng = np.random.default_rng(51)
    out = []
    for i in range(count):
        on = i >= step_at
        reference = [DRIFT[i] * f for f in (1 + rng.normal(0, 0.04, 3))]  # rounds drift within the run too
        nightly = [v * (0.83 if on else 1.0) * (1 + rng.normal(0, 0.01)) for v in reference]
        spec = SPEC.format(log="ON" if on else "OFF")
        out.append(make_paired_run(tmp / f"n{i}", i, {"reference": reference, "nightly": nightly}, spec_text=spec))
    return out


def imported(tmp: Path, dirs: list[Path]) -> str:
    tmp.mkdir(parents=True, exist_ok=True)  # a --history whose directory is missing is refused (a typo)
    where = str(tmp / "history.sqlite")
    done = perflab("history", "import", *map(str, dirs), "--history", where)
    assert done.returncode == 0, done.stderr
    return where


def test_the_issues_nights_after_three_runs_and_after_six(tmp_path: Path):
    nights = drifting_nights(tmp_path, 6)
    three = imported(tmp_path / "three", nights[:3])
    done = perflab("history", "nightly", "--history", three, "--fail-on", "slower:5%")
    assert done.returncode == 0, done.stdout + done.stderr
    six = imported(tmp_path / "six", nights)
    done = perflab("history", "nightly", "--history", six)
    assert done.returncode == 0, done.stderr
    assert "configuration changed at run 4" in done.stdout
    assert "config.nightly.server_options.general_log OFF -> ON" in done.stdout, done.stdout
    doc = json.loads(perflab("history", "nightly", "--history", six, "--format", "json").stdout)
    ratio = next(s for s in doc["series"] if s["kind"] == "ratio")
    assert ratio["variant"] == {"config": "nightly"} and ratio["baseline"] == {"config": "reference"}
    (change,) = ratio["change_points"]
    assert change["run"] == 4 and change["direction"] == "regression" and change["high"] < 0.9
    assert {"field": "config.variants.config.nightly.server_options.general_log", "before": "OFF", "after": "ON"} in (
        change["provenance"]
    )
    assert all(not s["gated"] for s in doc["series"] if s["kind"] == "absolute")
    gated = perflab("history", "nightly", "--history", six, "--fail-on", "slower:5%")
    assert gated.returncode == 4, gated.stdout + gated.stderr
    assert "config=nightly / config=reference at 2 threads (qps)" in gated.stderr


def test_a_provenance_change_is_listed_without_a_change_point(tmp_path: Path):
    """general_log turned on at run 4 and costing nothing measurable: no change point, and the
    change is listed at its run all the same."""
    rng = np.random.default_rng(3)
    dirs = []
    for i in range(6):
        reference = [DRIFT[i] * f for f in (1 + rng.normal(0, 0.03, 3))]
        nightly = [v * (1 + rng.normal(0, 0.01)) for v in reference]
        spec = SPEC.format(log="ON" if i >= 3 else "OFF")
        sides = {"reference": reference, "nightly": nightly}
        dirs.append(make_paired_run(tmp_path / f"n{i}", i, sides, spec_text=spec))
    where = imported(tmp_path, dirs)
    doc = json.loads(perflab("history", "nightly", "--history", where, "--format", "json").stdout)
    assert all(s["change_points"] == [] for s in doc["series"])
    page = tmp_path / "h.html"
    assert perflab("history", "nightly", "--history", where, "--format", "html", "-o", str(page)).returncode == 0
    assert "Configuration changed at run 4" in page.read_text()
    (config,) = [c for c in doc["provenance_changes"] if c["kind"] == "configuration"]
    assert config["run"] == 4
    assert {c["field"] for c in config["changes"]} == {
        "config.file",
        "config.variants.config.nightly.server_options.general_log",
    }


def test_a_version_1_index_is_upgraded_in_place(tmp_path: Path):
    """Version 1 had no ratios table: opened by this perflab, it gets one and version 2, and its
    runs read as before (holding no ratios until imported again)."""
    where = str(tmp_path / "h.sqlite")
    (night,) = drifting_nights(tmp_path, 1)
    with index.Index.open(where) as idx:
        idx.record(record.read(night))
    db = sqlite3.connect(where)
    db.execute("DELETE FROM ratios")
    db.execute("DROP TABLE ratios")
    db.execute("UPDATE meta SET value = '1' WHERE key = 'index_version'")
    db.commit()
    db.close()
    with index.Index.open(where) as idx:
        (run,) = idx.runs("nightly")
        assert run.record.ratios == [] and len(run.record.estimates) == 4  # two variants, qps and p95
        idx.record(record.read(night))  # imported again: its ratios now too
        (run,) = idx.runs("nightly")
        assert [r.metric for r in run.record.ratios] == ["qps", "p95"]
    version = sqlite3.connect(where).execute("SELECT value FROM meta WHERE key = 'index_version'").fetchone()
    assert version == (str(index.INDEX_VERSION),) == ("2",)


def test_each_kind_of_change_is_listed_at_its_run():
    from perflab.cli.history import provenance_lines
    from perflab.history import provenance

    def run(i: int, **fields: str) -> record.RunRecord:
        return record.RunRecord("n", "k", {}, f"2026-11-{i:02d}", None, f"/r{i}", "complete", fields, [])

    same = {"build.tonight": "aaaa", "package.mariadbd": "10.11.18", "host.fingerprint": "1234"}
    runs = [
        run(1, **same),
        run(2, **same),
        run(3, **{**same, "build.tonight": "bbbb", "config.server_options.general_log": "ON"}),
        run(4, **{**same, "build.tonight": "bbbb", "config.server_options.general_log": "ON", "host.fingerprint": "9"}),
        run(5, **{**same, "build.tonight": "bbbb", "config.server_options.general_log": "ON", "host.fingerprint": "9",
                  "package.mariadbd": "10.11.19"}),
    ]  # fmt: skip
    found = provenance.changes_at(runs)
    assert [(c["run"], c["kind"]) for c in found] == [
        (3, "build"),
        (3, "configuration"),
        (4, "host"),
        (5, "server version"),
    ]
    lines = provenance_lines(found)
    assert lines[1] == "configuration changed at run 3 (2026-11-03): server_options.general_log (unset) -> ON"
    assert lines[3] == "server version changed at run 5 (2026-11-05): package.mariadbd 10.11.18 -> 10.11.19"
