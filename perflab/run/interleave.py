"""The interleaved design: the cells of one round and thread count run at once, taking turns.

Why: on this 2-vCPU VM most of a round's noise in a busy hour is the host's own speed, which
changes from one 15 s cell to the next; the sequential design puts that change between the two
sides of every pair. Here every server of a group (the round's cells of one thread count) is
started fresh on its own copy of the dataset, each with its own client (sysbench or pgbench), and the clients
take turns of `slice` seconds (the others stopped with SIGSTOP), so every second of host speed
falls on every variant alike. Measured with bench/interleave.py: the variance of a 10-minute
mean of A/A pairs was 0.09x [0.04-0.24] of the sequential design's in the same hour
(docs/methodology.md).

What a cell gets (docs/results-format.md, `design`): throughput from the server's own counters
(`Questions` less the sampler's statements, `Com_commit` as transactions; a workload without
COMMIT counts each statement as one) on MariaDB; on PostgreSQL from the client (sysbench's
wrapper, workloads/turn_counts.py; pgbench's per-transaction log, workloads/turn_log.py), sampled at every turn's end and every second inside a
turn, over the seconds its client ran: sysbench's own clock and reports would count the stopped
time. So the per-second intervals are seconds of the client's running time (t = 1, 2, ...;
warm-up turns first), latency is that of the requests that started and ended within one turn
(workloads/turn_latency.py: sysbench runs the test through workloads/turns.lua; pgbench's log has
each transaction's end and latency, workloads/turn_log.py; a request in flight at
a SIGSTOP would count the other servers' turns, so it is left out and counted in
`design.latency_spanned`), and `resources` count the server's and client's CPU and faults
during its own turns (the server's: the window's less its idle work; its context switches the
whole window's), and the machine's steal time in them (`steal_cpu_cores`, sampled).
`resources.idle_cpu_cores` is what the server used while its client was stopped (purge,
flushing, an allocator's background thread), sampled around the turns that end another seat's
second: work that lands in the other servers' turns; above IDLE_WARNING the row says so in
`design.warning`. Nothing is read between the other turns: reads there made the servers'
per-second QPS noisier (docs/methodology.md#nothing-read-between-turns).

One seat (its server, paused client and turns) is run/seat.py; its counters become intervals and
a summary in run/turn_series.py.

    rows = run_group(runner, cells, snapshots, workdir)   # one committed row per cell
"""

from __future__ import annotations

import contextlib
import resource
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from perflab.analyze import steady
from perflab.errors import PerflabError
from perflab.servers import dataset
from perflab.run.accounting import per_txn, server_resources
from perflab.run.cell import CellRunner
from perflab.observers.phases import MEASURED, WARMUP
from perflab.places import RssSeries
from perflab.observers.resources import machine_busy_s
from perflab.observers.seats import SeatObservers, SeatSpans
from perflab.observers.status import STATEMENTS
from perflab.observers.status import figures as status_figures
from perflab.run.seat import Seat
from perflab.run.server_logs import failure_fields
from perflab.run.turn_series import summary
from perflab.spec.matrix import Cell
from perflab.units import utc_now

IDLE_WARNING = 0.05  # cores a paused server may use before its row warns (measured: see docs/methodology.md)


def run_group(
    runner: CellRunner, cells: list[Cell], snapshots: list[dataset.Snapshot | None], workdir: Path
) -> list[dict[str, Any]]:
    """Run `cells` (one round, one thread count) interleaved; commit and return their rows in
    the order given, which is also the order of the turns."""
    spec = runner.exp.file.experiment
    warmup, duration, slice_s = round(spec.window_start), round(spec.duration), spec.slice
    groupdir = workdir / f"group-{cells[0].order:04d}"  # the group's perf recording
    site, tree = runner.stage().recording(groupdir), runner.kind.profiles_tree
    # the clients' perf where they run, when that is not where the servers run (a recording of their own)
    clients = runner.client_end(cells[0]).recording(workdir / f"clients-{cells[0].order:04d}")
    observers = SeatObservers(
        runner.exp.file.observe, groupdir, site, tree, clients if clients.place.name != site.place.name else None
    )
    seats = [Seat(runner, cell, snap, workdir, observers) for cell, snap in zip(cells, snapshots, strict=True)]
    budget = 2 * len(seats) * (warmup + duration) + round(spec.timeout_margin)  # the client's own deadline
    try:
        for seat in seats:
            seat.open(budget)
        opened = [s for s in seats if s.live]
        if opened:
            _run_opened(opened, observers, warmup, duration, slice_s, spec.stall_threshold)
    finally:
        for seat in seats:
            seat.close()
        observers.remove()
        shutil.rmtree(groupdir, ignore_errors=True)
    return _commit(runner, seats, cells, slice_s)


def _run_opened(
    opened: list[Seat], observers: SeatObservers, warmup: int, duration: int, slice_s: float, threshold: float
) -> None:
    """The turns of the seats whose server and client started: the warm-up, the measured window
    (observed: RSS, perf and allocation counts per seat), then each seat's figures."""
    assert opened[0].server is not None
    with observers.recording(opened[0].server.pid, opened[0].client_pid):
        observers.arm([(s.server.pid, s.rundir, s.tracer) for s in opened if s.server is not None])
        observers.warmup_started()
        started = time.monotonic()
        _rotate(opened, warmup, slice_s, measured=False)
        for seat in opened:
            if seat.live:
                seat.start_window()
        live = [s for s in opened if s.live]
        mark = _Mark.take(live)
        window_t0 = time.monotonic()
        with contextlib.ExitStack() as stack:
            rss = {
                s: stack.enter_context(s.runner.kind.memory_sampler(s.runner.server_place, s.server.pid))
                for s in live
                if s.server
            }
            observers.window_started([(s.server.pid, s.rundir, s.tracer) for s in live if s.server is not None])
            try:
                _rotate(live, duration, slice_s, measured=True)
            finally:
                observers.window_ended()
        window_end = time.monotonic()
        other = mark.other_cores(live)
    for seat in live:
        if seat.live:  # the client's counts (PostgreSQL): their queries per event, pgbench's log
            seat.finish_counts()
        if seat.live:
            _observed(seat, SeatSpans(workload=started, window=window_t0, end=window_end))
        if seat.live:
            _finish(seat, warmup, rss[seat], other)
            if other is None and mark.missing:
                seat.row["resources"]["missing"] = {"other_cpu_cores": mark.missing}
    settle_relative([s for s in live if s.live], warmup, threshold)


def _commit(runner: CellRunner, seats: list[Seat], cells: list[Cell], slice_s: float) -> list[dict[str, Any]]:
    """Commit every seat's row (ok or failed) and return them in the seats' order."""
    rows = []
    for seat in seats:
        if seat.error is not None:
            seat.row.update(failure_fields(seat.error, seat.server) if seat.server else {"error": seat.error.message})
        seat.row["ended_at"] = utc_now()
        seat.row["design"] = _design_fields(seat, cells, slice_s)
        rows.append(seat.row)
    # one transaction: the group's cells pair only with each other, so a run killed while they
    # are stored resumes the whole group, never a lone cell beside one that ran at another time
    runner.results.commit_cells([(s.row, s.series, s.rss, s.status_samples) for s in seats])
    return rows


def _observed(seat: Seat, wall: SeatSpans) -> None:
    """A seat's profiles and `alloc` ([observe] perf and alloc, observers/seats.py) over its
    own seconds and transactions in the warm-up and the window; a profile that cannot be trusted
    fails the seat."""
    if seat.observers is None or (seat.runner.exp.file.observe.perf is None and seat.tracer is None):
        return
    assert seat.server is not None and seat.child is not None
    statements = seat.sampler.statements if seat.sampler else STATEMENTS
    window = summary(seat.points[seat.window_from :], statements)
    warm = summary(seat.points[: seat.window_from + 1], statements) if seat.window_from > 0 else None
    wall.own = {
        MEASURED: (window["total_time_s"], window["transactions"]),
        WARMUP: (warm["total_time_s"], warm["transactions"]) if warm else (0.0, 0.0),
    }
    wall.window_transactions = window["transactions"]
    try:
        fields = seat.observers.store(
            seat.runner.results,
            seat.cell.order,
            wall,
            {"server": seat.server.pid, "client": seat.client_pid or seat.child.pid},
            seat.tracer,
        )
    except PerflabError as exc:
        seat.error = exc
        return
    seat.row.update(fields)


def settle_relative(seats: list[Seat], warmup: int, threshold: float) -> None:
    """A seat whose own series did not settle is judged again relative to the others of its
    group: its per-second QPS over theirs in the same second of turns. The host's speed falls on
    every server of the group alike (that is what the design is for), so a change in it, which
    moved the seat's own series (a window that "climbs" while the host sped up), cancels in the
    ratio; what remains is the seat's own warm-up. Settled that way, the seat counts, and its row
    keeps its own series' reason in `design.own_unsettled_reason`. A warm-up that every server of
    the group shares also cancels: it cancels in the within-round ratios the verdicts use too
    (docs/methodology.md#unsettled-under-the-interleaved-design)."""
    ok = [s for s in seats if s.row.get("status") == "ok" and s.series]
    for seat in ok:
        others = [s for s in ok if s is not seat]
        if seat.row.get("settled") is not False or not others:
            continue
        relative = relative_series(seat.series, [s.series for s in others])
        if len(relative) < len(seat.series) // 2:
            continue
        state = steady.detect(relative, float(warmup), threshold)
        if state.settled:
            seat.own_unsettled_reason = seat.row.get("unsettled_reason")
            seat.row.update(settled=True, unsettled_reason=None)


def relative_series(own: list[dict[str, Any]], others: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """`own`'s per-second QPS over the mean of the others' in the same second of turns (t), where
    every other seat has that second, scaled back to `own`'s mean (the detection's figures stay QPS)."""
    peers = [{iv["t"]: iv["qps"] for iv in series if iv.get("qps")} for series in others]
    kept = [
        (iv, [p[iv["t"]] for p in peers])
        for iv in own
        if iv.get("qps") is not None and all(iv["t"] in p for p in peers)
    ]
    ratios = [iv["qps"] * len(found) / sum(found) for iv, found in kept]
    if not ratios:
        return []
    scale = statistics.fmean(iv["qps"] for iv in own if iv.get("qps")) / statistics.fmean(ratios)
    return [{**iv, "qps": r * scale} for (iv, _), r in zip(kept, ratios)]


def _rotate(seats: list[Seat], seconds: int, slice_s: float, measured: bool) -> None:
    """Every seat's client runs `seconds` in turns of up to `slice_s` (whole seconds, or 1/k of
    a second), in the seats' order; a seat that fails leaves the rotation (its error kept), the
    others go on."""
    per_second = round(1 / slice_s) if slice_s < 1 else 1  # turns under a second: k of them a second
    step = round(slice_s) * per_second if slice_s >= 1 else 1  # in units of 1/per_second s
    left = {seat: seconds * per_second for seat in seats}
    while any(left[s] > 0 and s.live for s in seats):
        for seat in seats:
            if left[seat] <= 0 or not seat.live:
                continue
            run = min(step, left[seat])
            try:
                seat.turn(run / per_second, [s for s in seats if s is not seat and s.live], measured)
            except PerflabError as exc:
                seat.error = exc
            left[seat] -= run


class _Mark:
    """The machine's busy CPU and ours at the window's start: other_cpu_cores of the group.

    Ours is each seat's server (all its processes: PostgreSQL's backends, and those it reaped),
    client and status client, cumulative CPU read at both ends: a process that is gone at the end
    (a seat's server or client that ended and was reaped) cannot be read, and counting it as 0
    would subtract all it had used before the window and show it as other processes' CPU (a
    false "busy machine"). The figure is then missing, and `missing` says why."""

    def __init__(self, busy: float, ours: dict[str, float | None], own: float, at: float) -> None:
        self.busy, self.ours, self.own, self.at = busy, ours, own, at
        self.missing: str | None = None

    @staticmethod
    def _ours(seats: list[Seat]) -> dict[str, float | None]:
        return {name: cpu for seat in seats for name, cpu in seat.cpu_s().items()}

    @staticmethod
    def _own() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    @classmethod
    def take(cls, seats: list[Seat]) -> _Mark:
        return cls(machine_busy_s(), cls._ours(seats), cls._own(), time.monotonic())

    def other_cores(self, seats: list[Seat]) -> float | None:
        window = time.monotonic() - self.at
        now = self._ours(seats)
        now.update(dict.fromkeys(self.ours.keys() - now.keys()))  # a seat that let go of one: gone
        gone = [name for name, had in self.ours.items() if had is not None and now[name] is None]
        if gone:
            self.missing = f"{', '.join(gone)} of the group ended during the window: their CPU is unknown"
            return None
        # a process gone at the start used nothing in the window; one started inside it, all it used
        ours = sum(cpu - (self.ours.get(name) or 0.0) for name, cpu in now.items() if cpu is not None)
        ours += self._own() - self.own
        return round(max(0.0, machine_busy_s() - self.busy - ours) / window, 3) if window > 0 else None


def _finish(seat: Seat, warmup: int, rss: RssSeries, other: float | None) -> None:
    """A seat whose turns all ran: its summary, resources, steady state; status ok."""
    spec = seat.runner.exp.file
    summary = seat.summary()
    transactions = summary["transactions"]
    resources = server_resources(seat.window_use(summary["total_time_s"] or 0.0), transactions, rss)
    assert seat.child is not None and seat.client_start is not None
    try:
        client_now = seat.client_end if seat.client_end is not None else seat.end.counters(seat.child)
        client_used = client_now.minus(seat.client_start)
    except (FileNotFoundError, ProcessLookupError):
        client_used = None
    client_cpu = round(client_used.cpu_s, 3) if client_used else None
    idle = round(seat.idle_used.cpu_s / seat.idle_s, 3) if seat.idle_s else None
    assert seat.server is not None
    end, peak = seat.stage.pss_bytes(seat.server), None
    if hasattr(rss, "pss_peak"):  # a tree's sampler: the largest of its reads (a second or more apart) and the end's
        peak = max((v for v in (end, rss.pss_peak) if v is not None), default=None)
    resources.update(pss_end_bytes=end, pss_peak_bytes=peak)
    resources.update(
        client_cpu_s=client_cpu,
        client_user_s=round(client_used.user_s, 3) if client_used else None,
        client_sys_s=round(client_used.sys_s, 3) if client_used else None,
        harness_cpu_s=None,  # one perflab process drives the whole group: in other_cpu_cores' accounting
        profiler_cpu_s=0.0,
        other_cpu_cores=other,
        steal_cpu_cores=round(seat.steal_s / seat.steal_sampled_s, 3) if seat.steal_sampled_s else None,
        idle_cpu_cores=idle,
        **seat.switches,
    )
    per = per_txn(transactions)
    seat.end.versions(seat.client_fields)  # after the window: dpkg takes seconds on a busy machine
    address = seat.stage.client_address(seat.server)  # the server's on its host, as a sequential row's
    if address is not None:
        seat.client_fields["address"] = address
    seat.client_fields.update(
        rss_end_bytes=None,
        cpu_us_per_txn=per(client_cpu * 1e6) if client_cpu is not None else None,
        minor_faults_per_txn=per(client_used.minor_faults) if client_used else None,
        ctx_switches_per_txn=per(client_used.voluntary_ctx + client_used.involuntary_ctx) if client_used else None,
    )
    seat.row.update(
        status="ok",
        summary=summary,
        resources=resources,
        sysbench_options=seat.workload.effective_options(seat.runner.exp.file, seat.command),
        client=seat.client_fields,
    )
    seat.rss, seat.series = rss.samples, seat.intervals(warmup)
    if spec.observe.status and seat.sampler is not None:
        seat.status_samples = _window_samples(seat)
        figures = status_figures(seat.status_samples, seat.sampler.gauges, transactions, summary["queries"])
        seat.row["server_status"] = figures
    seat.row.update(steady.cell_fields(seat.series, float(warmup), summary["qps"], spec.experiment.stall_threshold))


def _window_samples(seat: Seat) -> list[tuple[float, dict[str, float]]]:
    """The status samples of the measured window, timed from its start (wall seconds)."""
    if seat.sampler is None:
        return []
    samples = seat.sampler.samples[seat.window_from :]
    t0 = samples[0][0] if samples else 0.0
    return [(round(t - t0, 3), v) for t, v in samples]


def _design_fields(seat: Seat, cells: list[Cell], slice_s: float) -> dict[str, Any]:
    """The row's `design`: how it ran, beside which cells, and the paused server's own work."""
    idle = (seat.row.get("resources") or {}).get("idle_cpu_cores")
    fields: dict[str, Any] = {
        "name": "interleaved",
        "slice_s": slice_s,
        "group": [c.order for c in cells],
        "turn": cells.index(seat.cell),
        "active_s": round(seat.active_s, 3),
        "latency_spanned": seat.latency_spanned(),
    }
    if seat.counted:
        fields["counts"] = seat.counted
    fields["warning"] = idle_warning(idle)
    if seat.own_unsettled_reason:
        fields["own_unsettled_reason"] = seat.own_unsettled_reason
    return fields


def idle_warning(idle: float | None) -> str | None:
    """What a row says of a server that worked while its client was stopped (None: it did not)."""
    if idle is None or idle <= IDLE_WARNING:
        return None
    return (
        f"the server used {idle:.2f} cores while its client was stopped: work that lands in the other "
        "variants' turns (purge, flushing, an allocator's background thread); compare with design = sequential"
    )
