"""[observe] host_speed and io of a server on another host, without a host (observers/beside.py,
docs/hosts.md): the server's CPUs there, the canary's copy tried once per run (a host whose C library
cannot run it fails the cell with the loader's words), its samples on the host's wall clock cut by the
window put on that clock, perf's fsync recording there and its calls put on this machine's clock, and
what the spec still refuses."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Self

import pytest

from perflab import spec
from perflab.hosts.clock import Alignment
from perflab.observers import beside
from perflab.observers.phases import Spans
from perflab.observers import host_speed
from perflab.observers.host_speed import SOURCE, HostSpeedError, parse, window_fields
from perflab.hosts.place import HostPlace
from perflab.observers.io import FsyncRecorder
from perflab.observers.perf import wall_minus_monotonic
from perflab.hosts.place import cpu_list
from perflab.observers.host_speed import HostSpeed
from perflab.places import Site
from perflab.spec.aa import aa_experiment

ALIGNED = Alignment("db", shift_s=-100.0, error_s=0.001, wall_minus_monotonic=1_000_000.0)  # the host 100 s ahead


class Link:
    """A Connection: `run` answered from (argv fragment -> (status, stdout, stderr)), `put`/`get` recorded."""

    name = "db"

    def __init__(self, answers: dict[str, tuple[int, str, str]], files: dict[str, str] | None = None) -> None:
        self.answers, self.files, self.ran, self.put_files = answers, files or {}, [], []

    def run(self, argv: list[str], timeout: float = 60, stdin: str | None = None) -> SimpleNamespace:
        self.ran.append(argv)
        text = " ".join(argv)
        status, out, err = next((v for k, v in self.answers.items() if k in text), (0, "", ""))
        return SimpleNamespace(status=status, stdout=out, stderr=err)

    def put(self, local: Path, remote: str) -> None:
        self.put_files.append(remote)

    def get(self, remote: str, local: Path) -> None:
        local.write_text(self.files[remote], encoding="ascii")


def rundir(link: Link, path: str = "/dev/shm/perflab-host-abc") -> SimpleNamespace:
    return SimpleNamespace(link=link, path=path)


def fsyncs(link: Link, cell: str) -> FsyncRecorder:
    """The fsync recorder of a server (pid 4711) on host db, its clock aligned (ALIGNED)."""
    return FsyncRecorder(4711, cell, place=HostPlace("db", rundir(link)), clock=SimpleNamespace(require=lambda: ALIGNED))


def host_time(monotonic: float) -> float:
    """This machine's time.monotonic() as the host's wall clock (ALIGNED's inverse)."""
    return monotonic - ALIGNED.monotonic(0.0)


def canary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, link: Link, there: str, cpus: list[int]) -> HostSpeed:
    """The canary of a server on host db (its cell's directory `there`), its clock aligned (ALIGNED)."""
    monkeypatch.setattr("perflab.observers.host_speed.build", lambda cache, static=False: tmp_path / "perflab-canary-0123")
    site = Site(HostPlace("db", rundir(link, there.rsplit("/", 1)[0])), Path(there), SimpleNamespace(require=lambda: ALIGNED))  # type: ignore[arg-type]
    return HostSpeed(tmp_path, tmp_path / "host-speed.txt", cpus=cpus, site=site)


def test_the_cpus_of_a_kernel_cpu_list() -> None:
    assert cpu_list("0-3,6\n") == [0, 1, 2, 3, 6] and cpu_list("1") == [1] and cpu_list("") == []
    link = Link({"/proc/4711/status": (0, "Name:\tmariadbd\nCpus_allowed_list:\t0-1\n", "")})
    assert HostPlace("db", rundir(link)).cpus(4711) == [0, 1]  # type: ignore[arg-type]


def test_the_window_is_put_on_the_hosts_wall_clock() -> None:
    assert host_time(50.0) == pytest.approx(1_000_150.0)
    assert ALIGNED.monotonic(host_time(50.0)) == pytest.approx(50.0)


def test_the_canary_is_copied_and_tried_once_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    link = Link({"perflab-canary-0123": (2, "", "usage: perflab-canary [-r] PERIOD_MS (1-60000) [CPU ...]\n")})
    monkeypatch.setattr("perflab.hosts.place.Tracked", lambda rd, argv: SimpleNamespace())
    for _ in range(2):
        canary(tmp_path, monkeypatch, link, "/dev/shm/perflab-host-ok/cell-0000", [0]).__enter__()
    assert link.put_files == ["/dev/shm/perflab-host-ok/perflab-canary-0123"]  # once
    assert sum(a == ["/dev/shm/perflab-host-ok/perflab-canary-0123"] for a in link.ran) == 1  # tried once


def test_a_host_whose_c_library_cannot_run_the_canary_fails_the_cell_with_the_loaders_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader = "/dev/shm/x/perflab-canary-0123: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found\n"
    link = Link({"getconf": (0, "glibc 2.31\n", ""), "perflab-canary-0123": (1, "", loader)})
    with pytest.raises(HostSpeedError) as exc:
        canary(tmp_path, monkeypatch, link, "/dev/shm/perflab-host-old/cell-0000", [0]).__enter__()
    assert "does not run on host db (exit 1)" in exc.value.message and "GLIBC_2.38' not found" in exc.value.message
    assert "glibc 2.31" in exc.value.hint and "host_speed = false" in exc.value.hint


def test_the_hosts_canary_figure_is_cut_by_the_window_on_the_hosts_clock(tmp_path: Path, monkeypatch) -> None:
    start, end = 10.0, 12.0  # this machine's CLOCK_MONOTONIC
    stamps = [host_time(start - 1 + i * 0.2) for i in range(25)]  # a second before to a second after
    text = "".join(f"{t:.6f} {900000 + (i % 2) * 100000} {i % 2} 1000000\n" for i, t in enumerate(stamps))
    link = Link({"perflab-canary": (2, "", "usage: perflab-canary")}, {"/h/cell-0000/host-speed.txt": text})
    speed = canary(tmp_path, monkeypatch, link, "/h/cell-0000", [0, 1])
    speed._stopped = True  # stopped while it ran (HostSpeed.__exit__)
    got = speed.fields(start, end)
    assert got["samples"] == 11 and got["per_cpu"] == {"0": 900000.0, "1": 1000000.0}, got  # 10.0 to 12.0 s
    inside = [(ALIGNED.monotonic(t), w, c, ch) for t, w, c, ch in parse(text)]
    assert got["work_ns"] == window_fields(inside, start, end)["work_ns"]  # as a local canary's on this clock


def test_the_canary_runs_there_stamped_on_the_hosts_wall_clock(tmp_path: Path, monkeypatch) -> None:
    started: list[list[str]] = []
    monkeypatch.setattr("perflab.hosts.place.Tracked", lambda rd, argv: started.append(argv) or SimpleNamespace())
    link = Link({"perflab-canary": (2, "", "usage: perflab-canary")})
    canary(tmp_path, monkeypatch, link, "/h2/cell-0001", [0, 3]).__enter__()
    (argv,) = started
    assert argv[:2] == ["sh", "-c"] and argv[3] == "/h2/cell-0001/host-speed.txt"
    assert argv[4:] == ["/h2/perflab-canary-0123", "-r", "200", "0", "3"]


def test_the_fsyncs_are_recorded_on_the_hosts_clock_for_the_servers_tree() -> None:
    tasks = "#  pid    tid   ppid  comm\n  4711   4711      1 |postgres\n  4720   4720   4711  |postgres\n"
    script = "  500.250000: syscalls:sys_enter_fdatasync: \n  501.500000: syscalls:sys_enter_fsync: \n"
    header = (
        "# clockid: monotonic (1)\n# reference time: 2026-11-28 11:58:18.436076 = 1000400.5 (TOD) = 800.5 (monotonic)\n"
    )
    link = Link({"--tasks": (0, tasks, ""), "perf script": (0, script, ""), "--header-only": (0, header, ""),
                 "cat": (0, "", "")})  # fmt: skip
    recorder = fsyncs(link, "/h/cell-0000")
    argv = recorder.argv(Path("/h/cell-0000/fsyncs/perf-4711.ctl"), Path("/h/cell-0000/fsyncs/perf-4711.ack"))
    assert argv[:3] == ["perf", "record", "-a"] and "syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync" in argv
    assert argv[argv.index("-k") + 1] == "CLOCK_MONOTONIC" and argv[argv.index("-o") + 1].startswith("/h/cell-0000/")
    times = recorder.times()  # the host's monotonic + 999600 s: its wall clock; less 1000100 s: this machine's
    assert times == {"fsync": [pytest.approx(1.5)], "fdatasync": [pytest.approx(0.25)]}
    (script_argv,) = [a for a in link.ran if "script" in a]
    assert script_argv[script_argv.index("--pid") + 1] == "4711,4720"  # the postmaster's backends too


def test_fsyncs_without_perfs_reference_time_cannot_be_timed() -> None:
    assert wall_minus_monotonic("# clockid: monotonic (1)\n") is None
    link = Link({"--tasks": (0, "", ""), "--header-only": (0, "# reference time disabled\n", ""), "cat": (0, "", "")})
    recorder = fsyncs(link, "/h/c")
    with pytest.raises(Exception, match="holds no reference time"):
        recorder.times()


def test_perf_failing_on_the_host_says_so() -> None:
    link = Link({"--tasks": (0, "", ""), "perf script": (1, "", "failed to open perf.data\n")})
    recorder = fsyncs(link, "/h/c")
    with pytest.raises(Exception, match="perf script on host db failed .*failed to open perf.data"):
        recorder.times()


PGBENCH = """
[experiment]
name = "pg"
server = "postgresql"
server_host = "db"
[hosts.db]
ssh = "root@10.77.1.2"
[dataset]
scale = 1
[workload]
tool = "pgbench"
test = "select-only"
threads = [2]
"""


def test_pgbench_on_a_server_host_takes_io_and_the_canary_and_calibrates_with_it() -> None:
    """pgbench's window (cut at perflab's marks: run/window.py) runs them on the host."""
    observe = spec.parse(PGBENCH + "[observe]\nio = true\nhost_speed = true\n").file.observe
    assert observe.io and observe.host_speed
    calibration = aa_experiment(spec.parse(PGBENCH), rounds=3).file.observe.host_speed
    assert calibration is (shutil.which("cc") is not None)  # kept, as with sysbench (when it can be built)


class Recorded:
    """An observer or a clock that records what was called on it."""

    def __init__(self, calls: list[str], name: str) -> None:
        self.calls, self.name = calls, name

    def __enter__(self) -> Self:
        self.calls.append(f"{self.name} in")
        return self

    def __exit__(self, *exc: object) -> None:
        self.calls.append(f"{self.name} out")

    def begin(self) -> None:
        self.calls.append("clock begin")

    def finish(self) -> None:
        self.calls.append("clock finish")

    def fields(self, *args: float) -> dict:
        self.calls.append(f"{self.name} fields {args}")
        return {"per_txn": {}}


def test_a_cell_without_a_clock_of_its_own_reads_the_hosts_around_the_observers() -> None:
    calls: list[str] = []
    clock, io = Recorded(calls, "clock"), Recorded(calls, "io")
    with beside.ServerObservers(None, io, clock, own=True):  # type: ignore[arg-type]
        calls.append("window")
    assert calls == ["clock begin", "io in", "window", "io out", "clock finish"]
    spans = Spans.of_cell(9.0, 10.0, 13.0, 1.0, [], [], 250)
    got = beside.ServerObservers(None, io, clock, own=False).fields(spans)
    assert got == {"io": {"per_txn": {}}} and calls[-1] == "io fields (10.0, 11.0, 13.0, 250)"  # workload, window, end
    calls.clear()
    with beside.ServerObservers(None, None, clock, own=True):  # type: ignore[arg-type]
        pass
    assert calls == []  # nothing asked: no clock read


def test_a_server_here_has_its_observers_here_and_reads_no_hosts_clock() -> None:
    """With the client on a client host and the server here, the server's end gives the local observers."""
    calls: list[str] = []
    io = Recorded(calls, "io")
    observe = SimpleNamespace(host_speed=False, io=True)
    observers = beside.here(observe, io, SimpleNamespace(rundir=Path("/nonexistent/cell-0000")))  # type: ignore[arg-type]
    assert observers.canary is None and observers.io is io and observers.clock is None and not observers.own
    with observers:
        calls.append("window")
    assert calls == ["io in", "window", "io out"]


class LocalLink(Link):
    """A Connection whose `run` runs here: the loader's real words for a binary it cannot load."""

    def run(self, argv: list[str], timeout: float = 60, stdin: str | None = None) -> SimpleNamespace:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        return SimpleNamespace(status=done.returncode, stdout=done.stdout, stderr=done.stderr)

    def put(self, local: Path, remote: str) -> None:
        shutil.copy(local, remote)


def test_a_canary_the_hosts_loader_refuses_fails_with_its_words(tmp_path: Path) -> None:
    """A canary linked against a library the "host" lacks: ld.so refuses it as it refuses a newer glibc."""
    lib, there = tmp_path / "lib", tmp_path / "host"
    lib.mkdir()
    there.mkdir()
    (lib / "gone.c").write_text("int perflab_gone(void) { return 0; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib / "libperflabgone.so"), str(lib / "gone.c")], check=True)
    binary = tmp_path / "perflab-canary-gone"
    flags = ["-O2", "-pthread", "-Wl,--no-as-needed", f"-L{lib}", "-lperflabgone"]
    subprocess.run(["cc", *flags, "-o", str(binary), str(SOURCE)], check=True)
    place = HostPlace("db", rundir(LocalLink({}), str(there)))  # type: ignore[arg-type]
    with pytest.raises(HostSpeedError) as exc:
        host_speed._runs(place, place.install(binary))
    assert "does not run on host db (exit 127)" in exc.value.message, exc.value.message
    assert "libperflabgone.so: cannot open shared object file" in exc.value.message
    assert (there / binary.name).is_file()  # copied into the run directory first


def test_the_canary_for_a_host_is_static_so_any_c_library_runs_it(tmp_path: Path) -> None:
    """No loader (PT_INTERP) and no needed libraries: a host whose C library is older than this machine's
    runs it (docs/hosts.md); the local canary stays dynamic, as before."""
    import subprocess

    from perflab import elf
    from perflab.observers import host_speed

    static = host_speed.build(tmp_path, static=True)
    headers = subprocess.run(["readelf", "-lW", str(static)], capture_output=True, text=True, check=True).stdout
    assert "INTERP" not in headers and elf.needed(static) == set()
    done = subprocess.run([str(static)], capture_output=True, text=True, env={}, check=False)
    assert done.returncode == 2 and "usage:" in done.stderr + done.stdout  # it runs, with an empty environment
    dynamic = host_speed.build(tmp_path)
    assert "libc.so.6" in elf.needed(dynamic) and dynamic != static


def test_a_server_here_with_perf_and_the_canary_runs_one_canary(tmp_path: Path) -> None:
    """The canary of a server here with its client on a host is beside.here's: the server's
    profilers (run/ends.ServerHere.observers) leave it out, so that only one runs."""
    import os

    from perflab.run.ends import ServerHere

    observe = spec.parse(PGBENCH.replace('server_host = "db"\n', "") + "[observe]\nperf = true\nhost_speed = true\n")
    runner = SimpleNamespace(exp=observe, kind=SimpleNamespace(profiles_tree=True), io_observer=lambda server: None)
    server = SimpleNamespace(pid=os.getpid(), rundir=tmp_path)
    client_end = SimpleNamespace(here=False, profilers=lambda runner, cell, server: None)
    paired, observers = ServerHere(runner, SimpleNamespace(order=0), server, None).observers(None, client_end, None)
    assert paired.server.observe.perf is not None and not paired.server.observe.host_speed and paired.client is None
    assert observers.canary is not None  # the one canary, beside them
    assert observe.file.observe.host_speed  # the file's own setting is left as it was


DISKSTATS = (
    " 254       0 vda 100 0 800 10 200 0 1600 20 0 30 30 0 0 0 0 7 1\n"
    " 254       1 vda1 90 0 700 10 190 0 1500 20 0 30 30 0 0 0 0 0 0\n"
)


@pytest.mark.parametrize("block_device", ["vda", None])
def test_a_server_hosts_disk_is_sampled_from_the_hosts_diskstats(block_device: str | None) -> None:
    """With `storage` on a disk there, io's disk.* are that device's line of the host's /proc/diskstats
    (read over the link); on the host's tmpfs (no block device) there are none."""
    link = Link({"/proc/diskstats": (0, DISKSTATS, "")})
    storage = SimpleNamespace(dev="254:0", block_device=block_device)
    place = SimpleNamespace(link=link, rundir=rundir(link), storage=storage, place=HostPlace("db", rundir(link)))
    observe = SimpleNamespace(host_speed=False, io=True)
    kind = SimpleNamespace(io_counters=lambda server: {"innodb.log_bytes_written": 5.0})
    server = SimpleNamespace(pid=42, rundir=Path("/nonexistent/cell-0000"))
    io = beside.on_host(observe, place, kind, server, None).io  # type: ignore[arg-type]
    assert io is not None
    io.sampler.sample()
    (_, values) = io.sampler.samples[0]
    if block_device:  # sectors of 512 bytes; the flushes are the 19th field
        disk = {"disk.reads": 100.0, "disk.read_bytes": 409600.0, "disk.writes": 200.0, "disk.write_bytes": 819200.0}
        assert values == {**disk, "disk.flushes": 7.0, "innodb.log_bytes_written": 5.0}
        assert ["cat", "/proc/diskstats"] in link.ran
    else:
        assert values == {"innodb.log_bytes_written": 5.0} and ["cat", "/proc/diskstats"] not in link.ran


def test_a_host_whose_diskstats_cannot_be_read_says_so() -> None:
    link = Link({"/proc/diskstats": (1, "", "cat: /proc/diskstats: Permission denied")})
    with pytest.raises(beside.PerflabError, match="cannot read /proc/diskstats on host db: cat: .*denied"):
        beside.diskstats(HostPlace("db", rundir(link)))  # type: ignore[arg-type]
