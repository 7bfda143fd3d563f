"""Adaptive repeats on a real run (moved from test_analysis.py, which measures and runs alone: this
checks when rounds stop, not an effect, so it runs beside others in make test): a target no run can
meet stops at max_repeats and says so."""

from __future__ import annotations

import json

from tests.conftest import perflab
from tests.integration.helpers import used, write_experiment

ADAPTIVE = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-adaptive"
duration = "2s"
warmup = "1s"
repeats = "auto"
target_ci = "0.01%"
max_repeats = 4

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_point_select"
threads = [1]
"""


def test_adaptive_repeats_stop_at_max_repeats_and_say_so(tmp_path):
    out = tmp_path / "results"
    # a closed loop: a paced client's seconds could meet even this target
    done = perflab("run", str(write_experiment(tmp_path / "a.toml", ADAPTIVE, pace=None)), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 of 1 groups met it" in done.stdout and "max_repeats (4) reached" in done.stdout
    doc = json.loads(perflab("export", str(out)).stdout)
    assert [c["repeat"] for c in used(doc["cells"])] == [1, 2, 3, 4]  # a retry stands in for an unsettled cell
    adaptive = doc["adaptive"]
    assert adaptive["rounds"] == 4 and adaptive["target_ci"] == 0.0001
    (group,) = adaptive["groups"]
    assert group["met"] is False and group["half_width"] > 0.0001
