"""[workload] rate and a variant's rate (workloads/rate.py): what is accepted, what is refused with
exit 2 and the key named, the design it gets, and the clients' command lines."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from perflab import spec
from perflab.errors import EXIT_USAGE, SpecError
from perflab.workloads import pgbench_argv, rate, sysbench

HEAD = '[experiment]\nname = "t"\n{extra}\n[workload]\ntest = "oltp_point_select"\nthreads = [2]\n{workload}\n'
ALLOC = '\n[variants.allocator]\nglibc = {}\njemalloc = { preload = "jemalloc" }\n'
RATES = '\n[variants.rate]\nlow = { rate = 500 }\nhigh = { rate = 1500 }\n'


def parse(extra: str = "", workload: str = "rate = 1500", tail: str = ALLOC) -> spec.Experiment:
    return spec.parse(HEAD.format(extra=extra, workload=workload) + tail, "t.toml")


def problems(text: str) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        spec.parse(text, "bad.toml")
    assert info.value.exit_code == EXIT_USAGE
    return {p.path: p.render() for p in info.value.problems}


def test_a_rate_reaches_every_cell_and_runs_sequentially() -> None:
    exp = parse()
    assert {c.rate for c in exp.cells()} == {1500}
    assert exp.file.experiment.design == "sequential"
    assert exp.design_reason.startswith("sequential: a fixed rate")
    assert rate.rates(exp.file) == [1500]


def test_a_rate_axis_gives_each_cell_its_label_s_rate() -> None:
    exp = parse(workload="", tail=ALLOC + RATES)
    by_label = {(c.variant["rate"], c.variant["allocator"]): c.rate for c in exp.cells()}
    assert by_label == {
        ("low", "glibc"): 500,
        ("low", "jemalloc"): 500,
        ("high", "glibc"): 1500,
        ("high", "jemalloc"): 1500,
    }
    assert rate.rates(exp.file) == [500, 1500]


def test_a_closed_loop_has_no_rate() -> None:
    exp = parse(workload="")
    assert {c.rate for c in exp.cells()} == {None} and rate.rates(exp.file) == []


@pytest.mark.parametrize(
    ("workload", "tail", "path", "said"),
    [
        ("rate = 0", ALLOC, "workload.rate", "from 1 to 1,000,000"),
        ("rate = -5", ALLOC, "workload.rate", "from 1 to 1,000,000"),
        ("rate = 2000000", ALLOC, "workload.rate", "from 1 to 1,000,000"),
        ('rate = "1500"', ALLOC, "workload.rate", "a whole number of transactions a second"),
        ("rate = 1500.5", ALLOC, "workload.rate", "a whole number"),
        ("rate = true", ALLOC, "workload.rate", "a whole number"),
        ("", '\n[variants.rate]\nlow = { rate = 0 }\n', "variants.rate.low.rate", "from 1 to"),
        ("rate = 1500\noptions = { rate = 200 }", ALLOC, "workload.options.rate", "no raw --rate option"),
    ],
)
def test_bad_rates_are_refused_naming_the_key(workload: str, tail: str, path: str, said: str) -> None:
    found = problems(HEAD.format(extra="", workload=workload) + tail)
    assert path in found, found
    assert said in found[path]


def test_two_axes_setting_two_rates_are_refused() -> None:
    tail = RATES + '\n[variants.other]\nx = { rate = 700 }\ny = {}\n'
    found = problems(HEAD.format(extra="", workload="") + tail)
    assert any("set rate to both" in text for text in found.values()), found


def test_the_interleaved_design_is_refused_with_the_reason() -> None:
    found = problems(HEAD.format(extra='design = "interleaved"', workload="rate = 1500") + ALLOC)
    assert "workload.rate" in found and "would queue the arrivals of its pause" in found["workload.rate"]


def test_go_tpc_is_refused_with_the_reason() -> None:
    text = '[experiment]\nname = "t"\n[workload]\ntool = "go-tpc"\ntest = "tpcc"\nwarehouses = 2\n'
    text += "threads = [4]\nrate = 100\n"
    found = problems(text)
    assert "workload.rate" in found
    assert "no rate control" in found["workload.rate"] and "--wait" in found["workload.rate"]


def test_pgbench_takes_a_rate() -> None:
    text = (
        '[experiment]\nname = "t"\nserver = "postgresql"\n[dataset]\nscale = 1\n[workload]\ntool = "pgbench"\n'
        'test = "select-only"\nthreads = [2]\nrate = 300\noptions = { latency_limit = 50 }\n'
    )
    exp = spec.parse(text, "t.toml")
    assert {c.rate for c in exp.cells()} == {300}


def test_sysbench_s_argv_carries_the_cell_s_rate() -> None:
    exp = parse()
    cell = exp.cells()[0]
    argv = sysbench.cell_argv(exp.file, cell, Path("/tmp/x.sock"), binary="sysbench")
    assert "--rate=1500" in argv and argv.count("--rate=1500") == 1
    assert argv[-1] == "run" and "--report-checkpoints=10" in argv
    closed = parse(workload="")
    assert not [a for a in sysbench.cell_argv(closed.file, closed.cells()[0], Path("/s"), binary="sysbench") if "rate" in a]
    window = sysbench.SYSBENCH.run_argv(exp.file, cell, SimpleNamespace(socket=Path("/s")), 12, 2)
    assert "--rate=1500" in window  # the sequential window's client (run/cell.py)


def test_pgbench_s_argv_carries_the_cell_s_rate_and_latency_limit() -> None:
    file = SimpleNamespace(workload=SimpleNamespace(options={"latency_limit": 50}))
    cell = SimpleNamespace(rate=300, workload_options={})
    argv = pgbench_argv.argv(
        "select-only", socket_dir="/s", port=5432, user="postgres", clients=2, jobs=2, seconds=10,
        log_prefix=Path("/r/pgbench_log"), options=rate.options(file, cell),
    )  # fmt: skip
    assert "--rate=300" in argv and "--latency-limit=50" in argv and "--log" in argv
