"""CPU accounting of a cell's measured window: what the server, the client, perflab itself
and its profilers used, and what everything else on the machine ran meanwhile.

Input: two marks, at the window's start and end, and the client's final rusage. Output:
the `resources` fields of a cell row, e.g. {"server_cpu_s": 19.8, "client_cpu_s": 6.1,
"harness_cpu_s": 0.021, "profiler_cpu_s": 0.0, "other_cpu_cores": 0.04, "steal_cpu_cores": 0.1, ...}.

    start = WindowStart.take(server_pid, client_pid); ...; end = WindowEnd.take(start, server_pid)
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perflab.places import RssSeries
from perflab.places.procfs import ProcCounters, process_cpu_s

from perflab.observers.resources import machine_busy_s, machine_steal_s

Reader = Callable[[int], ProcCounters]


@dataclass(frozen=True)
class WindowStart:
    server: ProcCounters
    own: resource.struct_rusage  # perflab's process, all its threads
    children: resource.struct_rusage  # perflab's reaped children
    busy_s: float  # the machine's busy CPU seconds
    client_s: float | None  # CPU the client had used before the window (its warm-up); None: it had ended
    at: float
    client: ProcCounters | None = None  # the client's counters before the window (None: it had ended)
    steal_s: float = 0.0  # the machine's steal time (the hypervisor's other guests)
    window: tuple[float, float] | None = None  # when the window began (time.monotonic()) and its seconds
    reading: float | None = None  # when these reads began (the server's first), time.monotonic()

    @classmethod
    def take(
        cls,
        server_pid: int,
        client_pid: int | None,
        read: Reader = ProcCounters.read,
        window: tuple[float, float] | None = None,
    ) -> WindowStart:
        """`read`: the server's counters (servers/postgresql/accounting.py sums a process tree);
        `client_pid` None: the client runs on another host (hosts/client.py), none of this machine's CPU.
        `window`: when the measured window began and its seconds (the client's transactions are its),
        so that counters read late cover only their share of those transactions (covered())."""
        reading = time.monotonic()
        server = read(server_pid)
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            client = ProcCounters.read(client_pid) if client_pid is not None else None
        except (FileNotFoundError, ProcessLookupError, IndexError):
            client = None
        client_s = process_cpu_s(client_pid) if client_pid is not None else None
        busy, at, steal = machine_busy_s(), time.monotonic(), machine_steal_s()
        return cls(server, own, children, busy, client_s, at, client, steal, window, reading)

    @property
    def late_s(self) -> float | None:
        """How long after the window began its counters were read (None: not known): when the reads
        began (the server's counters first; on a loaded machine reading a server's threads takes tens
        of ms, not lateness), else when they ended."""
        if self.window is None:
            return None
        return max(0.0, (self.reading if self.reading is not None else self.at) - self.window[0])

    def covered(self, transactions: float) -> float:
        """The window's `transactions` that counters read now cover: all of them, unless they were read
        more than LATE_SHARE of the window late (perflab starved or paused: on a loaded CI machine, a
        2 s window's counters were read about 1.9 s late), then the share of the window left (the
        window's rate taken as even, as a profile's seen share is: observers/phases.py)."""
        late = None if self.late_s is None else round(self.late_s, 3)  # as `window_start_late_s` says it
        if late is None or self.window is None or self.window[1] <= 0 or late <= LATE_SHARE * self.window[1]:
            return transactions
        return transactions * max(0.0, self.window[1] - late) / self.window[1]


LATE_SHARE = 0.01  # counters read later than this share of the window cover fewer of its transactions


def share(
    transactions: float,
    window: tuple[float, float],
    span: tuple[float, float] | None,
    runs_on: bool = False,
    done: Callable[[float, float], float] | None = None,
) -> float:
    """The window's `transactions` (over `window`, time.monotonic()) that counts over `span` cover:
    all of them, unless the span starts more than LATE_SHARE of the window late or ends that much
    early, then the share of the window's transactions it overlaps: by `done(x, y)`, the client's
    own count of transactions between two instants (its per-second reports), else the rate taken as
    even (WindowStart.covered). Even is wrong after a pause of the whole VM: nothing ran in it, so a
    span that opened after a 1.2 s pause in a 4 s window covers all of the window's transactions, not
    70% (CI: the sort buffer counted 1.34 times a transaction).
    A server host's [observe] alloc opens its counts a round trip after the window began, on a loaded
    machine tenths of a second. A span past the window's end counts what the client did not do when it
    ended with the window (sysbench); `runs_on`: it ran on (pgbench, until it is told to end after the
    end mark), and the counts, which end a round trip or two after the mark (the sampling stopped, then
    the counts read there), count its transactions of those seconds too, at the window's rate: a
    PostgreSQL backend's one malloc a transaction came out 1.065 over a 2 s window without them."""
    a, b = window
    if span is None or b <= a:
        return transactions
    end = span[1] if runs_on else min(b, span[1])
    slack = LATE_SHARE * (b - a)
    if span[0] - a <= slack and abs(b - end) <= slack:
        return transactions
    x, y = max(a, span[0]), min(b, end)
    whole = done(a, b) if done is not None else 0.0
    if y <= x:
        inside = 0.0
    elif done is not None and whole > 0:
        inside = done(x, y) / whole
    else:
        inside = (y - x) / (b - a)
    past = max(0.0, end - max(b, span[0])) / (b - a)  # ran on past the window: at its rate
    return round(transactions * (inside + past), 1)


@dataclass(frozen=True)
class WindowEnd:
    server: ProcCounters  # the server's use over the window
    own_s: float
    children_s: float  # sysbench and the profilers, reaped during the window
    busy_s: float
    window_s: float
    # the client's CPU at the window's end when it still runs then (pgbench's tail, run/window.py);
    # None: it ended with the window (or before its end, and was reaped), and its rusage at exit is the end
    client_s: float | None = None
    steal_s: float = 0.0

    @classmethod
    def take(
        cls, start: WindowStart, server_pid: int, read: Reader = ProcCounters.read, client_pid: int | None = None
    ) -> WindowEnd:
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        server = read(server_pid).minus(start.server)
        busy, window = machine_busy_s() - start.busy_s, time.monotonic() - start.at
        client = process_cpu_s(client_pid) if client_pid is not None else None
        own_s, children_s = _cpu_s(own) - _cpu_s(start.own), _cpu_s(children) - _cpu_s(start.children)
        return cls(server, own_s, children_s, busy, window, client, machine_steal_s() - start.steal_s)


def _cpu_s(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def resources(
    start: WindowStart, end: WindowEnd, client: resource.struct_rusage | None, transactions: float, rss: RssSeries
) -> dict[str, Any]:
    """The `resources` fields of a cell row; per transaction over the transactions the counters
    cover (WindowStart.covered), `window_start_late_s` saying how late they were read."""
    out = server_resources(end.server, start.covered(transactions), rss)
    out["window_start_late_s"] = None if start.late_s is None else round(start.late_s, 3)
    out["client_cpu_s"] = round(_cpu_s(client), 3) if client else None
    out["client_user_s"] = round(client.ru_utime, 3) if client else None
    out["client_sys_s"] = round(client.ru_stime, 3) if client else None
    out["harness_cpu_s"] = round(end.own_s, 4)
    # Everything else the machine ran during the window, in cores: a benchmark on a busy
    # machine measures the neighbours too.
    client_window, reaped_client = _client_window(start, end, client)
    out["profiler_cpu_s"] = round(max(0.0, end.children_s - reaped_client), 3)
    if client_window is None:  # not 0: the client's CPU would be counted as other processes'
        out["other_cpu_cores"] = None
        out["missing"] = {"other_cpu_cores": CLIENT_UNKNOWN}
    else:
        ours = end.server.cpu_s + client_window + out["harness_cpu_s"] + out["profiler_cpu_s"]
        out["other_cpu_cores"] = round(max(0.0, end.busy_s - ours) / end.window_s, 3) if end.window_s > 0 else None
    # CPU the hypervisor gave other guests while ours wanted it: the host's share of the noise
    out["steal_cpu_cores"] = round(end.steal_s / end.window_s, 3) if end.window_s > 0 else None
    return out


CLIENT_UNKNOWN = "the client's CPU at its exit is unknown (it ended but was not reaped, so it has no rusage)"


def _client_window(
    start: WindowStart, end: WindowEnd, client: resource.struct_rusage | None
) -> tuple[float | None, float]:
    """The client's CPU over the window (None: unknown), and how much of its CPU the window's
    children_s holds (a client reaped inside the window)."""
    if start.client_s is None:  # it had ended (and been reaped) before the window: none of its CPU is in it
        return 0.0, 0.0
    if end.client_s is not None:  # still running at the window's end: not reaped, not in children_s
        return end.client_s - start.client_s, 0.0
    if client is None:
        return None, 0.0
    # it has exited, so its rusage is final: its total less what it had used at the window's start
    return _cpu_s(client) - start.client_s, _cpu_s(client)


def per_txn(transactions: float) -> Any:
    """n -> n per transaction (rounded), or None without transactions."""
    return (lambda n: round(n / transactions, 4)) if transactions else (lambda n: None)


def client_resources(
    start: WindowStart, usage: resource.struct_rusage | None, transactions: float, rss: RssSeries
) -> dict[str, Any]:
    """The client's share of a cell row's `client` fields over the window: its counters at exit
    (rusage) less those at the window start; RSS sampled like the server's (the last sample
    before it exited), peak from its rusage too."""
    if usage is None or start.client is None:
        return {"rss_end_bytes": rss.end, "minor_faults_per_txn": None, "ctx_switches_per_txn": None}
    used = ProcCounters.of_rusage(usage).minus(start.client)
    per = per_txn(start.covered(transactions))
    return {
        "rss_end_bytes": rss.end,
        "rss_peak_bytes": max(rss.peak or 0, usage.ru_maxrss * 1024),  # ru_maxrss is in KiB
        "minor_faults": used.minor_faults,
        "major_faults": used.major_faults,
        "voluntary_ctx_switches": used.voluntary_ctx,
        "involuntary_ctx_switches": used.involuntary_ctx,
        "minor_faults_per_txn": per(used.minor_faults),
        "ctx_switches_per_txn": per(used.voluntary_ctx + used.involuntary_ctx),
        "cpu_us_per_txn": per(used.cpu_s * 1e6),
    }


def server_resources(used: ProcCounters | None, transactions: float, rss: RssSeries) -> dict[str, Any]:
    """The server's `resources` fields; `used` None (its counters could not be read at the
    window's end): the counter fields are null, not 0."""
    if used is None:
        zero = server_resources(ProcCounters.zero(), transactions, rss)
        return {k: v if k.startswith("rss_") else None for k, v in zero.items()}
    per = per_txn(transactions)
    # a process tree (PostgreSQL's) whose member exited inside the window took its context
    # switches with it (the kernel keeps no children's sum of them): fewer at the end than at the
    # start is such a loss, and the figure unknown, not negative
    lost = used.voluntary_ctx < 0 or used.involuntary_ctx < 0
    switches = {
        "voluntary_ctx_switches": None if lost else used.voluntary_ctx,
        "involuntary_ctx_switches": None if lost else used.involuntary_ctx,
        "ctx_switches_per_txn": None if lost else per(used.voluntary_ctx + used.involuntary_ctx),
    }
    return {
        "rss_end_bytes": rss.end,
        "rss_peak_bytes": rss.peak,
        "server_cpu_s": round(used.cpu_s, 3),
        "server_user_s": round(used.user_s, 3),
        "server_sys_s": round(used.sys_s, 3),
        "minor_faults": used.minor_faults,
        "major_faults": used.major_faults,
        "minor_faults_per_txn": per(used.minor_faults),
        "major_faults_per_txn": per(used.major_faults),
        **switches,
        "server_cpu_us_per_txn": per(used.cpu_s * 1e6),
    }
