"""A resident wall-clock stack sampler: every thread's stack of one process, every interval.

Run by `pmp.StackSampler` as its own process (killed with its group like every child):

    python -m perflab.observers.pmp_sampler PID INTERVAL_S OUT [tree] [paused]

With `tree` (PostgreSQL: one backend process per connection), every process of PID's tree is
sampled each tick: the children are read again each tick (/proc/PID/task/PID/children, cheap), a
new member is opened once (its modules and symbols loaded, then cached like PID's), a gone one
closed. The lines of every member go to the one output (a pid is its main thread's tid), and
`#process PID` marks the first sample of each member.

With `paused` it starts paused (SIGUSR2 starts the sampling) after one discarded sample, which
loads the symbol tables the server's stacks need (tenths of a second for mariadbd): a
window-only profile is ready at the window's start and pays that cost in the warm-up, not in it.

Why not `eu-stack -p PID` every interval: eu-stack loads and indexes every module's
symbols and unwind tables again on each call (120-150 ms of CPU for mariadbd), the cost the
issue measured (27% QPS at 0.1 s). This process uses the same library, elfutils' libdw,
through ctypes, but opens the process once: modules, symbol tables and CFI stay loaded, and
each sample only attaches to each thread (ptrace), unwinds it from its CFI, and detaches.
Symbols are cached by address.

Output: a header `# pmp_sampler pid=PID interval=S start=T0` (T0: CLOCK_MONOTONIC seconds of
time 0, to cut the samples by phase), then one line per thread per sample (frames root first,
names as the symbol table has them, i.e. C++ mangled; `binary+0xSTART` when the binary has no symbol for the address):
    <seconds since start> <tid> <frame;frame;frame>
before each sample's lines, the threads sampled, the sum of the times each thread was held
stopped (attach, unwind, detach) and the sample's wall time, in milliseconds:
    #stat <seconds since start> <threads> <held ms> <sample ms>
and at the end, for every frame name, the binary it is in:
    #dso <frame> <binary file name>
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

from perflab.debuginfo import root_debug_dirs
from perflab.observers.elf import FunctionStarts
from perflab.places.proctree import tree
from perflab.store.folded import KERNEL_MARK

V = ctypes.c_void_p
THREAD_CB = ctypes.CFUNCTYPE(ctypes.c_int, V, V)
FRAME_CB = ctypes.CFUNCTYPE(ctypes.c_int, V, V)
DEFAULT_DEBUGINFO_PATH = ":.debug:/usr/lib/debug"  # libdwfl's, when none is given


class _Callbacks(ctypes.Structure):
    _fields_ = [("find_elf", V), ("find_debuginfo", V), ("section_address", V), ("debuginfo_path", V)]


def load_libdw() -> ctypes.CDLL:
    lib = ctypes.CDLL("libdw.so.1", use_errno=True)
    sig = {
        "dwfl_begin": (V, [ctypes.POINTER(_Callbacks)]),
        "dwfl_end": (None, [V]),
        "dwfl_linux_proc_report": (ctypes.c_int, [V, ctypes.c_int]),
        "dwfl_report_end": (ctypes.c_int, [V, V, V]),
        "dwfl_linux_proc_attach": (ctypes.c_int, [V, ctypes.c_int, ctypes.c_bool]),
        "dwfl_getthreads": (ctypes.c_int, [V, THREAD_CB, V]),
        "dwfl_thread_getframes": (ctypes.c_int, [V, FRAME_CB, V]),
        "dwfl_thread_tid": (ctypes.c_int, [V]),
        "dwfl_frame_pc": (ctypes.c_bool, [V, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_bool)]),
        "dwfl_addrmodule": (V, [V, ctypes.c_uint64]),
        "dwfl_module_addrname": (ctypes.c_char_p, [V, ctypes.c_uint64]),
        "dwfl_module_info": (ctypes.c_char_p, [V, V, ctypes.POINTER(ctypes.c_uint64), V, V, V, V, V]),
        "dwfl_module_getelf": (V, [V, ctypes.POINTER(ctypes.c_uint64)]),
        "dwfl_errno": (ctypes.c_int, []),
        "dwfl_errmsg": (ctypes.c_char_p, [ctypes.c_int]),
    }
    for name, (restype, argtypes) in sig.items():
        func = getattr(lib, name)
        func.restype, func.argtypes = restype, argtypes
    return lib


def debuginfo_path(pid: int) -> str:
    """libdw's debuginfo_path for `pid`: its default (":.debug:/usr/lib/debug": beside the file, its
    .debug/, the system's) and the private roots' debug directories (perflab/debuginfo.py)."""
    return ":".join([DEFAULT_DEBUGINFO_PATH, *map(str, root_debug_dirs(pid))])


class Symbolizer:
    """Names the addresses of a live process from its modules' symbol tables (no ptrace)."""

    def __init__(self, pid: int) -> None:
        self.lib = lib = load_libdw()
        # where libdw looks for debug files by build ID: its default, then the usr/lib/debug of
        # each private root the process maps files from (a -dbgsym unpacked there names static functions)
        self._debug_path = ctypes.c_char_p(debuginfo_path(pid).encode())
        self.callbacks = _Callbacks(
            ctypes.cast(lib.dwfl_linux_proc_find_elf, V).value,
            ctypes.cast(lib.dwfl_standard_find_debuginfo, V).value,
            None,
            ctypes.addressof(self._debug_path),
        )
        self.dwfl = lib.dwfl_begin(ctypes.byref(self.callbacks))
        if not self.dwfl or lib.dwfl_linux_proc_report(self.dwfl, pid) != 0:
            raise OSError(f"libdw cannot read the modules of pid {pid}: {self.error()}")
        lib.dwfl_report_end(self.dwfl, None, None)
        self.names: dict[int, str] = {}
        self.dsos: dict[str, str] = {}  # frame name -> binary it is in

    def error(self) -> str:
        return (self.lib.dwfl_errmsg(-1) or b"?").decode(errors="replace")

    def name(self, pc: int) -> str:
        found = self.names.get(pc)
        if found is None:
            found = self.names[pc] = self._resolve(pc)
        return found

    def _resolve(self, pc: int) -> str:
        lib = self.lib
        module = lib.dwfl_addrmodule(self.dwfl, pc)
        if not module:
            return "[unknown]"
        path = (lib.dwfl_module_info(module, None, None, None, None, None, None, None) or b"").decode(errors="replace")
        sym = lib.dwfl_module_addrname(module, pc)
        if sym:
            name = sym.decode(errors="replace").partition("@")[0]  # pthread_cond_wait@@GLIBC_2.3.2
        else:
            bias = ctypes.c_uint64()
            if not path.startswith("/") or not lib.dwfl_module_getelf(module, ctypes.byref(bias)):
                return "[unknown]"
            name = FunctionStarts.load(path).name(pc - bias.value)
        self.dsos[name] = os.path.basename(path) or "[unknown]"
        return name

    def close(self) -> None:
        if self.dwfl:
            self.lib.dwfl_end(self.dwfl)  # detaches from every thread
            self.dwfl = None


class Sampler(Symbolizer):
    """Unwinds every thread of a live process (ptrace attach, CFI unwind, detach) per sample."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self.pid = pid
        self.seen: list[int] = []  # a tree's members (TreeSampler); one process writes no `#process` lines
        if self.lib.dwfl_linux_proc_attach(self.dwfl, pid, False) != 0:
            raise OSError(f"libdw cannot attach to pid {pid}: {self.error()}")
        self._pc = ctypes.c_uint64()
        self._activation = ctypes.c_bool()
        self._frames: list[int] = []
        self._threads: list[tuple[int, list[int]]] = []
        self.stopped_s = 0.0  # of the last sample: the threads' total time held under ptrace
        self._frame_cb = FRAME_CB(self._on_frame)  # kept referenced: libdw calls them
        self._thread_cb = THREAD_CB(self._on_thread)

    def _on_frame(self, frame: int, _arg: int) -> int:
        if not self.lib.dwfl_frame_pc(frame, ctypes.byref(self._pc), ctypes.byref(self._activation)):
            return 1  # DWARF_CB_ABORT: end of what can be unwound
        pc = self._pc.value
        self._frames.append(pc if self._activation.value else pc - 1)  # a return address is after the call
        return 0

    def _on_thread(self, thread: int, _arg: int) -> int:
        self._frames = []
        started = time.perf_counter()
        # attach (the thread stops), unwind, detach: the time the thread is held
        self.lib.dwfl_thread_getframes(thread, self._frame_cb, None)  # errors: keep the frames unwound so far
        self.stopped_s += time.perf_counter() - started
        self._threads.append((self.lib.dwfl_thread_tid(thread), self._frames))
        return 0

    def sample(self) -> list[tuple[int, list[int]]]:
        self._threads = []
        self.stopped_s = 0.0
        self.lib.dwfl_getthreads(self.dwfl, self._thread_cb, None)
        return self._threads

    def stacks(self) -> list[tuple[int, str]]:
        """(tid, frames root first joined by ";") of every thread, now."""
        out = []
        for tid, frames in self.sample():
            if frames and frames[0] != 0:
                out.append((tid, ";".join(self.name(pc) for pc in reversed(frames))))
            else:  # no user stack: an io_uring worker (iou-wrk-N) or a thread being created
                out.append((tid, kernel_wait(self.pid, tid)))
        return out


class TreeSampler:
    """A Sampler per process of a tree (a postmaster and its backends), members re-read each tick."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.members: dict[int, Sampler] = {pid: Sampler(pid)}  # the root must open: errors are the caller's
        self.seen: list[int] = []  # members in the order of their first sample (`#process` lines)
        self.stopped_s = 0.0
        self._dsos: dict[str, str] = {}

    def _refresh(self) -> None:
        now = set(tree(self.pid))
        for gone in [p for p in self.members if p not in now and p != self.pid]:
            self._dsos.update(self.members[gone].dsos)
            self.members.pop(gone).close()
        for pid in sorted(now - set(self.members)):
            try:
                self.members[pid] = Sampler(pid)
            except OSError:  # exited between the listing and the attach
                continue

    def stacks(self) -> list[tuple[int, str]]:
        self._refresh()
        out, self.stopped_s = [], 0.0
        for pid, sampler in self.members.items():
            rows = sampler.stacks()
            self.stopped_s += sampler.stopped_s
            if rows and pid not in self.seen:
                self.seen.append(pid)
            out += rows
        return out

    @property
    def dsos(self) -> dict[str, str]:
        merged = dict(self._dsos)
        for sampler in self.members.values():
            merged.update(sampler.dsos)
        return merged

    def close(self) -> None:
        for sampler in self.members.values():
            sampler.close()


def kernel_wait(pid: int, tid: int) -> str:
    """`<wchan>_[k]` (where the kernel has the thread wait) for a thread without a user stack."""
    try:
        with open(f"/proc/{pid}/task/{tid}/wchan", encoding="ascii") as f:
            wchan = f.read().strip()
    except OSError:
        wchan = ""
    return wchan + KERNEL_MARK if wchan and wchan != "0" else "[no user stack]"


def main(argv: list[str]) -> int:
    pid, interval, out_path = int(argv[0]), float(argv[1]), argv[2]
    flags = set(argv[3:])
    if flags - {"tree", "paused"}:
        raise SystemExit(f"unknown flags: {sorted(flags - {'tree', 'paused'})}")
    family = "tree" in flags
    stop = []
    paused = ["paused" in flags]  # SIGUSR1 pauses sampling, SIGUSR2 resumes it (bench/profile_overhead.py)
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    signal.signal(signal.SIGUSR1, lambda *_: paused.__setitem__(0, True))
    signal.signal(signal.SIGUSR2, lambda *_: paused.__setitem__(0, False))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
        # SA_RESTART: a signal must not interrupt libdw's waitpid() after PTRACE_ATTACH, or a
        # thread could be detached with its SIGSTOP still pending and stop the whole server
        signal.siginterrupt(sig, False)
    sampler: Sampler | TreeSampler = TreeSampler(pid) if family else Sampler(pid)
    start = time.monotonic()
    due = start
    try:
        with open(out_path, "w", encoding="utf-8") as out:
            out.write(f"# pmp_sampler pid={pid} interval={interval} start={start:.6f}\n")  # CLOCK_MONOTONIC
            out.flush()
            if paused[0]:
                sampler.stacks()  # discarded: loads the symbols now, paused, not at the first real sample
                sampler.seen.clear()  # a tree's members: their `#process` lines come with their first real sample
            while not stop:
                if paused[0]:
                    time.sleep(0.02)
                    due = time.monotonic()
                    continue
                t = time.monotonic() - start
                begun = time.perf_counter()
                known = len(sampler.seen)
                threads = sampler.stacks()
                took = time.perf_counter() - begun
                out.writelines(f"#process {member}\n" for member in sampler.seen[known:])
                out.write(f"#stat {t:.3f} {len(threads)} {1000 * sampler.stopped_s:.3f} {1000 * took:.3f}\n")
                out.writelines(f"{t:.3f} {tid} {stack}\n" for tid, stack in threads)
                out.flush()
                due += interval
                now = time.monotonic()
                if due < now:  # fell behind: skip the missed samples, never burst
                    due = now + interval
                while not stop and (left := due - time.monotonic()) > 0:
                    time.sleep(min(left, 0.05))
            for name, dso in sampler.dsos.items():
                out.write(f"#dso {name} {dso}\n")
    finally:
        sampler.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
