"""perflab calibrate's pieces without a server: the A/A experiment, the detectable-effect
formula, the calibration file (matching, and every reason to ignore one), planning a run."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import pytest

from perflab import spec
from perflab.analyze import power
from perflab.cli import calibrated
from perflab.errors import UsageError
from perflab.spec.aa import aa_experiment
from perflab.store import calibration
from tests.conftest import perflab

FILE = """
[experiment]
name = "two-axes"
design = "sequential"  # the canary is the sequential design's
duration = "10s"
repeats = "auto"
max_repeats = 40

[dataset]
tables = 1
table_size = 1000

[workload]
threads = [2, 4]

[server_options]
innodb_flush_log_at_trx_commit = 2

[variants.allocator]
jemalloc = { preload = "jemalloc", env = { MALLOC_CONF = "narenas:2" } }
glibc = {}

[variants.sort]
"2M" = { server_options = { sort_buffer_size = "2M" } }
"4M" = { server_options = { sort_buffer_size = "4M" } }
"""
HOST = {k: f"the-{k}" for k in calibration.HOST_KEYS}
NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)
NOISE = power.Noise(per_second=0.004, restart=0.0002, overhead=14.0)


def test_aa_experiment_is_the_first_configuration_twice():
    exp = spec.parse(FILE)
    aa = aa_experiment(exp, rounds=5)
    cells = aa.cells()
    assert len(cells) == 10 and {c.threads for c in cells} == {2}
    first, second = cells[0], cells[1]
    assert first.variant == {"allocator": "jemalloc", "sort": "2M", "calibrate": "A"}
    assert second.variant["calibrate"] == "B"
    for cell in (first, second):
        assert cell.preload == "jemalloc" and cell.env == {"MALLOC_CONF": "narenas:2"}
        assert cell.server_options == {"innodb_flush_log_at_trx_commit": 2, "sort_buffer_size": "2M"}
    assert aa.file.experiment.repeats == 5 and aa.file.dataset == exp.file.dataset
    assert spec.parse(aa.text).file == aa.file  # stored with the results, it parses again


def test_detectable_effect_formula():
    rounds = 10
    t = power.factor(rounds)  # t(0.975, 9) + t(0.8, 9) = 2.262 + 0.883
    assert t == pytest.approx(2.262 + 0.883, abs=0.002)
    effect = power.detectable(NOISE, 20, rounds)
    assert effect == pytest.approx(math.expm1(t * math.sqrt(2 * (0.0002 + 0.004 / 20) / rounds)))
    assert power.detectable(NOISE, 20, 2) is None


def test_best_plan_trades_window_against_restarts():
    plan = power.best_plan(NOISE, 600)
    assert plan.rounds == power.rounds_in(600, NOISE, plan.duration) >= power.MIN_ROUNDS
    assert plan.rounds * 2 * (NOISE.overhead + plan.duration) <= 600
    for other in (plan.duration - 3, plan.duration + 5):  # its neighbours detect less
        assert power.detectable(NOISE, other, power.rounds_in(600, NOISE, other)) >= plan.effect
    # no restart noise: a longer window is all gain; much restart noise: more rounds
    assert power.best_plan(power.Noise(0.004, 0.0, 14.0), 600).duration > plan.duration
    assert power.best_plan(power.Noise(0.004, 0.002, 14.0), 600).duration < plan.duration


def test_rounds_for_reaches_the_effect():
    need = power.rounds_for(NOISE, 10, 0.02)
    assert power.detectable(NOISE, 10, need) <= 0.02 < power.detectable(NOISE, 10, need - 1)


def _doc(**changes) -> dict:
    doc = {
        "format": calibration.FORMAT, "created_at": "2026-11-20T12:00:00+00:00", "host": dict(HOST),
        "workload_hash": "abc", "server_sha256": "f" * 64,
        "noise": {"per_second": 0.004, "restart": 0.0002, "overhead": 14.0},
    }  # fmt: skip
    return {**doc, **changes}


def _write(path: Path, doc: dict | str) -> Path:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"host": {**HOST, "cpu_model": "another"}}, "host.cpu_model"),
        ({"host": {**HOST, "hostname": "elsewhere"}}, "host.hostname"),
        ({"workload_hash": "def"}, "workload_hash"),
        ({"server_sha256": "0" * 64}, "server_sha256"),
        ({"created_at": "2026-10-01T12:00:00+00:00"}, "created_at: 52 days old, stale after 30"),
    ],
)
def test_a_mismatch_is_named_and_never_used(tmp_path: Path, changes: dict, named: str):
    path = _write(calibration.path_for(tmp_path, HOST, "abc"), _doc(**changes))
    with pytest.raises(UsageError, match=named.replace(".", r"\.")):
        calibration.check(path, HOST, "abc", "f" * 64, NOW)
    doc, note = calibration.find(tmp_path, HOST, "abc", "f" * 64, NOW)
    assert doc is None and note.startswith(f"ignored {path}: {named}")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{not json", "corrupt calibration file (not JSON"),
        (json.dumps(_doc(format="perflab-calibration/9")), "format 'perflab-calibration/9' is not"),
        (json.dumps(_doc(noise={"per_second": -1, "restart": 0, "overhead": 1})), "noise.per_second"),
        (json.dumps(_doc(noise=None)), "(noise is missing"),
        ("[1, 2]", "format 'list' is not"),
        (json.dumps(_doc(host_speed={"slope": "0.5"})), "host_speed.slope is not a number"),
        (json.dumps(_doc(host_speed={"slope": 40})), "host_speed.slope is not a number from -5 to 5"),
        (json.dumps(_doc(host_speed={"slope": 0.4, "chase_weight": -0.5})), "host_speed.chase_weight is not a number"),
        (json.dumps(_doc(host_speed={"slope": 0.4, "chase_weight": "1"})), "host_speed.chase_weight is not a number"),
        (json.dumps(_doc(host_speed={"slope": 0.4, "steal_weight": -1})), "host_speed.steal_weight is not a number"),
        (json.dumps(_doc(host_speed={"slope": 0.4, "steal_weight": 99})), "steal_weight is not a number from 0 to 20"),
    ],
)
def test_corrupt_or_unknown_files_are_refused(tmp_path: Path, text: str, named: str):
    path = _write(calibration.path_for(tmp_path, HOST, "abc"), text)
    with pytest.raises(UsageError, match=named.replace("(", r"\(").replace(".", r"\.")):
        calibration.check(path, HOST, "abc", None, NOW)
    doc, note = calibration.find(tmp_path, HOST, "abc", None, NOW)
    assert doc is None and note.startswith("ignored ") and named in note


def test_the_matching_file_is_found_and_others_are_named(tmp_path: Path):
    doc, note = calibration.find(tmp_path, HOST, "abc", None, NOW)
    assert doc is None and "no calibration matched" in note
    _write(tmp_path / "otherhost-abc.json", _doc())
    assert "only for other hosts: otherhost-abc.json" in calibration.find(tmp_path, HOST, "abc", None, NOW)[1]
    path = calibration.save(calibration.path_for(tmp_path, HOST, "abc"), _doc())
    doc, note = calibration.find(tmp_path, HOST, "abc", "f" * 64, NOW)
    assert doc is not None and doc["file"] == str(path) and note == f"using {path} (measured 2026-11-20)"


def test_workload_hash_covers_dataset_and_workload_only():
    a, b = spec.parse(FILE).file, spec.parse(FILE.replace('duration = "10s"', 'duration = "20s"')).file
    assert _hash(a) == _hash(b)
    c = spec.parse(FILE.replace("table_size = 1000", "table_size = 2000")).file
    assert _hash(a) != _hash(c)


def _hash(file: spec.ExperimentFile) -> str:
    return calibration.workload_hash(file.dataset.model_dump(mode="json"), file.workload.model_dump(mode="json"))


def test_a_calibration_plans_adaptive_repeats():
    exp = spec.parse(FILE)
    planned, used = calibrated.apply(exp, {**_doc(), "file": "/x.json"}, "using /x.json")
    need = power.rounds_for(NOISE, 10, 0.02)
    assert planned.file.experiment.min_repeats == used["min_repeats"] == need
    assert len(planned.cells()) == need * 2 * 2 * 2
    assert f"min_repeats 3 -> {need}" in used["note"] and used["file"] == "/x.json"
    fixed = spec.parse(FILE.replace('repeats = "auto"\nmax_repeats = 40', "repeats = 5"))
    same, used = calibrated.apply(fixed, _doc(), "using /x.json")
    assert same is fixed and "5 repeats detect effects of" in used["note"]


def test_cli_refuses_bad_rounds_budget_and_calibration(tmp_path: Path):
    toml = tmp_path / "e.toml"
    toml.write_text(FILE, encoding="utf-8")
    for args, named in (
        (["--rounds", "2"], "--rounds"),
        (["--rounds", "six"], "--rounds"),
        (["--budget", "10"], "--budget"),
        (["--budget", "soon"], "--budget"),
    ):
        done = perflab("calibrate", str(toml), *args)
        assert done.returncode == 2 and named in done.stderr, done.stderr
    bad = _write(tmp_path / "bad.json", "{")
    done = perflab("run", str(toml), "--check", "--calibration", str(bad))
    assert done.returncode == 2 and "corrupt calibration file" in done.stderr, done.stderr


def test_resume_keeps_the_planned_min_repeats():
    exp = spec.parse(FILE)
    assert calibrated.resumed(exp, {"calibration": {"min_repeats": 12}}).file.experiment.min_repeats == 12
    assert calibrated.resumed(exp, {}) is exp


def test_a_calibrated_host_speed_slope_is_passed_on_only_to_runs_with_the_canary():
    slope = {"slope": 0.49, "se": 0.05, "r": 0.85, "cells": 40, "rounds": 20}
    doc = _doc(host_speed=slope)
    off = spec.parse(FILE + "\n[observe]\nhost_speed = false\n")
    assert aa_experiment(off, rounds=3).file.observe.host_speed is False  # told no canary: none in calibrate
    planned, used = calibrated.apply(off, doc, "using /x.json")
    assert "host_speed" not in used and planned.file.observe.host_speed is False
    canary = spec.parse(FILE + "\n[observe]\nhost_speed = true\n")
    assert aa_experiment(canary, rounds=3).file.observe.host_speed  # the A/A run measures the slope too
    for exp in (canary, spec.parse(FILE.replace('repeats = "auto"\nmax_repeats = 40', "repeats = 5")
                                   + "\n[observe]\nhost_speed = true\n")):  # fmt: skip
        _, used = calibrated.apply(exp, doc, "using /x.json")
        assert used["host_speed"] == {**slope, "created_at": doc["created_at"]}
        assert "host-speed slope 0.49 (r = 0.85) fixed for the verdicts" in used["note"]
    _, used = calibrated.apply(canary, _doc(host_speed={**slope, "chase_weight": 0.62}), "using /x.json")
    assert used["host_speed"]["chase_weight"] == 0.62  # the verdicts weigh the chase in (analyze/host_speed.py)
    assert "host-speed slope 0.49, chase weight 0.62 (r = 0.85) fixed" in used["note"]
    _, used = calibrated.apply(canary, _doc(), "using /x.json")  # a calibration without the canary's slope
    assert "host_speed" not in used and "has no host-speed slope" in used["note"] and "fits its own" in used["note"]
    for bad, why in (({"se": 0.2}, "0.49 is not resolved (under 4 standard errors"),
                     ({"slope": -0.3}, "-0.30 is not positive")):  # fmt: skip
        _, used = calibrated.apply(canary, _doc(host_speed={**slope, **bad}), "using /x.json")
        assert "host_speed" not in used and why in used["note"], used["note"]


def test_unset_the_canary_is_on_where_the_calibration_measured_a_usable_slope(monkeypatch):
    unset = spec.parse(FILE)
    assert unset.file.observe.host_speed is None
    assert aa_experiment(unset, rounds=3).file.observe.host_speed  # calibrate measures the slope by default
    monkeypatch.setenv("CC", "/nonexistent/cc")  # ...where it can build the canary: no error without a compiler
    assert not aa_experiment(unset, rounds=3).file.observe.host_speed
    monkeypatch.delenv("CC")
    slope = {"slope": 0.49, "se": 0.05, "r": 0.85, "cells": 40, "rounds": 20}
    planned, used = calibrated.apply(unset, _doc(host_speed=slope), "using /x.json")
    assert planned.file.observe.host_speed is True and used["host_speed"]["slope"] == 0.49
    assert "[observe] host_speed on" in used["note"] and "host-speed slope 0.49" in used["note"], used["note"]
    for doc in (_doc(), _doc(host_speed={**slope, "se": 0.2}), _doc(host_speed={**slope, "slope": -0.3})):
        planned, used = calibrated.apply(unset, doc, "using /x.json")  # no usable slope: no canary, no note
        assert not planned.file.observe.host_speed and "host_speed" not in used and "host speed" not in used["note"]
    # --resume turns it on again (its stored file does not say), and never against the file
    assert calibrated.resumed(unset, {"calibration": {"host_speed": slope}}).file.observe.host_speed is True
    off = spec.parse(FILE + "\n[observe]\nhost_speed = false\n")
    assert calibrated.resumed(off, {"calibration": {"host_speed": slope}}).file.observe.host_speed is False
    assert calibrated.resumed(unset, {"calibration": {}}).file.observe.host_speed is None


def test_with_a_calibrated_slope_the_rounds_are_planned_on_the_adjusted_restart_noise():
    canary = spec.parse(FILE + "\n[observe]\nhost_speed = true\n")
    slope = {"slope": 0.49, "se": 0.05, "r": 0.85, "cells": 40, "rounds": 20}
    raw, _ = calibrated.apply(canary, _doc(host_speed=slope), "using /x.json")  # no adjusted figure: raw noise
    assert raw.file.experiment.min_repeats == power.rounds_for(NOISE, 10, 0.02)
    quiet = {**slope, "restart": 0.00005}
    planned, used = calibrated.apply(canary, _doc(host_speed=quiet), "using /x.json")
    adjusted = power.Noise(per_second=0.004, restart=0.00005, overhead=14.0)
    assert planned.file.experiment.min_repeats == used["min_repeats"] == power.rounds_for(adjusted, 10, 0.02)
    assert used["min_repeats"] < raw.file.experiment.min_repeats
    both = {**quiet, "per_second": 0.001}  # since 2026-11-25 the window's noise is adjusted too
    planned, used = calibrated.apply(canary, _doc(host_speed=both), "using /x.json")
    adjusted = power.Noise(per_second=0.001, restart=0.00005, overhead=14.0)
    assert used["min_repeats"] == power.rounds_for(adjusted, 10, 0.02)
    unresolved, _ = calibrated.apply(canary, _doc(host_speed={**quiet, "se": 0.5}), "using /x.json")
    assert unresolved.file.experiment.min_repeats == raw.file.experiment.min_repeats  # its slope is not used


def test_the_adjusted_noise_scales_both_components_by_the_share_left():
    from perflab.cli.calibrate import adjusted_noise

    noise = power.Noise(per_second=0.016, restart=0.0029, overhead=6.0)
    half = adjusted_noise(noise, 0.5)
    assert (half.per_second, half.restart, half.overhead) == (0.008, 0.00145, 6.0)
    assert adjusted_noise(noise, 1.7) == noise and adjusted_noise(noise, -0.1).restart == 0
    # the plan keeps the unadjusted noise's window: scaling both does not favour longer windows
    assert power.best_plan(half, 600).duration == power.best_plan(noise, 600).duration


def test_calibrate_saves_no_slope_that_its_reader_would_call_corrupt(monkeypatch):
    # a 4-round A/A run fitted -9.77 ± 6.78 over 8 cells on CI; saved, the file was then "corrupt"
    import importlib

    calibrate = importlib.import_module("perflab.cli.calibrate")  # the module, not the click command
    wild = {"slope": -9.7661, "se": 6.7774, "r": -0.71, "cells": 8}
    monkeypatch.setattr(calibrate.host_slope, "within_rounds", lambda cells, metric, *weights: wild)
    noise = power.Noise(per_second=0.016, restart=0.0029, overhead=6.0)
    canary = [{"status": "ok", "settled": True, "host_speed": {"work_ns": 1e6}}]  # the fit itself is patched
    saved = calibrate._host_speed(None, canary, noise, 600, 10)
    assert saved["host_speed"] is None  # and it says why, with the fit it refused
    assert saved["host_speed_missing"].startswith("the fit on 8 cells, slope -9.77 ± 6.78, is beyond ±5")
    _, used = calibrated.apply(spec.parse(FILE), _doc(host_speed=None), "using /x.json")
    assert used["used"] and "host_speed" not in used
