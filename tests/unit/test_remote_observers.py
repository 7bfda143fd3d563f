"""Observers of a server on another host without a host (docs/hosts.md): the window's clock readings
and their alignment (refused past 50 ms), the RSS samples put on this machine's clock, perf's and
eu-stack's commands there, their output folded through the local pipeline with the host's times
aligned, and the server host's observer tools named by the preflight."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from perflab.errors import ClockAlignmentError
from perflab.hosts import preflight
from perflab.hosts.clock import MAX_ERROR_S, ClockReading, WindowClock, align
from perflab.hosts.own_cpu import parse_snapshot, session_of
from perflab.hosts.preflight import observer_packages
from perflab.observers.elf import FunctionStarts
from perflab.observers.host_binaries import HostStarts, unnamed
from perflab.observers.host_overhead import perflab_ticks, window_ticks, wrappers
from perflab.observers.phases import Spans
from perflab.observers.perf import PerfRecorder
from perflab.observers.pmp_loop import LoopSampler
from perflab.hosts.place import HostPlace, aligned_samples
from perflab.spec.observe import ObserveSection


class EchoClock:
    """A host's `bash` clock loop answering `offset` seconds ahead of this machine."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def write(self, text: str) -> None:
        pass

    def readline(self, timeout: float | None = None) -> str:
        return f"{time.time() + self.offset:.6f}\n"

    def close(self) -> None:
        pass


class FakeLink:
    """A Connection answering the clock loop, and `run` from a table of argv prefixes."""

    name = "db"

    def __init__(self, offset: float = 0.0, answers: dict[str, str] | None = None) -> None:
        self.offset, self.answers, self.ran = offset, answers or {}, []

    def start(self, argv: list[str]) -> EchoClock:
        return EchoClock(self.offset)

    def run(self, argv: list[str], timeout: float = 60, stdin: str | None = None) -> SimpleNamespace:
        self.ran.append(argv)
        text = " ".join(argv)
        out = next((v for k, v in self.answers.items() if k in text), "")
        return SimpleNamespace(status=0, stdout=out, stderr="")


def test_the_window_clock_aligns_a_host_ahead_by_seconds() -> None:
    clock = WindowClock(FakeLink(offset=7.25))
    clock.begin()
    aligned = clock.finish()
    assert aligned is not None and aligned.shift_s == pytest.approx(-7.25, abs=0.01)
    assert aligned.error_s < MAX_ERROR_S
    record = clock.record()  # the cell's build.host.clock
    assert record["aligned"] and record["refused"] is None and record["start"]["offset_s"] == pytest.approx(7.25, 0.01)
    now = time.time()
    assert aligned.monotonic(now + 7.25) == pytest.approx(time.monotonic() + (now - time.time()), abs=0.01)


def test_a_slow_link_is_refused_and_a_profile_cannot_be_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    # round trips of 120 ms: the offset is known within 60 ms only
    slow = iter([ClockReading(1.0, 0.12, 0.06, at=0.0), ClockReading(1.0, 0.12, 0.06, at=2.0)])
    monkeypatch.setattr("perflab.hosts.clock.measure", lambda link: next(slow))
    clock = WindowClock(FakeLink())
    clock.begin()
    assert clock.finish() is None and "its clock is known only within" in clock.refused
    assert clock.record()["aligned"] is False and clock.record()["shift_s"] is None
    with pytest.raises(ClockAlignmentError, match="host db"):
        clock.require()


def test_rss_samples_are_put_on_this_machines_clock() -> None:
    start = ClockReading(offset_s=100.0, rtt_s=0.002, error_s=0.001, at=0)
    aligned = align("db", start, ClockReading(100.002, 0.002, 0.001, at=5))
    window = 1000.0  # the sampler's start, this machine's monotonic clock
    host_wall = window + aligned.wall_minus_monotonic + 100.001  # the host's clock at the window's start
    stamped = [(host_wall + 0.5, 2000.0, 10), (host_wall + 1.5, 2000.1, 20)]  # arrived long after (2000 s)
    assert aligned_samples(stamped, window, aligned) == [(0.5, 10), (1.5, 20)]
    assert aligned_samples(stamped, window, None) == [(1000.0, 10), (1000.1, 20)]  # refused: arrival times


class RunDirThere:
    """A run directory on host db (/r): what it starts runs until signalled (perf: SIGINT, exit 130)."""

    path = "/r"

    def __init__(self, link: FakeLink) -> None:
        self.link, self.started, self.signals, self._ended = link, [], [], threading.Event()

    def start(self, argv: list[str], measured: bool = False) -> tuple[SimpleNamespace, int]:
        self.started.append(argv)
        return SimpleNamespace(wait=lambda: self._ended.wait() and SimpleNamespace(status=130, stderr="")), 4800

    def signal(self, pid: int, name: str = "TERM") -> None:
        self.signals.append((pid, name))
        self._ended.set()


def on_host(link: FakeLink, clock: WindowClock | None = None, call_graph: str = "fp") -> PerfRecorder:
    """perf of the server (pid 4711) on host db, in its run directory /r."""
    place = HostPlace("db", RunDirThere(link))  # type: ignore[arg-type]
    return PerfRecorder(4711, "/r/p", frequency=99, call_graph=call_graph, place=place, clock=clock, starts=unnamed)


def test_perf_on_the_host_records_on_its_monotonic_clock_driven_through_its_fifos() -> None:
    link = FakeLink(answers={"head -n 1": "ack\n"})
    with on_host(link) as perf:
        perf.resume()
    (spawned,) = perf.place.rundir.started  # type: ignore[attr-defined]
    argv = spawned[spawned.index("perf") :]
    assert argv[:3] == ["perf", "record", "-a"] and argv[argv.index("-k") + 1] == "CLOCK_MONOTONIC"
    assert argv[argv.index("-D") + 1] == "-1" and "-g" in argv and argv[argv.index("-F") + 1] == "99"
    assert argv[-1] == "fifo:/r/p/perf-4711.ctl,/r/p/perf-4711.ack" and spawned[3] == "/r/p/perf-4711.log"
    words = [a[5] for a in link.ran if a[:1] == ["timeout"]]
    assert words == ["enable", "enable", "disable"] and perf.failure is None  # started, resumed; stopped
    assert perf.place.rundir.signals == [(4800, "INT")] and perf.span[1] > perf.span[0]  # type: ignore[attr-defined]
    assert perf.script_argv(4711, timed=True) == [
        "perf", "script", "-i", "/r/p/perf-4711.data", "--pid", "4711", "-F", "tid,time,ip,sym,dso",
    ]  # fmt: skip
    dwarf = on_host(FakeLink(), call_graph="dwarf").events()
    assert "--call-graph" in dwarf and dwarf[dwarf.index("--call-graph") + 1].startswith("dwarf,")


SCRIPT = """mariadbd  4712 {t1:.6f}:
\t    7f00aa do_command ({exe})
\t    7f00bb handle_one_connection ({exe})
\t    7f00cc start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)

mariadbd  4713 {t2:.6f}:
\t    80 [unknown] ({exe})
\t    7f00cc start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)

"""


def test_perf_script_from_the_host_is_folded_per_phase_on_this_machines_clock() -> None:
    clock = WindowClock(FakeLink(offset=50.0))
    clock.begin()
    aligned = clock.require()
    now_mono, wall = time.monotonic(), time.time()
    spans = Spans(workload=now_mono - 10, window=now_mono - 5, end=now_mono + 5)
    # on the host's CLOCK_MONOTONIC (1000 s at its wall clock `wall + 50`, 50 s ahead): one sample
    # in the warm-up, one in the window
    script = SCRIPT.format(t1=1000 - 7, t2=1000 - 1, exe="/usr/sbin/mariadbd")
    header = f"# reference time: 2026-11-29 20:00:00.000000 = {wall + 50:.6f} (TOD) = 1000.000000 (monotonic)\n"
    link = FakeLink(answers={"perf script": script, "--header-only": header})
    perf = on_host(link, clock)
    folds = perf.fold_phases(4711, spans.phases_at)
    warm, _ = folds["warmup"]
    assert warm == {"start_thread;handle_one_connection;do_command": 1}
    window, stats = folds["measured"]
    assert window == {"start_thread;[unknown]": 1} and stats.complete == 1  # no binary here: not named
    assert aligned.shift_s == pytest.approx(-50.0, abs=0.01)
    assert perf.script_argv(4711, timed=True) in link.ran


EU_STACK = """PID 4711 - process
TID 4712:
#0  0x00007f15ab0a3f16 __futex_abstimed_wait_common - /usr/lib/x86_64-linux-gnu/libc.so.6
#1  0x000055e6d3c73f8d srv_master_thread - /usr/sbin/mariadbd
#2  0x00007f15ab0a3000 start_thread - /usr/lib/x86_64-linux-gnu/libc.so.6
"""


def test_eu_stack_samples_on_the_host_are_aligned_rows() -> None:
    clock = WindowClock(FakeLink(offset=-3.0))
    clock.begin()
    place = HostPlace("db", SimpleNamespace(link=FakeLink(), path="/r"))  # type: ignore[arg-type]
    sampler = LoopSampler(place, 4711, clock, 0.5, unnamed)
    sampler.span = (time.monotonic() - 2, time.monotonic())
    sampler._modules = None  # every frame named by eu-stack
    sampler._samples = [(time.time() - 3.0 - 1.0, EU_STACK)]  # the host's clock: 1 s ago
    (row,) = sampler.rows()
    t, tid, frames = row
    assert tid == 4712 and frames == ["start_thread", "srv_master_thread", "__futex_abstimed_wait_common"]
    assert t == pytest.approx(1.0, abs=0.05) and sampler.dsos["srv_master_thread"] == "mariadbd"


def test_the_preflight_names_the_observers_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    observe = ObserveSection.model_validate({"perf": True, "pmp": True})
    assert observer_packages(SimpleNamespace(observe=observe)) == {"perf": "linux-perf", "eu-stack": "elfutils"}
    assert observer_packages(SimpleNamespace(observe=ObserveSection())) == {}
    asked = {}
    monkeypatch.setattr(
        "perflab.hosts.preflight._problems_of",
        lambda spec, name, tools, dirs=(), preloads=(): asked.update({name: tools}) or [],
    )
    spec = SimpleNamespace(
        experiment=SimpleNamespace(client_host="load", server_host="db"), observe=observe, variants={}
    )
    preflight.host_problems(spec, {"sysbench": "sysbench"}, {"mariadbd": "mariadb-server"})
    assert asked == {  # the server host's observers' tools, not the client host's
        "load": {"sysbench": "sysbench"},
        "db": {"mariadbd": "mariadb-server", "perf": "linux-perf", "eu-stack": "elfutils"},
    }


def test_a_host_binarys_function_starts_come_from_the_same_file_here_or_a_copy(tmp_path: Path) -> None:
    true = os.path.realpath(shutil.which("true") or "/bin/true")
    here = FunctionStarts.load(true)
    assert here.starts  # an ELF with .eh_frame_hdr
    digest = hashlib.sha256(Path(true).read_bytes()).hexdigest()
    fetched = []

    class Host(FakeLink):
        def get(self, remote: str, local: Path) -> None:
            fetched.append(remote)
            shutil.copyfile(true, local)

    same = HostStarts(Host(answers={"sha256sum": f"{digest}  {true}\n"}), tmp_path / "cache")
    assert same(true).starts == here.starts and fetched == []  # the same file here: not copied
    assert same.local(true) == true  # what the stack quality inspects
    other = HostStarts(Host(answers={"sha256sum": f"{'ab' * 32}  {true}\n"}), tmp_path / "cache")
    assert other(true).starts == here.starts and other(true).label == os.path.basename(true)
    assert fetched == [true] and (tmp_path / "cache" / ("ab" * 32) / os.path.basename(true)).is_file()
    assert other.local(true) == str(tmp_path / "cache" / ("ab" * 32) / os.path.basename(true))
    again = HostStarts(Host(answers={"sha256sum": f"{'ab' * 32}  {true}\n"}), tmp_path / "cache")
    assert again(true).starts == here.starts and fetched == [true]  # once per run: the copy is kept
    missing = HostStarts(Host(), tmp_path / "cache")("/usr/sbin/gone")  # sha256sum said nothing
    assert missing.name(0x1234) == "[unknown]"


def test_the_remote_servers_metrics_filter_is_its_enabled_column() -> None:
    from perflab.servers.mariadb.flavor import INSTALLED

    assert INSTALLED.metrics_enabled == "ENABLED"  # the host's own mariadbd (10.11): status sampled over TCP


def stat_line(pid: int, comm: str, ppid: int, pgid: int, own: int, reaped: int) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
    return f"{pid} ({comm}) S {ppid} {pgid} {pgid} 0 -1 0 0 0 0 0 {own} 0 {reaped} 0 20 0 1 0"


def snapshot(parent: int, *procs: tuple) -> str:
    return "\n".join([str(parent), "100", *(stat_line(*p) for p in procs)]) + "\n"


def test_perflabs_own_cpu_on_a_host_leaves_out_the_measured_processes() -> None:
    start = parse_snapshot(snapshot(
        102,
        (100, "sshd", 1, 100, 50, 999),  # the session: its reaped children (a client's wrapper) not counted
        (102, "bash", 100, 100, 0, 0), (103, "sh", 102, 100, 0, 0),  # the reading itself
        (200, "setsid", 100, 100, 0, 0), (201, "mariadbd", 200, 201, 5000, 0),  # the server and its wrapper
        (300, "setsid", 100, 100, 0, 0), (301, "bash", 300, 301, 10, 20),  # perflab's RSS loop
    ))  # fmt: skip
    assert session_of(start) == 100 and start.tick == 100 and start.procs[201].own == 5000
    groups = {201}
    skip = wrappers(start, groups)
    assert skip == {200}
    end = parse_snapshot(snapshot(
        104,
        (100, "sshd", 1, 100, 60, 2999), (104, "sh", 100, 100, 1, 0),
        (200, "setsid", 100, 100, 0, 900), (201, "mariadbd", 200, 201, 9000, 0),
        (300, "setsid", 100, 100, 0, 0), (301, "bash", 300, 301, 12, 30),
        (400, "setsid", 100, 100, 0, 0), (401, "bash", 400, 401, 5, 0),  # the stack sampler's loop, new
    ))  # fmt: skip
    ticks = window_ticks(perflab_ticks(start, groups, skip), perflab_ticks(end, groups, skip))
    assert ticks == 10 + 1 + (12 + 30 - 30) + 5  # sshd, the reading's shell, the RSS loop, the new loop
    recycled = parse_snapshot(snapshot(100, (100, "sshd", 1, 100, 50, 0), (301, "sleep", 100, 100, 3, 0)))
    assert perflab_ticks(recycled, set(), set())[(301, "sleep")] == 3  # another process on pid 301


def test_the_host_line_says_perflabs_cpu_there_and_an_unaligned_clock() -> None:
    from perflab.report.phrases import host_lines

    meta = {"hosts": {"db": {"ssh": "root@db1", "clock": {"start": {"rtt_s": 0.0004}, "refused": None}}}}

    def cell(cores: float, aligned: bool) -> dict:
        host = {"name": "db", "fingerprint": {}, "clock": {"aligned": aligned}}
        return {"build": {"host": host}, "client": {}, "resources": {"perflab_host_cpu": {"db": {"cores": cores}}}}

    (line,) = host_lines({"hosts": meta}, [cell(0.012, True), cell(0.078, False)])
    assert line == (
        "server on host db (root@db1): 0.40 ms round trip; same fingerprint as this machine; "
        "perflab's own CPU there 7.8% of a core at most in a window; its clock not aligned in 1 cell (over 50 ms)"
    )
    meta["hosts"]["db"]["clock"]["refused"] = "host db: its clock is known only within 70 ms over the run"
    (line,) = host_lines({"hosts": meta}, [cell(0.012, True)])
    assert "; its clock not aligned over the run: host db: its clock is known only within 70 ms" in line


TASKS = """#      pid      tid     ppid  comm
         1        1        0 |systemd
      4711     4711        1 |  postgres
      4720     4720     4711 |    postgres
      4721     4721     4711 |    postgres
      4730     4730     4720 |      postgres
      5000     5000        1 |  sshd
"""


def test_a_process_tree_is_profiled_on_its_host_as_locally() -> None:
    """PostgreSQL on a server host: perf's tasks there give the postmaster's tree (a backend that
    exited included), `perf script` takes all of it, and the sampler walks the tree at each tick."""
    from perflab import spec

    clock = WindowClock(FakeLink())
    perf = on_host(FakeLink(answers={"--tasks": TASKS}), clock)
    assert perf.descendants(4711) == [4711, 4720, 4721, 4730]
    assert perf.script_argv([4711, 4720])[4:6] == ["--pid", "4711,4720"]
    place = HostPlace("db", SimpleNamespace(link=FakeLink(), path="/r"))  # type: ignore[arg-type]
    sampler = LoopSampler(place, 4711, clock, 0.5, unnamed, tree=True)
    clock.begin()
    sampler.span = (time.monotonic() - 2, time.monotonic())
    sampler._modules = None
    backend = EU_STACK.replace("4711", "4720").replace("4712", "4720")
    sampler._samples = [(time.time() - 1.0, EU_STACK + backend)]
    assert [tid for _, tid, _ in sampler.rows()] == [4712, 4720] and sampler.processes == [4711, 4720]
    text = (
        '[experiment]\nname = "x"\nserver = "postgresql"\nserver_host = "db"\n[hosts.db]\nssh = "root@db1"\n'
        '[dataset]\ntables = 1\ntable_size = 1000\n[workload]\ntest = "oltp_point_select"\nthreads = [2]\n'
        "[observe]\nperf = true\npmp = true\n"
    )
    assert spec.parse(text).file.observe.pmp is not None  # no longer refused


def test_the_fingerprint_names_every_package_a_host_runs() -> None:
    """A client host with only postgresql-client-15 records its pgbench's version (issue 36)."""
    from perflab import hostinfo, servers
    from perflab import workloads

    # Debian's packages (go-tpc's is an instruction: `go install`'s, its version read from the binary there)
    clients = {
        p for name in ("sysbench", "pgbench", "go-tpc") for p in workloads.get(name).client_packages.values() if " " not in p
    }
    served = {p for kind in servers.every() for p in kind.server_packages.values()}
    assert {"sysbench", "postgresql-client-15"} <= clients
    assert clients | served <= set(hostinfo.FINGERPRINT_PACKAGES)
    listing = "libc6=2.36-9+deb12u14\nsysbench=1.0.20+ds-5\npostgresql-client-15=15.18-0+deb12u1\n"
    printed = hostinfo.fingerprint(SimpleNamespace(read=lambda path: None, run=lambda argv: listing))
    assert (
        printed["packages"]["postgresql-client-15"] == "15.18-0+deb12u1" and "postgresql-15" not in printed["packages"]
    )


class LateLoop:
    """The host's RSS loop: each line stamped with the host's clock (`offset` s ahead of this machine's)
    when read there, `late` s before it reaches this machine (a slow link, a busy host)."""

    def __init__(self, offset: float, late: float, lines: int) -> None:
        self.offset, self.late, self.count = offset, late, lines
        self.read_at: list[float] = []  # this machine's monotonic clock at each reading there

    def lines(self) -> Iterator[str]:
        for _ in range(self.count):
            time.sleep(0.1)
            self.read_at.append(time.monotonic() - self.late)
            yield f"{time.time() - self.late + self.offset:.6f} {100 << 20}\n"


def test_a_postgresql_trees_rss_samples_are_put_on_this_machines_clock() -> None:
    """The tree's RSS loop on the server host stamps each sample with the host's clock; the sampler puts
    it on this machine's with the window's readings, not at its arrival here (issue 36)."""
    from perflab.hosts.place import _TREE_RSS, TreeRssSampler

    link = FakeLink(offset=7.25, answers={"statm": str(120 << 20)})
    loop = LateLoop(offset=7.25, late=0.3, lines=3)
    started = []
    rundir = SimpleNamespace(link=link, start=lambda argv: started.append(argv) or (loop, 4242), kill=lambda pid: None)
    with TreeRssSampler(rundir, 4711, WindowClock(link)) as rss:  # type: ignore[arg-type]
        time.sleep(0.5)
    assert started == [["bash", "-c", _TREE_RSS, "4711"]] and "$EPOCHREALTIME" in _TREE_RSS
    assert rss.clock is not None and rss.clock.record()["aligned"]
    *stamped, end = rss.samples
    expected = [round(at - rss._start, 3) for at in loop.read_at]  # when each was read on the host
    assert [v for _, v in stamped] == [100 << 20] * 3 and end[1] == 120 << 20  # the tree's RSS at the end
    # each at its reading there: 0.3 s before its arrival here, 7.25 s behind its host's stamp
    assert all(abs(t - e) < 0.02 for (t, _), e in zip(stamped, expected, strict=True)), (stamped, expected)


def test_the_host_line_says_perflabs_cpu_there_over_the_run() -> None:
    from perflab.report.phrases import host_lines

    run = {"cpu_s": 0.41, "measured_cpu_s": 61.2, "session_cpu_s": 61.61, "wall_s": 95.3, "cores": 0.0043}
    meta = {"hosts": {"db": {"ssh": "root@db1", "clock": {}, "perflab_cpu": run}}}
    cell = {
        "build": {"host": {"name": "db"}},
        "client": {},
        "resources": {"perflab_host_cpu": {"db": {"cores": 0.012}}},
    }
    (line,) = host_lines({"hosts": meta}, [cell])
    assert line.endswith(
        "perflab's own CPU there 1.2% of a core at most in a window, 0.43% over the run (0.41 s in 95 s)"
    )
    (line,) = host_lines({"hosts": meta}, [])
    assert line.endswith("; perflab's own CPU there 0.43% over the run (0.41 s in 95 s)")
