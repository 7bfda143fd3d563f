"""Fixtures of the integration tests (they run as root, as CI does: tmpfs mounts need it)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import RUN_OUTPUTS
from tests.integration import helpers
from tests.integration.helpers import tmpfs_mounts
from tests.integration.sshhosts import SshLab, ssh_hosts

# The modules that take longest, longest first, in worker-seconds (make test's parallel part,
# 5 workers). xdist's --dist loadfile hands modules out in collection order, so a long module
# collected late (alphabetically) ran alone at the end: 401 s for 328 s of work a worker. Longest
# first, the short ones fill in behind. A rough order is enough; re-measure with `pytest
# --durations=0` when modules grow: the order of 2026-11-29 (its first ones 345 -> 135 s since, one
# of them 163 -> 10 s) left one worker 20 s behind the others (427 s against 407 s, replaying
# xdist's hand-out on the measured seconds). The SSH lab modules take one lock between them
# (sshhosts.py): started early, they do not wait for each other at the end.
LONGEST_FIRST = (  # measured here, 2026-12-01 (the parallel part alone, 431 s: its modules' seconds)
    "test_remote_client.py",  # 140 s
    "test_host_speed_real.py",  # 139
    "test_remote_server.py",  # 135
    "test_resume.py",  # 83
    "test_failures.py",  # 81
    "test_builds_server_host.py",  # 76
    "test_postgresql.py",  # 68
    "test_io_canary_server_host.py",  # 65
    "test_resources.py",  # 59
    "test_calibrate.py",  # 57
    "test_sid_servers_real.py",  # 56
    "test_builds.py",  # 56
    "test_gotpc_real.py",  # 56
    "test_run.py",  # 54
    "test_gotpc_hosts.py",  # 53
    "test_host_axis_real.py",  # 51
    "test_storage_disk.py",  # 41
    "test_interleave_failures_real.py",  # 41
    "test_alloc_server_host.py",  # 41
    "test_mysql_observers_real.py",  # 40
    "test_client_profiles.py",  # 39
    "test_shared_machine.py",  # 37
    "test_debroot_real.py",  # 36
    "test_decisive_real.py",  # 36
    "test_gotpc_pg_real.py",  # 35
    "test_history_real.py",  # 34
    "test_report_browser.py",  # 32
    "test_alloc.py",  # 32
    "test_datasets.py",  # 30
    "test_mysql_sid_real.py",  # 22
    "test_alloc_faults.py",  # 22
    "test_client.py",  # 21
    "test_hosts_trust.py",  # 19
    "test_lock.py",  # 19
    "test_status.py",  # 19
    "test_adaptive_stop_real.py",  # 18
    "test_concurrency.py",  # 17
    "test_pg_builds_real.py",  # 16
    "test_allocators.py",  # 16
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Integration modules longest first (LONGEST_FIRST); the rest after them, in their order.
    The same order in every xdist worker (it is a function of the names only)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="module", autouse=True)
def paced_clients(request: pytest.FixtureRequest) -> Iterator[None]:
    """Clients run paced (helpers.PACE) in the modules that run side by side, at full speed in the
    quiet ones. Autouse and module-scoped: set before the module's own fixtures run."""
    helpers.pacing = request.node.get_closest_marker("quiet") is None
    yield
    helpers.pacing = False


QUIET_WAIT_S = 300.0  # how long the quiet modules wait, all told, for the others' load to fall to BUSY_CORES
_waited = [0.0]  # seconds they have waited so far: a machine busy for good fails each later one at once


@pytest.fixture(scope="module", autouse=True)
def quiet_machine(request: pytest.FixtureRequest) -> Iterator[None]:
    """A quiet module (its assertions on measured effects) starts on a quiet machine: it waits for the
    other processes' load to fall to the report's BUSY_CORES, and fails naming the load when it does
    not within what is left of QUIET_WAIT_S, before any run. Its runs are noted (tests/conftest.RUN_OUTPUTS) for
    pytest_runtest_makereport, which names their cells' load when a test of it fails."""
    if request.node.get_closest_marker("quiet") is None:
        yield
        return
    from perflab.report.findings import BUSY_CORES

    started = time.monotonic()
    # a quarter second a probe (/proc/stat's 10 ms ticks: 0.04 cores of resolution, against 0.2), probed
    # again while busy: 1 s probes cost each of the 14 quiet modules a second
    probe = functools.partial(helpers.other_cores, 0.25)
    load = helpers.wait_for_quiet(probe, BUSY_CORES, max(0.0, QUIET_WAIT_S - _waited[0]))
    _waited[0] += time.monotonic() - started
    if load is not None:
        pytest.fail(
            f"the machine is busy: other processes used {load:.2f} cores (other_cpu_cores' measure; quiet is "
            f"{BUSY_CORES}) after {_waited[0]:.0f} s of waiting; a quiet module measures effects and would fail "
            "as wrong verdicts: run it on an idle machine",
            pytrace=False,
        )
    request.node.stash[_RUNS_FROM] = len(RUN_OUTPUTS)
    yield


_RUNS_FROM = pytest.StashKey[int]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """A quiet test that fails after runs perflab found busy fails naming that load first: its
    failure is the load's, not a wrong verdict (helpers.busy_runs)."""
    report: pytest.TestReport = yield
    module = item.getparent(pytest.Module)
    if not report.failed or item.get_closest_marker("quiet") is None or module is None:
        return report
    start = module.stash.get(_RUNS_FROM, None)
    said = helpers.busy_runs(RUN_OUTPUTS[start:]) if start is not None else None
    if said is not None:
        report.longrepr = f"{said}\n\n{report.longrepr}"
    return report


@pytest.fixture
def tmpfs() -> Iterator[Callable[..., Path]]:
    with tmpfs_mounts() as mount:
        yield mount


@pytest.fixture
def ssh_lab(tmp_path: Path) -> Iterator[SshLab]:
    """Two real SSH hosts, `db` and `load`, in network namespaces of their own (sshhosts.py)."""
    with ssh_hosts(tmp_path, ["db", "load"]) as lab:
        yield lab
