"""Steal time in the reports (report/findings.py): the cells that lost more than STEAL_CORES to
the host's other guests are named in a warning that also counts in the verdicts' caution; a
run with less steal gets one informational line with its mean; an older run without the field,
or an idle host, gets nothing. A stall says how much the host took during it (its steal_cores,
from observers/resources.StealSampler)."""

from __future__ import annotations

from perflab.analyze import steady
from perflab.report import findings, phrases
from perflab.observers.resources import StealSampler
from tests.freezes import sleep_running


def cells(*steal: float | None) -> list[dict]:
    out = []
    for i, s in enumerate(steal):
        resources = {"other_cpu_cores": 0.0} if s is None else {"other_cpu_cores": 0.0, "steal_cpu_cores": s}
        out.append({"id": i + 1, "status": "ok", "key": f"v/t2/r{i + 1}", "resources": resources, "stalls": []})
    return out


def steal_findings(run: list[dict]) -> list[findings.Finding]:
    return [f for f in findings.collect([], run, {}) if f.kind == "steal"]


def test_cells_that_lost_more_than_the_threshold_are_named_worst_first():
    [found] = steal_findings(cells(0.05, 0.45, 0.31, 0.1))
    assert found.level == "warning" and found.cells == (2, 3)
    assert "2 of 4 cells lost more than 0.2 cores" in found.text
    assert found.text.index("cell 2 0.45") < found.text.index("cell 3 0.31")
    assert "mean of the run 0.23" in found.text
    assert "host steal time (1)" in phrases.caution([found])


def test_moderate_steal_is_one_line_that_does_not_undermine_the_verdicts():
    [found] = steal_findings(cells(0.05, 0.1, 0.08))
    assert found.level == "info" and "took 0.08 cores" in found.text
    assert phrases.caution([found]) == ""


def test_an_idle_host_and_an_older_run_get_nothing():
    assert steal_findings(cells(0.0, 0.01, 0.02)) == []
    assert steal_findings(cells(None, None)) == []


def stall_text(steal: float | None) -> str:
    stall = {"start_s": 12, "end_s": 14, "min_qps": 10.0, "kind": "low"}
    if steal is not None:
        stall["steal_cores"] = steal
    run = cells(0.0)
    run[0].update(stalls=[stall], window_start_s=5)
    [found] = [f for f in findings.collect([], run, {}) if f.kind == "stall"]
    return found.text


def test_a_stall_says_whether_the_host_took_the_cpus_meanwhile():
    assert "the host took 1.80 cores meanwhile (steal time): likely the host's stall" in stall_text(1.8)
    assert "host steal 0.01 cores: not the host's" in stall_text(0.01)
    assert "steal" not in stall_text(None)  # a run from before the field


def test_stall_steal_is_the_samples_bracketing_the_stall():
    sampler = StealSampler(interval=0.25)
    # steal seconds since boot, every 0.25 s: none, then 2 cores (a frozen host) from t = 101 to 102
    sampler.samples = [(100 + i / 4, 50 + 2 * max(0, min(i / 4 - 1, 1))) for i in range(13)]
    assert sampler.cores(101.0, 102.0) == 2.0
    assert sampler.cores(100.0, 101.0) == 0.0
    assert sampler.cores(100.9, 102.1) == 1.333  # 0.75 s either side of the samples bracketing it: diluted
    assert sampler.cores(99.0, 101.0) is None and sampler.cores(102.0, 104.0) is None  # not covered
    # the stored stall gets it, on sysbench's clock (t = 0 at 100 s)
    series = [{"t": t, "warmup": t <= 1, "tps": 10.0, "qps": 0.0 if t == 2 else 100.0} for t in range(1, 6)]
    fields = steady.cell_fields(series, 1.0, 80.0, steal=lambda a, b: sampler.cores(100 + a, 100 + b))
    [stall] = fields["stalls"]
    assert (stall["start_s"], stall["end_s"], stall["steal_cores"]) == (1, 2, 2.0)
    assert "steal_cores" not in steady.cell_fields(series, 1.0, 80.0)["stalls"][0]


def test_the_steal_sampler_samples_this_machine():
    with StealSampler(interval=0.05) as sampler:
        # 0.3 s of running time: its thread sleeps through a pause of this VM (or a wake-up late by
        # more than one interval), and such seconds are slept again
        sleep_running(0.3, slack=0.05)
    pairs = zip(sampler.samples, sampler.samples[1:])
    assert len(sampler.samples) >= 4 and all(b[0] > a[0] and b[1] >= a[1] for a, b in pairs)
    cores = sampler.cores(sampler.samples[0][0], sampler.samples[-1][0])
    assert cores is not None and 0 <= cores <= 64
