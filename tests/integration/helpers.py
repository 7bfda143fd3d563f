"""Shared pieces of the integration tests: tiny experiments and process checks."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Paced clients. A module that measures is marked quiet and runs alone, its clients at full speed.
# The others run side by side (make test: pytest -n IT_WORKERS) and check what perflab does, not how
# fast: their sysbench and pgbench runs are paced at PACE transactions a second (the tools' own
# --rate), unless the experiment sets a rate itself or the test asks for a closed loop
# (write_experiment(..., pace=None)). Unpaced, every window took both CPUs, and the parallel phase
# was bound by CPU, not by its windows (docs/development.md, "Tests"). Set per module by
# tests/integration/conftest.py from the module's quiet mark.
PACE = 200
pacing: bool = False
_DEFAULT = object()
# The same modules' MariaDB and MySQL datasets get a redo log of REDO instead of perflab's 256M default
# (servers/mysqld.DEFAULT_OPTIONS), unless the experiment sizes it itself: the 256 MB of a fallocated log
# are filled and copied into every cell's datadir on tmpfs. A 4-cell paced run took 5.7-6.2 CPU-s with
# the default and 4.6-5.2 with 32M (3 interleaved pairs, 2026-11-30; most of it the kernel's).
REDO = "32M"


def write_experiment(path: Path, body: str, *, pace: Any = _DEFAULT) -> Path:
    """Write the experiment `body`; outside quiet modules its client is paced (PACE above)."""
    body = textwrap.dedent(body)
    rate = (PACE if pacing else None) if pace is _DEFAULT else pace
    if rate is not None:
        body = paced(body, rate)
    if pacing:
        body = small_redo(body)
    path.write_text(body, encoding="utf-8")
    return path


def paced(body: str, rate: int) -> str:
    """`body` with `rate` among its workload options, where its tool takes one (sysbench, pgbench)
    and it sets none itself."""
    workload = tomllib.loads(body).get("workload")
    if workload is None or workload.get("tool", "sysbench") not in ("sysbench", "pgbench"):
        return body
    variants = tomllib.loads(body).get("variants") or {}
    rated = "rate" in workload or any("rate" in v for labels in variants.values() for v in labels.values())
    if "rate" in workload.get("options", {}) or rated:  # its own pace, or a fixed rate ([workload] rate)
        return body
    inline = re.compile(r"^(\s*)options\s*=\s*\{", re.MULTILINE)  # options = { ... } in [workload]
    table = re.compile(r"^(\s*)\[workload\.options\]\n", re.MULTILINE)
    if inline.search(body):
        body = inline.sub(lambda m: f"{m[1]}options = {{ rate = {rate},", body, count=1)
    elif table.search(body):
        body = table.sub(lambda m: f"{m[1]}[workload.options]\n{m[1]}rate = {rate}\n", body, count=1)
    else:
        body += f"\n[workload.options]\nrate = {rate}\n"
    assert tomllib.loads(body)["workload"]["options"]["rate"] == rate, body
    return body


def small_redo(body: str) -> str:
    """`body` with a redo log of REDO among its [server_options], for MariaDB and MySQL, unless it sizes
    the redo log itself or sets its server options in a form other than a [server_options] table."""
    doc = tomllib.loads(body)
    if doc.get("experiment", {}).get("server", "mariadb") == "postgresql":
        return body
    if re.search(r"innodb[_-]log[_-]file[_-]size|redo[_-]log[_-]capacity", body):
        return body
    table = re.compile(r"^\[server_options\]\n", re.MULTILINE)
    if table.search(body):
        body = table.sub(lambda m: f'[server_options]\ninnodb_log_file_size = "{REDO}"\n', body, count=1)
    elif "server_options" in doc:
        return body
    else:
        body += f'\n[server_options]\ninnodb_log_file_size = "{REDO}"\n'
    assert tomllib.loads(body)["server_options"]["innodb_log_file_size"] == REDO, body
    return body


def pgbench_experiment(name: str, *, duration: str = "3s", experiment: str = "", rest: str = "") -> str:
    """A one-cell experiment on PostgreSQL: pgbench select-only, scale 1, 2 clients, 1 s of
    warm-up; `experiment` adds [experiment] keys, `rest` the tables after [workload]."""
    return f"""
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "{name}"
server = "postgresql"
duration = "{duration}"
warmup = "1s"
repeats = 1
{experiment}
[dataset]
scale = 1

[workload]
tool = "pgbench"
test = "select-only"
threads = [2]
{rest}"""


def processes(name: str) -> list[tuple[int, str]]:
    """(pid, cmdline) of live processes whose executable name is `name` (zombies excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        state = stat[stat.rindex(")") + 2]
        if comm == name and state != "Z":
            found.append((int(entry), cmdline))
    return found


def orphans(name: str) -> list[tuple[int, str]]:
    """processes(name) that no live process owns any more (their parent is init): what a run left
    behind. Another module's client, running in parallel under its own perflab, is not one."""
    found = []
    for pid, cmdline in processes(name):
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == 1:
            found.append((pid, cmdline))
    return found


def runs_tmpfs() -> str:
    """Where this test process's perflab runs live: its own PERFLAB_TMPFS (tests/conftest.py)."""
    return os.environ.get("PERFLAB_TMPFS", "/dev/shm")


def wait_for(predicate: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def sysbench_started(out: Path) -> bool:
    """A run's sysbench (in results directory `out`) has started its threads."""
    return any("Threads started!" in p.read_text(errors="replace") for p in out.glob("logs/cell-*/sysbench.txt"))


def perflab_children(workdir: str | Path | None = None) -> list[tuple[int, str]]:
    """mariadbd and sysbench processes whose command line names `workdir` (by default: any
    perflab run's of this test process, under its PERFLAB_TMPFS; pass a run's own work directory
    when other perflab runs may be going on)."""
    workdir = workdir if workdir is not None else f"{runs_tmpfs()}/perflab-"
    servers = [p for p in processes("mariadbd") if str(workdir) in p[1]]
    clients = [p for p in processes("sysbench") if str(workdir) in p[1]]
    return servers + clients


@contextlib.contextmanager
def tmpfs_mounts() -> Iterator[Callable[..., Path]]:
    """mount(name, size, *options) -> a fresh tmpfs of `size` ("300M", "1G"), unmounted at
    exit. Under a short /tmp directory: a server's socket path must stay under 108 bytes, and
    pytest's tmp_path is long. A test's own tmpfs as PERFLAB_TMPFS also keeps other perflab
    runs on this machine (which clean up /dev/shm/perflab-* of dead runs) away from it."""
    base = Path(tempfile.mkdtemp(prefix="plit-", dir="/tmp"))
    base.chmod(0o755)  # mkdtemp's 0700: the servers' accounts (mysql, postgres) must reach their datadirs
    mounted: list[Path] = []

    def mount(name: str, size: str, *options: str) -> Path:
        path = base / name
        path.mkdir()
        opts = ",".join([f"size={size}", *options])
        subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], check=True)
        mounted.append(path)
        return path

    try:
        yield mount
    finally:
        for path in mounted:
            subprocess.run(["umount", "-l", str(path)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def run_exported(tmp: Path, name: str, body: str, seed: int) -> tuple[dict[str, Any], str, Any, Path]:
    """`perflab run` of `body` with this seed, watched for VM pauses: (its export, its output, the
    Freezes, the results directory)."""
    from tests.conftest import perflab
    from tests.freezes import Freezes

    out = tmp / "results"
    spec = write_experiment(tmp / f"{name}.toml", body)
    with Freezes() as freezes:
        done = perflab("run", str(spec), "-o", str(out), "--seed", str(seed))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = perflab("export", str(out))
    assert exported.returncode == 0, exported.stderr
    return json.loads(exported.stdout), done.stdout + done.stderr, freezes, out


def assert_interleaved_by_default(doc: dict[str, Any], output: str, rounds: int = 2) -> None:
    """A file without `design` ran interleaved, said so, and each round's two cells ran as one group."""
    assert doc["run"]["design"] == "interleaved" and "the default" in doc["run"]["design_reason"], doc["run"]
    assert "design: interleaved" in output
    cells = used(doc["cells"])  # an unsettled seat is measured again with its group: the retries' group
    assert [c["status"] for c in cells] == ["ok"] * (2 * rounds), [c.get("error") for c in cells]
    for repeat in range(1, rounds + 1):
        pair = [c for c in cells if c["repeat"] == repeat]
        assert [c["design"]["group"] for c in pair] == [sorted(c["id"] for c in pair)] * 2


def counted_share(alloc: dict, transactions: float) -> float:
    """[observe] alloc's transactions, checked against the window's: its counts' share of them
    (`window_share`: on a server host they open a round trip after the window began, and with pgbench,
    which runs on past the window's end, they close a round trip or two after it: more than 1), most of
    the window, the transactions that share of the summary's. Its transactions (0: false)."""
    share = alloc["window_share"]
    assert 0.5 < share <= 1.5 and abs(alloc["transactions"] - transactions * share) <= max(0.1, 1e-3 * transactions), (
        alloc["transactions"],
        transactions,
        share,
    )
    return alloc["transactions"]


# Quiet modules measure effects: beside other processes' CPU their verdicts are wrong for a reason
# that is not perflab's (test_analysis failed 4 tests so, beside 1.2 cores of others). Before a quiet
# module the machine is waited for until quiet (tests/integration/conftest.py, QUIET_WAIT_S); a quiet
# test that fails after runs whose cells perflab found busy (their `other_cpu_cores`) fails naming
# that load first. The limit is the report's own "busy" finding's (report/findings.BUSY_CORES).
def busy_cells(cells: list[dict[str, Any]]) -> list[tuple[float, dict[str, Any]]]:
    """(other_cpu_cores, cell) of each ok cell that ran beside more than BUSY_CORES of other processes' CPU."""
    from perflab.report.findings import BUSY_CORES

    found = [((c.get("resources") or {}).get("other_cpu_cores") or 0.0, c) for c in cells if c.get("status") == "ok"]
    return sorted(((cores, c) for cores, c in found if cores > BUSY_CORES), key=lambda x: -x[0])


def load_message(busy: list[tuple[float, dict[str, Any]]], cells: int, where: str) -> str:
    """The failure of a quiet test whose runs were busy, naming the load (None-free: busy is not empty)."""
    from perflab.report.findings import BUSY_CORES

    worst = ", ".join(f"cell {c['id']} {c['key']} {cores:.2f}" for cores, c in busy[:5])
    return (
        f"the machine was busy: {len(busy)} of {cells} cells of {where} ran beside more than {BUSY_CORES} cores "
        f"of other processes (other_cpu_cores; worst: {worst}). A quiet test measures effects: this failure "
        "is the load's, not a wrong verdict of perflab's. Run the quiet modules on an idle machine "
        "(make test runs them one at a time)"
    )


def busy_runs(outputs: list[Path]) -> str | None:
    """The load message of the first of `outputs` (results directories of perflab runs, or directories
    holding them: calibrate's) whose cells ran busy; None when none did."""
    from perflab.store.results import Results

    for out in outputs:
        for db in [out / "results.db"] if (out / "results.db").is_file() else sorted(out.glob("*/results.db")):
            with Results(db.parent) as results:
                cells = results.cells()
            busy = busy_cells(cells)
            if busy:
                return load_message(busy, len(cells), str(db.parent))
    return None


def other_cores(interval: float = 1.0) -> float:
    """Cores the machine spent busy over `interval` seconds beyond this process's own (it sleeps):
    other processes' load, as perflab's other_cpu_cores counts it (/proc/stat's busy ticks)."""
    from perflab.observers.resources import machine_busy_s

    start, own = machine_busy_s(), time.process_time()
    time.sleep(interval)
    return max(0.0, machine_busy_s() - start - (time.process_time() - own)) / interval


def wait_for_quiet(
    measure: Callable[[], float], limit: float, wait_s: float, clock: Callable[[], float] = time.monotonic
) -> float | None:
    """Measure the others' load (`measure`: cores, over its own interval) until it is at most `limit`
    (None: quiet) or `wait_s` seconds have passed (the last load: still busy)."""
    deadline = clock() + wait_s
    while True:
        load = measure()
        if load <= limit:
            return None
        if clock() >= deadline:
            return load


def used(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cells the analysis uses: each one not measured again, and the retry that replaced one that was
    (an unsettled cell, or a failed one whose variant ran well, is measured again in its round: `retry_of`)."""
    replaced = {c.get("retry_of") for c in cells} - {None}
    return [c for c in cells if c["id"] not in replaced]
