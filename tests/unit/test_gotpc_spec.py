"""[workload] tool = "go-tpc" in an experiment file: what is accepted, what is refused with exit 2
(an unknown go-tpc test, the dataset keys of sysbench and pgbench, the flags perflab sets), on MariaDB
and PostgreSQL (v1.0.12's postgres driver), and the design it gets."""

from __future__ import annotations

import pytest

from perflab import spec
from perflab.errors import EXIT_USAGE, SpecError

TPCC = '[experiment]\nname = "t"\n{extra}\n[workload]\ntool = "go-tpc"\ntest = "tpcc"\nwarehouses = 2\nthreads = [4]\n'
VARIANTS = '\n[variants.allocator]\nglibc = {}\njemalloc = { preload = "jemalloc" }\n'
PG_VARIANTS = '\n[variants.sb]\n"64MB" = { server_options = { shared_buffers = "64MB" } }\n"128MB" = {}\n'


def problems(text: str) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        spec.parse(text, "bad.toml")
    assert info.value.exit_code == EXIT_USAGE
    return {p.path: p.render() for p in info.value.problems}


def test_the_issue_s_workload_table_is_accepted_and_runs_sequentially() -> None:
    exp = spec.parse(TPCC.format(extra="") + VARIANTS)
    assert exp.file.workload.warehouses == 2 and exp.file.workload.test == "tpcc"
    assert exp.file.experiment.design == "sequential"
    assert exp.design_reason == "sequential: go-tpc's transactions are not counted per turn (sysbench's are)"


def test_an_unknown_go_tpc_test_is_refused() -> None:
    found = problems(TPCC.format(extra="").replace('test = "tpcc"', 'test = "tpch"'))
    assert list(found) == ["workload.test"] and "tpcc" in found["workload.test"]


def test_postgresql_is_accepted_and_runs_sequentially() -> None:
    """go-tpc v1.0.12's postgres driver (issue 50): PostgreSQL's cells run TPC-C as MariaDB's do."""
    exp = spec.parse(TPCC.format(extra='server = "postgresql"') + PG_VARIANTS)
    assert exp.file.experiment.server == "postgresql" and exp.file.workload.warehouses == 2
    assert exp.design_reason.startswith("sequential: go-tpc")


def test_postgresql_refuses_what_it_refuses_for_every_tool() -> None:
    found = problems(TPCC.format(extra='server = "postgresql"') + "\n[dataset]\nscale = 2\n")
    assert list(found) == ["dataset.scale"] and "warehouses" in found["dataset.scale"]


def test_interleaved_is_refused() -> None:
    found = problems(TPCC.format(extra='design = "interleaved"') + VARIANTS)
    assert "workload.tool" in found and "not by go-tpc yet" in found["workload.tool"]


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (TPCC.format(extra="").replace("warehouses = 2\n", ""), "workload.warehouses"),
        (TPCC.format(extra="").replace('test = "tpcc"\n', ""), "workload.test"),
        (TPCC.format(extra="") + "\n[dataset]\ntables = 2\n", "dataset.tables"),
        (
            TPCC.format(extra="").replace("threads = [4]", 'threads = [4]\noptions = { time = "5s" }'),
            "workload.options.time",
        ),
        ('[experiment]\nname = "t"\n[workload]\ntest = "oltp_read_only"\nwarehouses = 2\n', "workload.warehouses"),
        (TPCC.format(extra="").replace("warehouses = 2", "warehouses = 0"), "workload.warehouses"),
        (
            TPCC.format(extra="") + '\n[variants.client]\nj = { client_preload = "jemalloc" }\n',
            "variants.client.j.client_preload",
        ),
        (
            TPCC.format(extra="").replace("threads = [4]", 'threads = [4]\noptions = { driver = "x" }'),
            "workload.options.driver",
        ),
        (
            TPCC.format(extra="").replace("threads = [4]", 'threads = [4]\noptions = { targets = "x" }'),
            "workload.options.targets",
        ),
    ],
)
def test_refusals_name_their_key(text: str, path: str) -> None:
    assert path in problems(text)
