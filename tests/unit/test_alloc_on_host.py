"""[observe] alloc of a server on a server host (observers/alloc/tracer.py on a host's place,
hosts/place.py), without a host: the "link" runs its argv here (sh, od, head, tail, base64, dd,
truncate: what the host runs), so the
counter file made, read and written over it is checked against the local reader of the same file;
the host's binaries name a process's addresses as the live symbolizer does; the counter's window is
the sampler's span."""

from __future__ import annotations

import ctypes
import mmap
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar, Self

import numpy as np
import pytest

from perflab.hosts.place import HostPlace
from perflab.hosts.rundir import RunDir
from perflab.observers import alloc
from perflab.observers.alloc.tracer import EXTRA_SLOTS, AllocTracer, Spanning
from perflab.observers.host_binaries import HostSymbolizer, executable_bases
from perflab.observers.pmp_sampler import Symbolizer
from perflab.spec.observe import AllocObserve


class HereLink:
    """A Connection whose host is this machine: argv run by subprocess, put a copy."""

    name = "db"

    def __init__(self) -> None:
        self.ran: list[list[str]] = []
        self.puts: list[str] = []

    def run(self, argv: list[str], timeout: float = 60, stdin: str | None = None) -> SimpleNamespace:
        self.ran.append(argv)
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
        return SimpleNamespace(status=done.returncode, stdout=done.stdout, stderr=done.stderr)

    def put(self, local: Path, there: str) -> None:
        self.puts.append(there)
        shutil.copy(local, there)


@pytest.fixture
def tracer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AllocTracer:
    shim = tmp_path / "perflab_alloc-0123.so"
    shim.write_bytes(b"\x7fELF")
    monkeypatch.setattr(alloc, "build", lambda cache: shim)
    monkeypatch.setattr("perflab.hosts.place._INSTALLED", set())  # copied once per run (HostPlace.install)
    host = tmp_path / "host"
    host.mkdir()
    rundir = RunDir(HereLink(), str(host))  # type: ignore[arg-type]
    local = tmp_path / "cell-0003"
    local.mkdir()
    place = HostPlace("db", rundir)
    return AllocTracer(AllocObserve(period="256K"), local, tmp_path, place=place, there=f"{host}/cell-0003")


def _link(tracer: AllocTracer) -> HereLink:
    return tracer.place.rundir.link  # type: ignore[attr-defined,no-any-return]


def test_the_counter_file_is_made_on_the_host_as_here(tracer: AllocTracer, tmp_path: Path) -> None:
    made = Path(str(tracer.file))
    assert made.parent == tmp_path / "host" / "cell-0003"  # the cell's directory there, made
    here = tmp_path / "here.bin"
    alloc.create(here)
    assert made.stat().st_size == here.stat().st_size == alloc.file_bytes()
    assert made.read_bytes()[: alloc.HEADER_BYTES] == here.read_bytes()[: alloc.HEADER_BYTES]
    assert made.stat().st_blocks * 512 < 1 << 20  # sparse: only its header written
    assert tracer.env() == {"PERFLAB_ALLOC_FILE": str(made)}
    assert tracer.there == f"{tmp_path / 'host'}/perflab_alloc-0123.so" and Path(tracer.there).is_file()


def test_the_shim_is_copied_once_per_run(tracer: AllocTracer, tmp_path: Path) -> None:
    again = AllocTracer(AllocObserve(), tmp_path, tmp_path, place=tracer.place, there=f"{tmp_path}/host/cell-0004")
    assert _link(tracer).puts == [tracer.there] and again.there == tracer.there


def _fill_slots(path: Path, used: int) -> None:
    """`used` slots (slot 0 included) with counts, as the shim writes them."""
    words = np.memmap(path, dtype="<u8", mode="r+")
    words[alloc._SLOTS_USED] = used
    words[alloc._OVERFLOW] = 3
    for slot in range(used):
        body = words[alloc.HEADER_WORDS + slot * alloc.SLOT_WORDS :][: alloc.SLOT_WORDS]
        body.reshape(2, len(alloc.OPS), alloc.CLASSES)[0, 0, 12] = 10 + slot  # malloc calls, 2-4 KiB
        body.reshape(2, len(alloc.OPS), alloc.CLASSES)[1, 0, 12] = (10 + slot) * 3000
    words.flush()


def _reads(tracer: AllocTracer) -> list[int]:
    """The bytes each read of the counter file there asked for."""
    return [int(argv[-1]) for argv in _link(tracer).ran if argv[:2] == ["sh", "-c"] and "tail -c" in argv[2]]


def test_the_window_reads_the_slots_in_use_as_the_local_reader(tracer: AllocTracer) -> None:
    path = Path(str(tracer.file))
    _fill_slots(path, 5)
    counts = tracer._read()
    assert counts == alloc.read(path)
    assert counts.calls["malloc"][12] == sum(range(10, 15)) and counts.threads == 4 and counts.overflow == 3
    slot = alloc.SLOT_WORDS * 8
    assert _reads(tracer) == [alloc.HEADER_BYTES + (1 + EXTRA_SLOTS) * slot]  # one round trip
    _fill_slots(path, EXTRA_SLOTS + 9)  # more threads took a slot than a read looks beyond: read again
    counts = tracer._read()
    assert counts == alloc.read(path) and counts.threads == EXTRA_SLOTS + 8
    head = alloc.HEADER_BYTES
    assert _reads(tracer)[1:] == [head + (5 + EXTRA_SLOTS) * slot, head + (2 * EXTRA_SLOTS + 9) * slot]


def test_the_counts_span_is_the_hosts_time_of_each_snapshot(tracer: AllocTracer) -> None:
    """The span the window's transactions are matched to is when the snapshots were taken there (the
    host's wall clock, aligned), not when this machine sent the reads: under load the read of the end
    is taken a round trip's half after it was asked (1.13 mallocs a transaction where there is one)."""
    import time

    from perflab.hosts.clock import Alignment

    _fill_slots(Path(str(tracer.file)), 2)
    tracer.spec = AllocObserve(period="256K", syscalls=False)  # no perf there (this machine, no host)
    with tracer.window(1):
        time.sleep(0.2)
    first, last = tracer.walls  # type: ignore[misc]
    assert 0.2 <= last - first < 5 and abs(first - time.time()) < 5
    assert tracer.aligned_span(None) == tracer.span  # no clock read: as sent
    shift = Alignment("db", 2.5, 0.001, time.time() - time.monotonic())
    clock = SimpleNamespace(alignment=shift)
    a, b = tracer.aligned_span(clock)  # type: ignore[misc]
    assert (a, b) == (shift.monotonic(first), shift.monotonic(last)) and b - a == pytest.approx(last - first)
    assert a - tracer.span[0] == pytest.approx(2.5, abs=1)  # type: ignore[index]


def test_sampling_is_switched_by_its_word_there_and_the_ring_read_back(tracer: AllocTracer) -> None:
    path = Path(str(tracer.file))
    tracer._sample(256 * 1024)
    assert int(np.fromfile(path, dtype="<u8", count=alloc.HEADER_WORDS)[alloc._PERIOD]) == 256 * 1024
    assert path.stat().st_size == alloc.file_bytes()  # written in place, not truncated
    words = np.memmap(path, dtype="<u8", mode="r+")
    start = alloc.ring_start(words)
    for i, (size, depth) in enumerate([(2 << 20, 3), (64, 2), (100, 0)]):  # the last one unfinished
        words[start + i * alloc.SAMPLE_WORDS :][:5] = (0, size, depth, 0x401000 + i, 0x402000 + i)
    words[9], words[10] = 3, 7  # samples_used, dropped
    words.flush()
    assert tracer._samples() == alloc.samples(path, tracer.spec.period)
    got, dropped = tracer._samples()
    assert [(s.op, s.size, s.pcs) for s in got] == [
        ("malloc", 2 << 20, [0x401000, 0x402000, 0]),
        ("malloc", 64, [0x401001, 0x402001]),
    ]
    assert dropped == 7
    tracer._sample(0)
    assert int(np.fromfile(path, dtype="<u8", count=alloc.HEADER_WORDS)[alloc._PERIOD]) == 0


def test_the_claim_and_a_foreign_file_are_read_there(tracer: AllocTracer) -> None:
    path = Path(str(tracer.file))
    words = np.memmap(path, dtype="<u8", mode="r+")
    words[alloc._PID], words[alloc._EXTRA_COPIES] = 4242, 1
    words.flush()
    assert alloc.claim_of(tracer._header()) == alloc.Claim(4242, 1, 0)
    with open(tracer.shim, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ):  # in this process's maps
        assert tracer._loaded(os.getpid())
        with pytest.raises(alloc.AllocTracerError, match="loaded 2 times"):
            tracer.check_started(os.getpid())
    words[0] = 0
    words.flush()
    with pytest.raises(alloc.AllocTracerError, match="is not a perflab-alloc/1 counter file"):
        tracer._header()


def test_a_server_without_the_counter_loaded_is_refused(tracer: AllocTracer) -> None:
    with pytest.raises(alloc.AllocTracerError, match="not loaded into the server"):
        tracer.check_started(os.getpid())  # this process maps no perflab_alloc-0123.so


class Sampler:
    samples: ClassVar[list[Any]] = []

    def __init__(self) -> None:
        self.clock, self.order = "host clock", []

    def __enter__(self) -> Self:
        self.order.append("rss")
        return self

    def __exit__(self, *exc: object) -> None:
        self.order.append("rss done")


class Window:
    def __init__(self, order: list[str]) -> None:
        self.order = order

    def window(self, pid: int) -> Any:
        import contextlib

        @contextlib.contextmanager
        def span() -> Any:
            self.order.append(f"alloc {pid}")
            yield
            self.order.append("alloc done")

        return span()


def test_the_counter_window_is_the_samplers_span() -> None:
    inner = Sampler()
    wrapped = Spanning.over(inner, Window(inner.order), 77)  # type: ignore[arg-type]
    assert wrapped.clock == "host clock"  # the window reads the host's clock through it
    with wrapped as rss:
        assert rss is inner and inner.order == ["alloc 77", "rss"]  # the counts first: the sampler's start is slow
    assert inner.order == ["alloc 77", "rss", "rss done", "alloc done"]
    assert Spanning.over(inner, None, 1) is inner  # without [observe] alloc


def test_a_hosts_binaries_name_addresses_as_the_live_symbolizer() -> None:
    maps = Path("/proc/self/maps").read_text()
    bases = executable_bases(maps)
    libc = next(p for p in bases if os.path.basename(p).startswith("libc.so"))
    assert not any(p.endswith(".bin") for p in bases) and libc in bases
    starts = SimpleNamespace(local=lambda path: path)  # every file of the "host" is the same here
    addrs = [ctypes.cast(getattr(ctypes.CDLL(None), f), ctypes.c_void_p).value for f in ("malloc", "qsort")]
    live, named = Symbolizer(os.getpid()), HostSymbolizer(maps, starts)  # type: ignore[arg-type]
    try:
        assert [named.name(a) for a in addrs] == [live.name(a) for a in addrs]
        assert named.name(addrs[0]) in ("malloc", "__libc_malloc") and named.dsos[named.name(addrs[0])].startswith(
            "libc.so"
        )
    finally:
        live.close()
        named.close()
    unknown = HostSymbolizer(maps, SimpleNamespace(local=lambda path: None))  # type: ignore[arg-type]
    assert unknown.name(addrs[0]) == "[unknown]"  # a binary that could not be had names nothing
    unknown.close()


class ScriptLink:
    """A link whose `perf script` prints recorded tracepoint lines, and on its stderr a loss."""

    name = "db"

    def __init__(self, stdout: str, said: str = "") -> None:
        self.stdout, self.said, self.ran = stdout, said, []

    def run(self, argv: list[str], timeout: float = 60, stdin: str | None = None) -> SimpleNamespace:
        self.ran.append(argv)
        return SimpleNamespace(status=0, stdout=self.stdout, stderr=self.said)


def test_the_hosts_perf_records_the_syscall_tracepoints_and_counts_the_servers() -> None:
    lines = (
        "syscalls:sys_enter_mmap: addr: 0x00000000, len: 0x0000a000, prot: 0x00000003, flags: 0x00000022\n"
        "syscalls:sys_enter_munmap: addr: 0x7f0e2c000000, len: 0x0000a000\n"
    )
    link = ScriptLink(lines, "Processed 10 events and lost 2 chunks!\n")
    place = HostPlace("db", RunDir(link, "/dev/shm/perflab-host-x"))  # type: ignore[arg-type]
    tracer = SimpleNamespace(place=place, tree=False, dir="/dev/shm/perflab-host-x/c")
    recorder = AllocTracer._recorder(tracer, 77)  # type: ignore[arg-type]
    argv = recorder.argv(Path("C"), Path("A"))
    assert argv[:3] == ["perf", "record", "-a"] and "syscalls:sys_enter_munmap" in argv[argv.index("-e") + 1]
    assert argv[argv.index("-D") + 1] == "-1" and "-F" not in argv and "-g" not in argv  # off until the window
    assert str(recorder.data) == "/dev/shm/perflab-host-x/c/syscalls/perf-77.data" and not recorder.enabled
    counts = recorder.counts()
    assert counts.calls["mmap"] == counts.calls["munmap"] == 1 and counts.bytes["munmap"] == 0xA000
    assert counts.lost_chunks == 2  # the tracer then says why the syscall figures are null
    script = link.ran[0]
    assert script[script.index("--pid") + 1] == "77" and "event,trace" in script  # the server's, there


def test_the_server_there_starts_with_the_counter_first_in_ld_preload(tmp_path: Path, monkeypatch) -> None:
    from perflab.hosts import home
    from perflab.servers import kind
    from perflab.servers.mysqld import Mysqld

    started: list[list[str]] = []
    monkeypatch.setattr(home, "Tracked", lambda rundir, argv, measured=False: started.append(argv))
    monkeypatch.setattr(Mysqld, "write_option_file", lambda self: None)
    monkeypatch.setattr(Mysqld, "_wait_ready", lambda self, deadline: None)
    ran: list[list[str]] = []
    link = SimpleNamespace(name="db", target=SimpleNamespace(user="root"),
                           run=lambda argv, **kw: ran.append(argv) or SimpleNamespace(status=0, stdout="", stderr=""))  # fmt: skip
    place = SimpleNamespace(name="db", link=link, rundir=SimpleNamespace(path="/dev/shm/perflab-host-x"),
                            address="10.77.1.2", binaries={"mariadb": "/usr/bin/mariadb"}, version="mariadbd Ver 10.11.19",
                            free_port=lambda: 23456, program="/usr/sbin/mariadbd")  # fmt: skip
    there = "/dev/shm/perflab-host-x/perflab_alloc-0123.so"
    counter = SimpleNamespace(
        there=there, env=lambda: {"PERFLAB_ALLOC_FILE": "/dev/shm/perflab-host-x/cell-0001/a.bin"}
    )
    mariadb = kind("mariadb")
    server = mariadb.remote_server(place, "/dev/shm/perflab-host-x/cell-0001/data", {}, local=tmp_path / "cell-0001",
                                   env={"TZ": "UTC"}, alloc=counter)  # fmt: skip
    server.aslr = False
    server.start()
    (argv,) = started
    assert argv[4] == "env" and f"LD_PRELOAD={there}" in argv and "TZ=UTC" in argv  # after its console's redirection
    assert "PERFLAB_ALLOC_FILE=/dev/shm/perflab-host-x/cell-0001/a.bin" in argv
    assert argv[argv.index("setarch") :][:3] == ["setarch", "-R", "/usr/sbin/mariadbd"]  # env outside: setarch inherits
    assert "setpriv" not in argv  # started as root: it becomes the mysql account itself (option user)
    assert argv[-1] == "--defaults-file=/dev/shm/perflab-host-x/cell-0001/my.cnf"
    # its directory (with tmp/ and files/: secure-file-priv) and its datadir the server's account's, first
    adopt = ran[0]
    assert adopt[3:] == ["/dev/shm/perflab-host-x/cell-0001", "/dev/shm/perflab-host-x/cell-0001/data", "mysql", "tmp files"]
    assert server.alloc is counter  # the window finds its counter through the server (remote.spanning)
    plain = mariadb.remote_server(place, "/d", {}, local=tmp_path / "cell-0002")
    plain.start()
    assert not any(a.startswith(("LD_PRELOAD=", "PERFLAB_ALLOC_FILE=")) for a in started[1]) and plain.alloc is None


def test_the_counters_switches_write_through_no_link_here_or_there(tracer: AllocTracer, tmp_path: Path):
    """The counter file is in the server's directory, its account's: a link it plants in its place
    must not make root write 8 bytes into the file it points at (issue 48)."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"x" * 4096)
    here = tmp_path / "counters.bin"
    here.symlink_to(victim)
    with pytest.raises(OSError):
        alloc.sample(here, 4096)
    with pytest.raises(OSError):
        alloc.pause(here, True)
    there = Path(str(tracer.file))
    there.unlink()
    there.symlink_to(victim)
    with pytest.raises(alloc.AllocTracerError, match="symbolic link"):
        tracer._sample(4096)  # dd there refuses it (oflag=nofollow)
    assert victim.read_bytes() == b"x" * 4096
