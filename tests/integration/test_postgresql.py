"""server = "postgresql": a real postgres started by perflab on tmpfs, real pgbench and sysbench's
pgsql driver, tiny datasets and short windows."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, perflab
from tests.freezes import Freezes
from tests.integration.helpers import counted_share, processes, runs_tmpfs, used, write_experiment

PGBENCH = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "{name}"
server = "postgresql"
duration = "{duration}"
warmup = "1s"
repeats = {repeats}

[dataset]
scale = 1

[workload]
tool = "pgbench"
test = "select-only"
threads = [2]

[server_options]
work_mem = "8MB"

[variants.allocator]
glibc = {{}}
{more}
"""


def experiment(tmp: Path, name: str, duration: str = "3s", repeats: int = 1, more: str = "", **paced: Any) -> Path:
    body = PGBENCH.format(name=name, duration=duration, repeats=repeats, more=more)
    return write_experiment(tmp / f"{name}.toml", body, **paced)


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "perflab", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def export(out: Path) -> dict:
    done = perflab("export", str(out), "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def postmasters(where: str) -> list[int]:
    """The postmasters of cells (not the dataset's) under `where`. A backend just forked still
    carries the postmaster's command line until it retitles itself: only processes whose parent
    is not one of them count."""
    found = [pid for pid, cmd in processes("postgres") if where in cmd and "/cell-" in cmd]
    return [pid for pid in found if parent(pid) not in found]


def parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def backends(postmaster: int) -> list[int]:
    """The postmaster's children serving pgbench's database (auxiliary processes come and go)."""
    try:
        text = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text()
    except OSError:
        return []
    out = []
    for pid in map(int, text.split()):
        try:
            if b" bench " in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" "):
                out.append(pid)
        except OSError:
            continue
    return out


def segments() -> set[int]:
    """System V shared memory segments of the postgres user (ipcs -m: key shmid owner ...)."""
    text = subprocess.run(["ipcs", "-m"], capture_output=True, text=True, check=True).stdout
    return {int(f[1]) for f in (line.split() for line in text.splitlines()) if len(f) >= 6 and f[2] == "postgres"}


def creators() -> dict[int, int]:
    """Each System V segment's creator pid (ipcs -m -p: shmid owner cpid lpid)."""
    text = subprocess.run(["ipcs", "-m", "-p"], capture_output=True, text=True, check=True).stdout
    return {int(f[0]): int(f[2]) for f in (line.split() for line in text.splitlines()) if len(f) >= 4 and f[0].isdigit()}


class Postmasters:
    """Every postmaster under `where` (the dataset's and the cells'), looked for every 0.2 s while it
    runs: whose segments are this test's, whatever became of them. A segment whose creator is dead is
    not this test's by that alone: make test runs modules in parallel, and another's SIGKILLed run
    leaves one until its own cleanup (ci9: a dead creator's segment counted here)."""

    def __init__(self, where: str) -> None:
        self.where, self.seen, self._stop = where, set(), False
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop:
            found = [pid for pid, cmd in processes("postgres") if self.where in cmd]
            self.seen.update(pid for pid in found if parent(pid) not in found)
            time.sleep(0.2)

    def stop(self) -> set[int]:
        self._stop = True
        self._thread.join()
        return self.seen


def fresh_dsm_files() -> set[str]:
    """/dev/shm/PostgreSQL.* files of the last 10 minutes (PostgreSQL's POSIX dynamic shared memory)."""
    found = set()
    for path in Path("/dev/shm").glob("PostgreSQL.*"):
        with contextlib.suppress(FileNotFoundError):  # removed since the glob
            if path.stat().st_mtime > time.time() - 600:
                found.add(str(path))
    return found


def mapped_files() -> set[str]:
    """Every file some live process maps (/proc/PID/maps)."""
    mapped = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        with contextlib.suppress(OSError):
            mapped.update(
                line.split(None, 5)[5].strip() for line in maps.read_text().splitlines() if "/dev/shm/" in line
            )
    return mapped


def shmid_of(postmaster: int) -> int:
    datadir = Path(f"/proc/{postmaster}/cmdline").read_bytes().split(b"\0")[2].decode()  # postgres -D DATADIR
    return int((Path(datadir) / "postmaster.pid").read_text().splitlines()[6].split()[1])


@pytest.fixture(scope="module")
def freezes() -> Iterator[Freezes]:
    """The pauses of this VM while the module's run goes on (tests/freezes.py)."""
    with Freezes() as watched:
        yield watched


@pytest.fixture(scope="module")
def pg_run(tmp_path_factory: pytest.TempPathFactory, freezes: Freezes) -> tuple[Path, dict, set[int]]:
    tmp = tmp_path_factory.mktemp("pg")
    out = tmp / "results"
    before, watch = segments(), Postmasters(runs_tmpfs())
    # a closed loop: its figures below are of busy backends (CPU, transactions)
    spec = experiment(tmp, "pg-it", more='jemalloc = { preload = "jemalloc" }', pace=None)
    # two client counts, so the backends counted can be tied to them; autovacuum off, so no worker
    # comes and goes beside the auxiliary processes
    body = spec.read_text().replace("threads = [2]", "threads = [1, 3]")
    write_experiment(spec, body.replace('work_mem = "8MB"', 'work_mem = "8MB"\nautovacuum = "off"'), pace=None)
    done = perflab("run", str(spec), "-o", str(out))
    ours = watch.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    new, made_by = segments() - before, creators()
    return out, export(out), {i for i in new if made_by.get(i) in ours}


def test_pgbench_cells_run_with_the_allocator_in_every_backend(pg_run):
    _, doc, _ = pg_run
    cells = {(c["variant"]["allocator"], c["threads"]): c for c in doc["cells"]}
    assert sorted(cells) == [("glibc", 1), ("glibc", 3), ("jemalloc", 1), ("jemalloc", 3)]
    assert all(c["status"] == "ok" for c in cells.values()), [c["error"] for c in cells.values()]
    assert all(cells["jemalloc", t]["allocator_library"].endswith("libjemalloc.so.2") for t in (1, 3))
    assert all("libc.so" in cells["glibc", t]["allocator_library"] for t in (1, 3))
    for cell in cells.values():
        assert cell["resources"]["preload_verified_backends"] == cell["preload_verified_backends"]
    # one backend per client, beside the same auxiliary processes in every cell (with autovacuum
    # off: checkpointer, background writer, walwriter, logical replication launcher on PG 15):
    # checked before the clients had connected, or without their backends, it would not follow them
    auxiliary = {c["preload_verified_backends"] - c["threads"] for c in cells.values()}
    counted = {k: c["preload_verified_backends"] for k, c in cells.items()}
    assert len(auxiliary) == 1 and 3 <= min(auxiliary) <= 6, counted


def test_memory_is_pss_over_the_tree_and_cpu_counts_every_backend(pg_run):
    _, doc, _ = pg_run
    for cell in doc["cells"]:
        res = cell["resources"]
        # RSS summed over processes counts shared_buffers once per backend; PSS divides it
        assert 0 < res["pss_end_bytes"] < res["rss_end_bytes"]
        assert res["server_cpu_s"] > 0.3  # 3 s of 1 or 3 busy backends, not the idle postmaster alone
        assert res["voluntary_ctx_switches"] > 0 and res["ctx_switches_per_txn"] > 0
        assert res["server_cpu_us_per_txn"] > 0


def test_window_figures_are_the_windows_own(pg_run, freezes: Freezes):
    _, doc, _ = pg_run
    for cell in doc["cells"]:
        summary = cell["summary"]
        # the window is perflab's marks (epoch seconds): a pause of this VM that outlasts the warm-up
        # starts it up to that much late, one while its end is read ends it up to that much late
        lost = freezes.in_cell(cell)
        assert 2.5 - lost < summary["total_time_s"] < 3.5 + lost, (summary, freezes.pauses)
        assert summary["transactions"] > 1000 and summary["qps"] == summary["tps"]  # select-only: 1 statement
        lat = summary["latency_ms"]
        assert lat["min"] <= lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
        marks = [iv["warmup"] for iv in cell["intervals"]]
        # counted from the log in seconds from the launch: 1 s of warm-up, then every second of the
        # window, the last one too (pgbench ends right after the end mark, before -P's last line);
        # an end mark a pause made late adds the seconds it ran on
        assert marks[:4] == [True, False, False, False], (marks, freezes.pauses)
        assert len(marks) <= 4 + math.ceil(lost), (marks, freezes.pauses)
        assert cell["sysbench_options"]["protocol"] == "prepared"  # pgbench's options, as run


def test_generated_configuration_and_no_leftovers(pg_run):
    out, _, new_segments = pg_run
    conf = (out / "logs" / "cell-0000" / "postgresql.conf").read_text()
    for line in ("fsync = 'off'", "synchronous_commit = 'off'", "full_page_writes = 'off'", "listen_addresses = ''",
                 "shared_buffers = '128MB'", "work_mem = '8MB'", "dynamic_shared_memory_type = 'mmap'"):  # fmt: skip
        assert line in conf
    assert new_segments == set()  # each killed postmaster's System V segment was removed

    # POSIX dynamic shared memory left behind (perflab's postgres uses mmap: none of its own). Another
    # test's initdb or postgres, beside this one, has such files while it runs (ci22, 5 workers):
    # a leftover is one that no live process maps, still there 2 s later
    seen = fresh_dsm_files()
    time.sleep(2)
    assert not (seen & fresh_dsm_files()) - mapped_files()
    assert not any(str(out) in cmd for _, cmd in processes("postgres"))


def test_sysbench_pgsql_read_only(tmp_path: Path):
    spec = write_experiment(
        tmp_path / "sb.toml",
        """
        [experiment]
design = "sequential"  # what this test checks runs one server at a time
        name = "pg-sysbench"
        server = "postgresql"
        duration = "2s"
        warmup = "1s"
        repeats = 1
        [dataset]
        tables = 1
        table_size = 1000
        [workload]
        test = "oltp_point_select"
        threads = [2]
        """,
    )
    done = perflab("run", str(spec), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = used(export(tmp_path / "out")["cells"])
    assert cell["status"] == "ok" and cell["summary"]["qps"] > 100
    assert cell["sysbench_options"]["db_driver"] == "pgsql"
    assert cell["resources"]["pss_end_bytes"] > 0 and cell["preload_verified_backends"] >= 2


def test_a_backend_crash_fails_its_cell_and_the_matrix_goes_on(tmp_path: Path, tmpfs):
    shm = tmpfs("shm", "1G")
    shm.parent.chmod(0o755)  # the postgres user must reach its directories
    env = {**os.environ, "PERFLAB_TMPFS": str(shm)}
    spec = experiment(tmp_path, "pg-crash", duration="5s", repeats=2)
    before = segments()
    watch = Postmasters(str(shm))
    proc = subprocess.Popen([sys.executable, "-m", "perflab", "run", str(spec), "-o", str(tmp_path / "out")],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        victim = _kill_a_backend(str(shm))
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
        proc.communicate()
        ours = watch.stop()
    assert proc.returncode == 1, stdout + stderr  # some cells failed
    first, second = export(tmp_path / "out")["cells"]
    assert (
        first["status"] == "failed" and f"server process (PID {victim}) was terminated by signal 11" in first["error"]
    )
    assert "terminating any other active server processes" in first["log_tail"]
    assert second["status"] == "ok"
    assert postmasters(str(shm)) == []
    new, made_by = segments() - before, creators()
    assert ours and {i for i in new if made_by.get(i) in ours} == set()  # the crashed and restarted server's too


def _kill_a_backend(where: str) -> int:
    """SIGSEGV to a pgbench backend of the first cell, a second into its run; its pid."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = [b for pm in postmasters(where) for b in backends(pm)]
        if found:
            time.sleep(1.5)
            try:
                os.kill(found[0], signal.SIGSEGV)
                return found[0]
            except ProcessLookupError:  # gone meanwhile: take the next one
                continue
        time.sleep(0.2)
    raise AssertionError("no pgbench backend seen")


def test_sigkill_of_perflab_takes_postgres_down(tmp_path: Path, tmpfs):
    shm = tmpfs("shm", "1G")
    shm.parent.chmod(0o755)
    env = {**os.environ, "PERFLAB_TMPFS": str(shm)}
    spec = experiment(tmp_path, "pg-kill", duration="20s")
    proc = subprocess.Popen([sys.executable, "-m", "perflab", "run", str(spec), "-o", str(tmp_path / "out")],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not any(backends(pm) for pm in postmasters(str(shm))) and time.monotonic() < deadline:
            time.sleep(0.2)
        server = postmasters(str(shm))
        assert server, "no postgres started"
        segment = shmid_of(server[0])
        assert segment in segments()
        everything = [server[0], *Path(f"/proc/{server[0]}/task/{server[0]}/children").read_text().split()]
    finally:
        proc.kill()  # SIGKILL: no finally of perflab's runs; the kernel's pdeathsig must act
        proc.wait(timeout=30)
    deadline = time.monotonic() + 15
    while any(Path(f"/proc/{p}").exists() for p in everything) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in everything if Path(f"/proc/{p}").exists()]
    assert segment in segments()  # nobody removed it yet: the run died
    cleaned = run("doctor", "--clean", env=env)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert segment not in segments()
    assert not list(shm.glob("perflab-*"))


def test_sigint_stops_postgres_with_exit_130(tmp_path: Path, tmpfs):
    """Ctrl-C during a PostgreSQL cell: exit 130, the postmaster, its backends and pgbench
    stopped, its shared memory segment removed, the run marked interrupted."""
    shm = tmpfs("shm", "1G")
    shm.parent.chmod(0o755)
    env = {**os.environ, "PERFLAB_TMPFS": str(shm)}
    spec = experiment(tmp_path, "pg-sigint", duration="30s")
    before, watch = segments(), Postmasters(str(shm))
    proc = subprocess.Popen([sys.executable, "-m", "perflab", "run", str(spec), "-o", str(tmp_path / "out")], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not any(backends(pm) for pm in postmasters(str(shm))) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        (server,) = postmasters(str(shm))
        everything = [server, *map(int, Path(f"/proc/{server}/task/{server}/children").read_text().split())]
        clients = [pid for pid, cmd in processes("pgbench") if str(shm) in cmd]
        assert clients, "no pgbench seen"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr and "interrupted" in stderr, stderr
    deadline = time.monotonic() + 5  # reaped by init once perflab has gone
    while (left := [p for p in (*everything, *clients) if Path(f"/proc/{p}").exists()]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], left
    new, made_by, ours = segments() - before, creators(), watch.stop()
    assert postmasters(str(shm)) == [] and ours and {i for i in new if made_by.get(i) in ours} == set()
    assert export(tmp_path / "out")["run"]["status"] == "interrupted"


BAD = {
    "mariadb option": (
        'innodb_buffer_pool_size = "1G"',
        2,
        "server_options.innodb_buffer_pool_size",
    ),
    "script": ("", 2, "workload.test"),
}


@pytest.mark.parametrize("case", ["mariadb option", "script"])
def test_bad_input_is_refused_before_anything_starts(tmp_path: Path, case: str):
    extra, code, key = BAD[case]
    body = PGBENCH.format(name="pg-bad", duration="3s", repeats=1, more="")
    if case == "mariadb option":
        body = body.replace('work_mem = "8MB"', extra)
    if case == "script":
        script = tmp_path / "bad.sql"
        script.write_text("\\set aid random(1,\nSELECT 1;\n")
        body = body.replace('test = "select-only"', f'test = "{script}"')
    spec = write_experiment(tmp_path / "bad.toml", body)
    done = perflab("run", str(spec), "-o", str(tmp_path / "out"))
    assert done.returncode == code, done.stdout + done.stderr
    assert key in done.stderr and "hint" in done.stderr
    assert not (tmp_path / "out" / "results.db").exists()


def test_a_scale_that_does_not_fit_the_tmpfs(tmp_path: Path, tmpfs):
    shm = tmpfs("shm", "100M")
    spec = write_experiment(tmp_path / "big.toml", PGBENCH.format(name="big", duration="3s", repeats=1, more="")
                            .replace("scale = 1", "scale = 50"))  # fmt: skip
    done = run("run", str(spec), "-o", str(tmp_path / "out"), env={**os.environ, "PERFLAB_TMPFS": str(shm)})
    assert done.returncode == 3, done.stdout + done.stderr
    assert "dataset.scale" in done.stderr and "smaller dataset (scale)" in done.stderr


def test_alloc_counts_in_every_backend(tmp_path: Path):
    """[observe] alloc: the counter preloaded into the postmaster counts in every process it forks, a
    slot each, summed over the window: from its start readings to its end mark, so the clients'
    disconnections (a backend that exits frees what the postmaster had allocated) are left out.
    Autovacuum is off: a worker forked within the window (every 30 s here, 2026-11-30) mallocs
    what it keeps and frees what the postmaster had, and `threads_started` says so."""
    observe = '[observe]\nalloc = { period = "64K" }\n'
    body = PGBENCH.format(name="pg-alloc", duration="2s", repeats=1, more=observe)
    spec = write_experiment(tmp_path / "pg-alloc.toml", body.replace('work_mem = "8MB"', 'work_mem = "8MB"\nautovacuum = "off"'))
    out = tmp_path / "out"
    done = perflab("run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = used(export(out)["cells"])
    assert cell["status"] == "ok", cell.get("error")
    alloc = cell["alloc"]
    assert counted_share(alloc, cell["summary"]["transactions"]) > 100 and "missing" not in alloc, alloc
    # the postmaster, pgbench's backends and the auxiliary processes: a slot each (not one shared)
    assert alloc["threads"] >= 4 and alloc["shared_slot_threads"] == 0 and alloc["threads_started"] == 0, alloc
    assert alloc["started_calls_share"] == 0.0, alloc
    # select-only's index scan: btbeginscan's two palloc'd chunks, each over the chunk limit, a malloc
    # of its own (8-16 KiB and 16-32 KiB) per transaction, freed at its end (2026-11-28: 2.00 and 2.00)
    scan = {r["low"]: r["calls_per_txn"].get("malloc", 0) for r in alloc["by_size_class"] if r["low"] in (8192, 16384)}
    assert scan.keys() == {8192, 16384} and all(0.95 <= n <= 1.05 for n in scan.values()), alloc["by_size_class"]
    calls = alloc["calls_per_txn"]
    assert abs(calls["free"] - calls["malloc"]) <= 0.05 * calls["malloc"], calls
    assert alloc["syscalls_per_txn"] is not None and alloc["samples"] > 0 and alloc["dropped_samples"] == 0, alloc
    profile = out / "profiles" / f"cell-{cell['id']:04d}.alloc.folded"
    stacks = [line.rsplit(" ", 1) for line in profile.read_text().splitlines()]
    assert any(";btbeginscan;" in stack for stack, _ in stacks), stacks[:5]
    assert json.loads(profile.with_suffix(".json").read_text())["binary"].endswith("/bin/postgres")
