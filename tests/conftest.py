"""Marks tests by folder (tests/integration -> `integration`) and offers CLI helpers."""

from __future__ import annotations

import atexit
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Other perflab runs on a developer's machine (a benchmark, another checkout's tests) must not
# make these tests refuse to run; tests/integration/test_lock.py clears it to test the refusal.
os.environ["PERFLAB_ALLOW_CONCURRENT"] = "1"
# Every `perflab run` records itself in the history index: the tests' runs go to a throwaway one,
# never to ~/.local/share/perflab/history.sqlite (tests that need their own pass --history).
os.environ["PERFLAB_HISTORY"] = str(Path(tempfile.mkdtemp(prefix="perflab-test-history-")) / "history.sqlite")
atexit.register(shutil.rmtree, Path(os.environ["PERFLAB_HISTORY"]).parent, ignore_errors=True)  # each process's own
# and the storage directories runs used (run/storage_dirs.py, for doctor --clean) to a throwaway record
os.environ["PERFLAB_STATE"] = str(Path(os.environ["PERFLAB_HISTORY"]).parent)
# perflab's tables take $COLUMNS as the terminal's width (cli/console.py). GNU readline, which pytest
# imports (through pdb), exports COLUMNS and LINES of the terminal pytest started in, or 80 without one,
# into the C environment, where every subprocess inherits them: take them back, so that a test's
# `perflab run` prints what a pipe gets (150 columns) unless the test sets COLUMNS itself.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
    os.unsetenv(_name)
# A shell starts background jobs (`make test &`, `nohup ... &`) with SIGINT ignored, and an
# ignored signal is inherited through exec: the perflab runs these tests start could then never
# see the Ctrl-C that tests/integration/test_failures.py sends. Take SIGINT back, as a terminal has it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Each pytest process (make test runs integration modules in parallel, one per xdist worker) gives
# its perflab runs a tmpfs directory of their own: a run cleans the work directories of dead runs
# it finds under PERFLAB_TMPFS, and a test that SIGKILLs perflab inspects what its run left there,
# so neither may meet another process's runs. The directory is made under the PERFLAB_TMPFS the
# user set, else /dev/shm; a worker inherits the controller's environment, so PERFLAB_TEST_TMPFS_*
# say whose directory PERFLAB_TMPFS names and where the user's was. Tests that need another place
# set PERFLAB_TMPFS for their own runs.
_TMPFS = None
_BASE = Path(os.environ.get("PERFLAB_TEST_TMPFS_BASE") or os.environ.get("PERFLAB_TMPFS") or "/dev/shm")
if os.environ.get("PERFLAB_TEST_TMPFS_PID") != str(os.getpid()) and _BASE.is_dir():
    _TMPFS = Path(tempfile.mkdtemp(prefix=f"pltest-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-", dir=_BASE))
    _TMPFS.chmod(0o755)  # postgres (a server's datadir under it, run as root) must reach its own
    os.environ["PERFLAB_TMPFS"] = str(_TMPFS)
    os.environ["PERFLAB_TEST_TMPFS_BASE"] = str(_BASE)
    os.environ["PERFLAB_TEST_TMPFS_PID"] = str(os.getpid())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.integration)


# CPU seconds per test (this process's and its waited-for children's: perflab, mariadbd, sysbench),
# printed after the durations: make test is bound by the 2 vCPUs' CPU, not by wall time, so this is
# the ranking to cut by (docs/development.md, "Tests"). A module fixture's cost goes to its first test.
_CPU_START = pytest.StashKey[float]()
_CPU_SECONDS: dict[str, float] = {}
CPU_SHOWN = int(os.environ.get("PERFLAB_CPU_SHOWN", "25"))  # every test's: PERFLAB_CPU_SHOWN=1000


def _cpu_now() -> float:
    mine, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_CPU_START] = _cpu_now()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    if call.when == "teardown" and _CPU_START in item.stash:  # sent to xdist's controller with the report
        report.user_properties.append(("cpu_s", _cpu_now() - item.stash[_CPU_START]))
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties if report.when == "teardown" else ():
        if name == "cpu_s":
            _CPU_SECONDS[report.nodeid] = value


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    top = sorted(_CPU_SECONDS.items(), key=lambda kv: -kv[1])[:CPU_SHOWN]
    if not top or top[0][1] < 1:
        return
    total = sum(_CPU_SECONDS.values())
    terminalreporter.write_sep("=", f"most CPU {len(top)} (of {total:.0f} CPU-s over {len(_CPU_SECONDS)} tests)")
    for nodeid, seconds in top:
        terminalreporter.write_line(f"{seconds:8.1f} CPU-s  {nodeid}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _TMPFS is not None:
        shutil.rmtree(_TMPFS, ignore_errors=True)  # what the runs left is theirs to clean: only empties remain


# Verbs that only read a results directory or the history index: run in this process (the same
# click entry point, its output captured), which saves the ~0.5 CPU-s each subprocess spends
# importing perflab (numpy, scipy, pydantic) on a 2-CPU machine where make test is CPU-bound.
# PERFLAB_TEST_SUBPROCESS=1 runs every verb in a subprocess (tests/unit/test_in_process.py
# compares the two).
IN_PROCESS = frozenset({"export", "report", "compare", "history", "profile", "diff", "flame", "alloc"})


def perflab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the perflab CLI as a user would: `run`, `calibrate`, `build` and `doctor` in a subprocess
    (they start servers, take signals, exit on them), the reading verbs and `run --check` (it starts
    nothing: it loads the file and checks the machine) in this process."""
    reads = bool(args) and (args[0] in IN_PROCESS or (args[0] == "run" and "--check" in args))
    if reads and not os.environ.get("PERFLAB_TEST_SUBPROCESS"):
        return in_process(*args)
    RUN_OUTPUTS.extend(_outputs(args))
    return subprocess.run(
        [sys.executable, "-m", "perflab", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


# the results directories of the runs this process started (`run -o DIR`, `run --resume DIR`,
# `calibrate -o DIR`): a quiet test that fails reads their cells' load (tests/integration/conftest.py)
RUN_OUTPUTS: list[Path] = []


def _outputs(args: tuple[str, ...]) -> list[Path]:
    if not args or args[0] not in ("run", "calibrate"):
        return []
    return [Path(args[i + 1]) for i, a in enumerate(args[:-1]) if a in ("-o", "--output", "--resume")]


def in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """`perflab ARGS` through its click entry point in this process: stdout and stderr captured,
    the exit code from its SystemExit; an exception it lets escape is a bug, reported as a
    subprocess would (exit 1, the traceback on stderr). The signal handlers the CLI sets are put back."""
    import contextlib  # noqa: PLC0415
    import io  # noqa: PLC0415
    import traceback  # noqa: PLC0415

    from perflab.cli import main  # noqa: PLC0415

    out, err = io.StringIO(), io.StringIO()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main.main(args=list(args), prog_name="perflab", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            err.write(exc.code + "\n")
    except Exception:  # noqa: BLE001 - what a subprocess would print before exiting 1
        err.write(traceback.format_exc())
        code = 1
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return subprocess.CompletedProcess(["perflab", *args], code, out.getvalue(), err.getvalue())


def inferno_path() -> str | None:
    """inferno-flamegraph as perflab finds it, or None: `make setup` skips it on a machine
    without Rust (docs/profiles.md), and the tests that need it then assert the error instead."""
    from perflab.errors import ToolMissingError  # noqa: PLC0415
    from perflab.report import flame  # noqa: PLC0415

    try:
        return flame.inferno()
    except ToolMissingError:
        return None
