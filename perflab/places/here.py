"""This machine as a place (perflab/places/__init__.py): its /proc read directly, its processes
started as places/proc.Child (their own process group, killed with perflab).

    place = HERE
    used = place.counters(pid).minus(before)
    child = place.spawn(argv, log=workdir / "perf.log")
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from perflab import debuginfo
from perflab.errors import PerflabError
from perflab.places import Clock, Done, Process
from perflab.places.proc import Child, guarded
from perflab.places.procfs import ProcCounters, RssSampler, process_cpu_s
from perflab.places.proctree import TreeSampler, tree_counters

T = TypeVar("T")
ACK_DEADLINE_S = 30.0


@dataclass(frozen=True)
class Here:
    """The machine perflab runs on."""

    name: str = "here"
    where: str = ""

    def counters(self, pid: int, threads: bool = True) -> ProcCounters:
        return ProcCounters.read(pid, threads)

    def tree_counters(self, pid: int, threads: bool = True) -> ProcCounters:
        if process_cpu_s(pid) is None:  # the tree's root is gone: not a tree of nothing
            raise ProcessLookupError(pid)
        return tree_counters(pid, threads)

    def rss_sampler(self, pid: int, tree: bool = False) -> RssSampler:
        return TreeSampler(pid) if tree else RssSampler(pid)

    def run(self, argv: Sequence[str], timeout: float = 60.0) -> Done:
        try:
            done = subprocess.run(
                guarded(argv), capture_output=True, text=True, errors="replace", timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError(f"{argv[0]} still running after {timeout:.0f} s") from exc
        return Done(done.returncode, done.stdout, done.stderr)

    def consume(self, argv: Sequence[str], reader: Callable[[Iterable[str]], T], timeout: float) -> tuple[T, Done]:
        with (
            tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as err,
            subprocess.Popen(
                guarded(argv), stdout=subprocess.PIPE, stderr=err, encoding="utf-8", errors="replace",
                bufsize=1 << 20, start_new_session=True,
            ) as proc,
        ):  # fmt: skip
            try:
                assert proc.stdout is not None
                out = reader(proc.stdout)
                code = proc.wait(timeout)
            finally:
                proc.kill()
            err.seek(0)
            return out, Done(code, "", err.read())

    def fifos(self, *paths: str | Path) -> None:
        for path in map(Path, paths):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
            os.mkfifo(path)

    def spawn(self, argv: Sequence[str], log: str | Path, env: dict[str, str] | None = None) -> Child:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w", encoding="utf-8") as out:  # the child holds its own copy of the descriptor
            return Child(argv, env=env, stdout=out, stderr=subprocess.STDOUT)

    def install(self, program: Path) -> str:
        return str(program)

    def fetch(self, path: str | Path, into: Path) -> None:
        if Path(path) != into:
            shutil.copyfile(path, into)

    def make_file(self, path: str, head: bytes, size: int) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.write(head)
            f.truncate(size)

    def read_bytes(self, path: str, offset: int, length: int) -> tuple[bytes, float | None]:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            return os.pread(fd, length, offset), None
        finally:
            os.close(fd)

    def write_bytes(self, path: str, offset: int, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.pwrite(fd, data, offset)
        finally:
            os.close(fd)

    def cpus(self, pid: int) -> list[int]:
        return sorted(os.sched_getaffinity(pid))

    def follow(self, argv: Sequence[str]) -> Following:
        return Following(Child(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))

    def control(self, ctl: str | Path, ack: str | Path, process: Process) -> FifoControl:
        return FifoControl(Path(ctl), Path(ack), process)

    def monotonic(self, clock: Clock | None, wall_minus_monotonic: Callable[[], float | None]) -> Callable[[float], float]:
        return lambda t: t  # recorded on this machine's CLOCK_MONOTONIC

    def debug_files(self, pid: int) -> dict[str, Path]:
        return debuginfo.root_debug_files(pid)

    def program(self, pid: int) -> str | None:
        """The program `pid` runs. A server started through a private root's loader
        (builds/debroot.py) has the loader as its /proc exe: its program is the first argument
        after the loader's own options."""
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            return None
        if not os.path.basename(exe).startswith("ld-linux"):
            return exe
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            return exe
        rest = argv[1:]
        while rest and rest[0].startswith("--"):  # --inhibit-cache, --library-path DIRS
            rest = rest[2:] if rest[0] in ("--library-path", "--preload", "--audit", "--argv0") else rest[1:]
        return rest[0] if rest and os.path.isfile(rest[0]) else exe


HERE = Here()


@dataclass(frozen=True)
class Following:
    """A process here read line by line (Here.follow)."""

    child: Child

    def lines(self) -> Iterable[str]:
        assert self.child.popen.stdout is not None
        return self.child.popen.stdout

    def stop(self) -> None:
        self.child.kill()


class FifoControl:
    """The FIFOs held open here, written and read without blocking (an ack in milliseconds: perf's
    toggles second by second in bench/profile_overhead.py)."""

    def __init__(self, ctl: Path, ack: Path, process: Process) -> None:
        self.process = process
        # opening blocks until the process opens its end: one that dies first would hang us
        self._ctl = _open_fifo(ctl, os.O_WRONLY, process)
        try:
            self._ack = _open_fifo(ack, os.O_RDONLY, process)
        except BaseException:
            os.close(self._ctl)
            raise

    def send(self, word: str) -> bool:
        os.write(self._ctl, f"{word}\n".encode())
        deadline = time.monotonic() + ACK_DEADLINE_S
        reply = b""
        while b"ack" not in reply:
            if time.monotonic() > deadline or self.process.poll() is not None:
                return False
            try:
                chunk = os.read(self._ack, 64)
            except BlockingIOError:
                chunk = b""
            if not chunk:  # nothing yet (or the process has not opened its end)
                time.sleep(0.005)
            reply += chunk
        return True

    def close(self) -> None:
        for fd in (self._ctl, self._ack):
            os.close(fd)


def _open_fifo(path: Path, flags: int, process: Process) -> int:
    """Open a FIFO whose other end `process` opens, without hanging if it dies first."""
    deadline = time.monotonic() + ACK_DEADLINE_S
    while True:
        try:
            return os.open(path, flags | os.O_NONBLOCK)
        except OSError:  # ENXIO: the process has not opened its end yet
            if process.poll() is not None or time.monotonic() > deadline:
                raise PerflabError(
                    f"{path.name}: the process exited before it opened its control FIFO",
                    "run `perflab doctor`; perf_event_paranoid or a missing linux-perf",
                ) from None
            time.sleep(0.02)
