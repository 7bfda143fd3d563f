"""Failures a real server produces: rejected options, an allocator that did not load,
pinning, and perflab itself being killed mid-run (no orphan may survive)."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, perflab
from tests.integration.helpers import perflab_children, used, write_experiment

TINY = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "{name}"
duration = "{duration}"
warmup = "1s"
repeats = {repeats}
pin = {pin}

[dataset]
tables = 1
table_size = 1000

[workload]
threads = [2]
options = {{ rand_type = "uniform" }}
"""


def tiny(tmp: Path, name: str, variants: str = "", duration: str = "2s", repeats: int = 1, pin: str = "false") -> Path:
    body = TINY.format(name=name, duration=duration, repeats=repeats, pin=pin) + variants
    return write_experiment(tmp / f"{name}.toml", body)


def export(out: Path) -> dict:
    done = perflab("export", str(out))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_rejected_server_option_fails_that_cell_only(tmp_path: Path):
    """A value the server refuses at start (a name it refuses is refused before the run starts:
    test_check_names.py)."""
    spec = tiny(
        tmp_path,
        "badopt",
        """
[variants.config]
good = {}
bad  = { server_options = { sort_buffer_size = "1Q" } }
""",
    )
    started = time.monotonic()
    done = perflab("run", str(spec), "-o", str(tmp_path / "out"))
    assert time.monotonic() - started < 120  # a rejected option is not a hang
    assert done.returncode == 1, done.stdout + done.stderr
    cells = {c["variant"]["config"]: c for c in export(tmp_path / "out")["cells"]}
    assert cells["good"]["status"] == "ok"
    bad = cells["bad"]
    assert bad["status"] == "failed"
    # the server's own error line, not a generic message
    assert "Unknown suffix 'Q' used for variable 'sort_buffer_size'" in bad["error"]
    assert "[ERROR]" in bad["log_tail"]
    assert "failed" in done.stdout + done.stderr
    assert perflab_children(export(tmp_path / "out")["run"]["workdir"]) == []


def test_allocator_that_did_not_load_fails_the_cell(tmp_path: Path):
    # passes perflab's ELF check (a shared object of this machine), but has no program
    # headers: ld.so prints "cannot be preloaded ... ignored" and starts the server with glibc
    data = bytearray(Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2").read_bytes())
    struct.pack_into("<H", data, 0x38, 0)  # e_phnum = 0
    fake = tmp_path / "libfake-malloc.so"
    fake.write_bytes(bytes(data))
    spec = tiny(
        tmp_path,
        "fakealloc",
        f"""
[variants.allocator]
fake = {{ preload = "{fake}" }}
""",
    )
    done = perflab("run", str(spec), "-o", str(tmp_path / "out"))
    assert done.returncode == 1
    (cell,) = used(export(tmp_path / "out")["cells"])
    assert cell["status"] == "failed"
    assert "is not mapped into mariadbd" in cell["error"] and "libfake-malloc.so" in cell["error"]


def test_pinning_is_applied_and_recorded(tmp_path: Path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("pinning needs 2 CPUs; this machine has 1")  # the spec check refuses it too
    spec = tiny(tmp_path, "pinned", pin="true")
    done = perflab("run", str(spec), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    (cell,) = used(export(tmp_path / "out")["cells"])
    cpus = sorted(os.sched_getaffinity(0))
    assert cell["pinning"]["server_cpus"] == cpus[:1]
    assert cell["pinning"]["client_cpus"] == cpus[1:]
    assert cell["pinning"]["server_cpus_allowed"] == str(cpus[0])  # read back from /proc


def test_pin_with_one_cpu_is_refused_with_exit_3(tmp_path: Path):
    """pin = true needs a CPU for the server and one for the client: on a machine (here, an
    affinity) of one CPU the run is refused before anything starts, exit 3 (the file may be
    fine, the machine is not), naming the field and the remedy."""
    spec = tiny(tmp_path, "pin-one-cpu", pin="true")
    one = str(min(os.sched_getaffinity(0)))
    done = subprocess.run(["taskset", "-c", one, sys.executable, "-m", "perflab", "run", str(spec),
                           "-o", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert "experiment.pin" in said and "at least 2 CPUs" in said and "set pin = false" in said, said
    assert not (tmp_path / "out" / "results.db").exists()
    unpinned = tiny(tmp_path, "pin-off", pin="false")  # the same machine without pin: accepted
    check = subprocess.run(["taskset", "-c", one, sys.executable, "-m", "perflab", "run", str(unpinned), "--check"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def _workdir(out: Path) -> str | None:
    if not (out / "results.db").exists():
        return None
    done = perflab("export", str(out))
    return json.loads(done.stdout)["run"]["workdir"] if done.returncode == 0 else None


def _start_and_wait_for_workload(
    tmp_path: Path, name: str, duration: str = "60s", repeats: int = 3, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, Path, str]:
    spec = tiny(tmp_path, name, duration=duration, repeats=repeats)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        workdir = _workdir(out)
        if workdir and any(" run" in cmd and "sysbench" in cmd for _, cmd in perflab_children(workdir)):
            return proc, out, workdir
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.kill()
    pytest.fail("perflab never started sysbench")


def _assert_no_children_within(workdir: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while perflab_children(workdir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert perflab_children(workdir) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_interrupt_stops_everything_and_keeps_results(tmp_path: Path, sig: signal.Signals):
    """Ctrl-C, `kill` and a closed terminal: exit 130, every process stopped, the work
    directory removed, the run marked interrupted."""
    proc, out, workdir = _start_and_wait_for_workload(tmp_path, "interrupted")
    children = perflab_children(workdir)
    assert len(children) == 2  # the server and the client, running
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    _assert_no_children_within(workdir, 5)
    for pid, _ in children:
        assert not Path(f"/proc/{pid}").exists() or processes_state(pid) == "Z"
    assert not Path(workdir).exists()
    assert export(out)["run"]["status"] == "interrupted"


def test_sigkill_of_perflab_leaves_no_orphans_and_the_next_run_cleans_up(tmp_path: Path, tmpfs):
    # a tmpfs of its own: no other perflab run on this machine removes the dead run's directory first
    shm = tmpfs("shm", "1500M")
    env = {**os.environ, "PERFLAB_TMPFS": str(shm)}
    proc, _, workdir = _start_and_wait_for_workload(tmp_path, "killed", env=env)
    assert Path(workdir).parent == shm
    children = perflab_children(workdir)
    assert len(children) == 2  # the server and the client
    logged = set((Path(workdir) / "pids").read_text().split())
    assert {str(pid) for pid, _ in children} <= logged  # recorded for a later perflab to find
    proc.kill()  # SIGKILL: no finally runs; the kernel's pdeathsig must take the children down
    proc.communicate(timeout=30)
    _assert_no_children_within(workdir, 10)
    assert Path(workdir).exists()  # its files outlive it...
    # ...until the next run, which removes work directories whose owner is dead
    second = tiny(tmp_path, "next", duration="1s")
    done = subprocess.run(
        [sys.executable, "-m", "perflab", "run", str(second), "-o", str(tmp_path / "next")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not Path(workdir).exists()
    assert [p for p in shm.iterdir() if p.name.startswith("perflab-")] == []  # its own removed too


def processes_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.parametrize(("sig", "name"), [(signal.SIGKILL, "SIGKILL"), (signal.SIGSEGV, "SIGSEGV")])
def test_server_crash_fails_the_cell_and_the_matrix_goes_on(tmp_path: Path, sig: int, name: str):
    proc, out, workdir = _start_and_wait_for_workload(tmp_path, "crash", duration="6s", repeats=2)
    (server,) = [pid for pid, cmd in perflab_children(workdir) if "mariadbd" in cmd.split()[0]]
    os.kill(server, sig)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stdout + stderr
    cells = export(out)["cells"]  # the next cell, or its retry where it did not settle (ci46: beside load)
    first, (second,) = cells[0], [c for c in used(cells) if c["id"] != cells[0]["id"]]
    assert first["status"] == "failed"
    assert first["error"].startswith(f"server died: signal {int(sig)} ({name})"), first["error"]
    if sig == signal.SIGSEGV:  # mariadbd's own crash report, from its error log
        assert first["backtrace"] and "got signal 11" in first["backtrace"]
    # the next cell starts on a fresh copy of the dataset and succeeds
    assert second["status"] == "ok" and second["summary"]["qps"] > 0
    _assert_no_children_within(workdir, 5)


def test_stopped_client_times_out_and_the_matrix_goes_on(tmp_path: Path):
    spec = tiny(tmp_path, "hang", duration="3s", repeats=2)
    spec.write_text(spec.read_text().replace("[dataset]", 'timeout_margin = "5s"\n\n[dataset]'))
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    client = None
    while client is None and time.monotonic() < deadline:
        workdir = _workdir(out)
        found = [pid for pid, cmd in perflab_children(workdir) if " run" in cmd] if workdir else []
        client = found[0] if found else None
        time.sleep(0.1)
    assert client, "sysbench never started"
    os.kill(client, signal.SIGSTOP)  # a hang: the process exists but makes no progress
    started = time.monotonic()
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 1, stdout + stderr
    first, second = export(out)["cells"]
    assert first["status"] == "failed" and first["error"].startswith("timed out"), first["error"]
    assert second["status"] == "ok"
    assert time.monotonic() - started < 60  # warm-up + duration + 5 s margin, then the next cell
    _assert_no_children_within(workdir, 5)


def test_client_crash_fails_the_cell_with_its_signal(tmp_path: Path):
    proc, out, workdir = _start_and_wait_for_workload(tmp_path, "client-crash", duration="6s", repeats=2)
    (client,) = [pid for pid, cmd in perflab_children(workdir) if " run" in cmd and "sysbench" in cmd]
    os.kill(client, signal.SIGSEGV)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stdout + stderr
    first, second = export(out)["cells"]
    assert first["status"] == "failed"
    assert first["error"].startswith("sysbench died: signal 11 (SIGSEGV)"), first["error"]
    assert second["status"] == "ok"
    _assert_no_children_within(workdir, 5)


def test_preload_that_stops_the_server_at_start_says_why(tmp_path: Path):
    # a real shared object whose dependency is gone: ld.so refuses to start the server at all
    (tmp_path / "gone.c").write_text("int gone(void) { return 1; }\n")
    (tmp_path / "fake.c").write_text("int gone(void);\nint fake(void) { return gone(); }\n")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libgone.so"), str(tmp_path / "gone.c")], check=True
    )
    lib = tmp_path / "libneedsgone.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "fake.c"), f"-L{tmp_path}", "-lgone"], check=True
    )
    (tmp_path / "libgone.so").unlink()
    spec = tiny(tmp_path, "needsgone", f'[variants.allocator]\nx = {{ preload = "{lib}" }}\n')
    done = perflab("run", str(spec), "-o", str(tmp_path / "out"))
    assert done.returncode == 1
    (cell,) = used(export(tmp_path / "out")["cells"])
    # ld.so's own words, from the server's console, not "(no error log written)"
    assert cell["error"].startswith("mariadbd exited with code 127 during start-up")
    assert "libgone.so: cannot open shared object file" in cell["error"]
    assert (tmp_path / "out" / "logs" / "cell-0000" / "stdout.log").exists()


def _age_s(pid: int) -> float:
    """Seconds since process `pid` started (from /proc: its start time and the uptime)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        started = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime", encoding="ascii") as f:
        return float(f.read().split()[0]) - started


def test_a_frozen_server_is_reported_as_a_stall(tmp_path: Path):
    """The server stops answering for 3 s in the middle of the window (SIGSTOP, then SIGCONT):
    the cell is ok and reports a stall covering those seconds, in its export and its report."""
    stop_at, frozen = 3.5, 3.0  # seconds since sysbench started; the window starts at 1 s
    proc, out, workdir = _start_and_wait_for_workload(tmp_path, "stall", duration="8s", repeats=1)
    (server,) = [pid for pid, cmd in perflab_children(workdir) if "mariadbd" in cmd.split()[0]]
    (client,) = [pid for pid, cmd in perflab_children(workdir) if " run" in cmd and "sysbench" in cmd]
    time.sleep(max(0.0, stop_at - _age_s(client)))
    stopped = _age_s(client)
    os.kill(server, signal.SIGSTOP)
    try:
        time.sleep(frozen)
    finally:
        os.kill(server, signal.SIGCONT)
    resumed = _age_s(client)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stdout + stderr
    assert 2.5 < stopped < 5 and resumed - stopped >= frozen  # the freeze fell inside the window
    (cell,) = used(export(out)["cells"])
    assert cell["status"] == "ok"
    # sysbench's second t covers (t-1, t]: the fully frozen seconds had no transaction at all
    dead = [iv["t"] for iv in cell["intervals"] if iv["tps"] == 0]
    assert dead and all(stopped < t <= resumed + 1 for t in dead), (stopped, resumed, cell["intervals"])
    # exactly one stall over the freeze (a busy machine may add short dips elsewhere)
    (stall,) = [s for s in cell["stalls"] if s["start_s"] < resumed and s["end_s"] > stopped]
    assert stall["kind"] == "low" and stall["min_qps"] == 0
    assert stall["start_s"] <= stopped + 1 and stall["end_s"] >= resumed - 1  # it covers the freeze...
    assert stall["start_s"] >= stopped - 1 and stall["end_s"] <= resumed + 1  # ...and not much more
    report = perflab("report", str(out))
    assert report.returncode == 0, report.stderr
    assert f"stall: cell 0 {cell['key']} {stall['start_s']:.0f}-{stall['end_s']:.0f} s" in report.stdout
