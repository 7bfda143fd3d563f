"""The calibrated effect (tests/data/calibrated/slow_malloc.c): a preload that burns a set number
of nanoseconds of CPU per malloc call. Outside a server, each call costs what it is told to; in
a real mariadbd cell it is loaded (perflab's allocator check maps it), its CPU cost per
transaction is about malloc calls per transaction x ns, and a large setting makes the cell
clearly slower.

Sizes, measured here: oltp_read_only makes about 34 malloc calls a transaction (27 malloc + 7
operator new) and the server spends about 350-600 us of CPU a transaction, so 2000 ns a call
costs about 70 us (12-20%: too close to the noise of one short cell on a busy machine to
assert on), 10000 ns about 340 us (about the server's own work, whose drift between cells then
hid it: 0.56x of nominal seen), and 40000 ns about 1.4 ms: the burn dominates a transaction's
CPU, so the drift of the rest moves the difference by a fifth of it at most.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import perflab
from tests.data.calibrated.build import ENV, build
from tests.integration.helpers import used, write_experiment

# alone (make test runs the quiet modules first, one at a time): a QPS ratio between two cells run one after the other
pytestmark = pytest.mark.quiet

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
int main(void) {
    double start = cpu();
    for (int i = 0; i < 200000; i++) { void *volatile p = malloc(32); free(p); }
    printf("%f\n", (cpu() - start) / 200000);
    return 0;
}
"""
NS = 40_000
SPEC = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-calibrated"
duration = "5s"
warmup = "2s"
repeats = 2

[dataset]
tables = 1
table_size = 10000

[workload]
threads = [2]

[variants.effect]
none = {{}}
slow = {{ preload = "{lib}", env = {{ {env} = "{ns}" }} }}

[observe]
alloc = {{ stacks = false, syscalls = false }}
"""


def per_call_ns(program: Path, lib: Path, ns: str | None) -> float:
    """The median of 3 runs: one run on a VM whose other vCPU is busy can be far off."""
    env = {"LD_PRELOAD": str(lib)} | ({ENV: ns} if ns is not None else {})
    runs = [subprocess.run([str(program)], capture_output=True, text=True, env=env, check=True) for _ in range(3)]
    return sorted(float(done.stdout) for done in runs)[1]


def test_each_call_burns_the_cpu_it_is_told_to(tmp_path: Path) -> None:
    lib = build(tmp_path / "shim")
    (tmp_path / "p.c").write_text(PROGRAM, encoding="utf-8")
    subprocess.run(["cc", "-O2", "-o", str(tmp_path / "p"), str(tmp_path / "p.c")], check=True)
    plain = per_call_ns(tmp_path / "p", lib, None)
    assert plain < 100  # unset: a thin wrapper
    assert per_call_ns(tmp_path / "p", lib, "nonsense") < 100
    for ns in (500, 2000):
        extra = per_call_ns(tmp_path / "p", lib, str(ns)) - plain
        # 500 ns keeps the start-up speed (too short to time: 0.79-1.06x measured, idle to load 12,
        # and 0.64x at 2000 ns in ci8 before the shim timed its burns); 2000 ns is timed
        assert 0.5 * ns < extra < 2.2 * ns, (ns, extra)


@pytest.fixture(scope="module")
def calibrated_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("calibrated")
    lib = build(tmp / "shim")
    spec = write_experiment(tmp / "calibrated.toml", SPEC.format(lib=lib, env=ENV, ns=NS))
    done = perflab("run", str(spec), "-o", str(tmp / "results"), "--seed", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    exported = perflab("export", str(tmp / "results"))
    assert exported.returncode == 0, exported.stderr
    return json.loads(exported.stdout)


def test_the_shim_runs_in_a_real_server_and_costs_its_nominal_cpu(calibrated_run: dict) -> None:
    cells = used(calibrated_run["cells"])  # an unsettled cell is measured again in its round: its retry
    assert [c["status"] for c in cells] == ["ok"] * 4
    slow = [c for c in cells if c["variant"]["effect"] == "slow"]
    none = [c for c in cells if c["variant"]["effect"] == "none"]
    assert all(c["preload"] and c["preload"].endswith(".so") for c in slow)

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    # the calls the shim slows: malloc, calloc, realloc, and operator new (which calls malloc)
    calls = mean([sum(c["alloc"]["calls_per_txn"][op] for op in ("malloc", "calloc", "realloc", "new")) for c in slow])
    nominal_us = calls * NS / 1000
    cpu = [mean([c["resources"]["server_cpu_us_per_txn"] for c in side]) for side in (none, slow)]
    # What the mechanism guarantees: each call burns about its nominal CPU (the shim times every
    # 16th burn of 2 us or more and follows the loop's speed in the CPU time it runs in; before it
    # did, a speed taken once at the server's start gave 0.73x-2.1x). Beside the burn, the
    # server's own work (350-600 us a transaction, drifting with the host's speed between cells)
    # moves the difference by up to 250 us, under a fifth of the 1.4 ms nominal: 0.5x-2.2x. A shim
    # that did nothing gives ~0, a unit off (us for ns) or a count per call of the wrong process
    # falls outside.
    assert 0.5 * nominal_us < cpu[1] - cpu[0] < 2.2 * nominal_us, (cpu, nominal_us)
    qps = [mean([c["summary"]["qps"] for c in side]) for side in (none, slow)]
    # the server's CPU a transaction at least doubles (base <= 600 us, burn >= 1 ms) and it is the
    # bottleneck of 2 clients on 2 vCPUs: QPS about a third (0.6: room for the clients' own time)
    assert qps[1] < 0.6 * qps[0], qps
