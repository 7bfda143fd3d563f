"""The interleaved design: the cells of one round and thread count run at once, taking turns.

Why: on this 2-vCPU VM most of a round's noise in a busy hour is the host's own speed, which
changes from one 15 s cell to the next; the sequential design puts that change between the two
sides of every pair. Here every server of a group (the round's cells of one thread count) is
started fresh on its own copy of the dataset, each with its own sysbench client, and the clients
take turns of `slice` seconds (the others stopped with SIGSTOP), so every second of host speed
falls on every variant alike. Measured with bench/interleave.py: the variance of a 10-minute
mean of A/A pairs was 0.09x [0.04-0.24] of the sequential design's in the same hour
(docs/methodology.md).

What a cell gets (docs/results-format.md, `design`): throughput from the server's own counters
(`Questions` less the sampler's statements, `Com_commit` as transactions; a workload without
COMMIT counts each statement as one), sampled at every turn's end and every second inside a
turn, over the seconds its client ran: sysbench's own clock and reports would count the stopped
time. So the per-second intervals are seconds of the client's running time (t = 1, 2, ...;
warm-up turns first), latency is that of the requests that started and ended within one turn
(run/turn_latency.py: sysbench runs the test through workloads/turns.lua; a request in flight at
a SIGSTOP would count the other servers' turns, so it is left out and counted in
`design.latency_spanned`), and `resources` count the server's and client's CPU and faults
during its own turns (the server's: the window's less its idle work; its context switches the
whole window's), and the machine's steal time in them (`steal_cpu_cores`, sampled).
`resources.idle_cpu_cores` is what the server used while its client was stopped (purge,
flushing, an allocator's background thread), sampled around the turns that end another seat's
second: work that lands in the other servers' turns; above IDLE_WARNING the row says so in
`design.warning`. Nothing is read between the other turns: reads there made the servers'
per-second QPS noisier (docs/methodology.md#nothing-read-between-turns).

    rows = run_group(runner, cells, snapshots, workdir)   # one committed row per cell
"""

from __future__ import annotations

import contextlib
import itertools
import resource
import shutil
import signal
import statistics
import threading
import time
from dataclasses import astuple
from pathlib import Path
from typing import Any

from perflab.analyze import steady
from perflab.errors import PerflabError, ServerCrashedError, WorkloadError
from perflab.run import allocator_proof, client, client_variant, dataset
from perflab.run.accounting import per_txn, server_resources
from perflab.run.builds import Build, BuildError
from perflab.run.cell import CellRunner, cpus_allowed, failure_fields, keep_logs, read_tail
from perflab.run.observers.alloc.tracer import AllocTracer
from perflab.run.observers.phases import MEASURED, WARMUP
from perflab.run.observers.resources import ProcCounters, RssSampler, machine_busy_s, machine_steal_s, process_cpu_s
from perflab.run.observers.seats import SeatObservers, SeatSpans
from perflab.run.observers.status import STATEMENTS, StatusError, StatusSampler
from perflab.run.observers.status import figures as status_figures
from perflab.run.prewarm import server_switches
from perflab.run.proc import Child
from perflab.run.turn_counts import ClientCounts
from perflab.run.turn_latency import WRAPPER, Histogram, TurnClock
from perflab.run.workloads import sysbench
from perflab.servers.managed import Managed
from perflab.spec import Cell
from perflab.units import utc_now

IDLE_WARNING = 0.05  # cores a paused server may use before its row warns (measured: see docs/methodology.md)
Point = tuple[int, float, dict[str, float]]  # (whole seconds of turns so far, seconds run, the counters)
WRITES = ("Com_insert", "Com_update", "Com_delete", "Com_replace", "Com_insert_select", "Com_replace_select")


class Seat:
    """One cell of a group: its row, its started server, its paused client, its counters."""

    def __init__(
        self,
        runner: CellRunner,
        cell: Cell,
        snapshot: dataset.Snapshot | None,
        workdir: Path,
        observers: SeatObservers | None = None,
    ) -> None:
        self.runner, self.cell, self.snapshot = runner, cell, snapshot
        self.row = runner.new_row(cell)
        self.workdir = workdir
        self.rundir = workdir / f"cell-{cell.order:04d}"
        self.observers = observers  # the group's [observe] perf and alloc (None: no observers)
        self.tracer: AllocTracer | None = None  # [observe] alloc: its server's counter
        self.logs = runner.results.log_dir(cell.order)
        self.server: Managed | None = None
        self.child: Child | None = None
        self.sampler: StatusSampler | ClientCounts | None = None
        self.error: PerflabError | None = None
        self.command: list[str] = []
        self.client_fields: dict[str, Any] = {}
        self.switches: dict[str, Any] = {}
        # counters at every turn's end and every second inside a turn: (nominal s, active s, values)
        self.points: list[Point] = []
        self.latency: list[Histogram] = []  # the client's latency histogram at each point (turn_latency)
        self.clock: TurnClock | None = None
        self.nominal = 0  # whole seconds of turns scheduled so far
        self.part_s = 0.0  # with turns under a second: the running second's turns so far
        self.active_s = 0.0  # seconds its client really ran
        self.server_start: ProcCounters | None = None  # its full counters at the window's start
        self.window_t0 = 0.0  # time.monotonic() then
        self.warmup_s = 0.0  # seconds its client ran before the window (its profiles' warm-up)
        # its server's CPU and faults while its client was stopped, sampled around the others'
        # turns that end a second of theirs, over idle_s seconds
        self.idle_used = ProcCounters.zero()
        self.idle_s = 0.0
        self.steal_s = self.steal_sampled_s = 0.0  # the machine's steal over its own sampled turns
        self.window_from = 0  # index in `points` where the measured window starts
        self.client_start: ProcCounters | None = None
        # what is committed with an ok row (set by _finish): per-second series, RSS and status samples
        self.series: list[dict[str, Any]] = []
        self.rss: list[tuple[float, int]] = []
        self.status_samples: list[tuple[float, dict[str, float]]] = []
        self.counted: dict[str, Any] = {}  # how its throughput was counted (design.counts)
        self.own_unsettled_reason: str | None = None  # settled only relative to its group (settle_relative)

    @property
    def live(self) -> bool:
        return self.error is None and self.server is not None and self.child is not None

    def open(self, seconds: int) -> None:
        """Restore, start the server, start its client for up to `seconds` and stop it once its
        threads have connected; the first sample. A failure is kept in `error`."""
        build = self.runner.build_for(self.cell)
        if isinstance(build, BuildError):
            self.error = PerflabError(build.message)
            self.row.update(log_tail=read_tail(build.log))
            return
        assert self.snapshot is not None and isinstance(build, Build)
        self.row["build"] = build.record()
        self.runner.check_space(self.snapshot, self.rundir.parent)
        self.rundir.mkdir()
        try:
            if self.observers is not None:
                self.tracer = self.runner._tracer(self.rundir, self.workdir)  # [observe] alloc, else None
        except PerflabError as exc:
            self.error = exc
            return
        server = self.runner.server_for(self.cell, self.snapshot, self.rundir, build, self.tracer)
        self.server = server
        try:
            restore_s = dataset.restore(self.snapshot, self.rundir / "data")
            started = time.monotonic()
            server.start()
            start_s = time.monotonic() - started
            proof = allocator_proof.prove(
                server.pid, self.cell.preload, server.preload, server.program, allocator_proof.glibc_of(build)
            )
            self.row["build"]["libc"] = proof.pop("libc")  # the C library it mapped
            self.row.update(proof)
            if self.tracer is not None:
                self.tracer.check_started(server.pid)
            self.switches = {
                "restore_s": round(restore_s, 3),
                "server_start_s": round(start_s, 3),
                **server_switches(self.cell, server, "sysbench", self.runner.kind),
            }
            self.row["pinning"]["server_cpus_allowed"] = cpus_allowed(server.pid)
            self.clock = TurnClock.create(self.rundir / "turns", self.cell.threads)
            # MariaDB: the full SHOW GLOBAL STATUS only when [observe] status asks for it (8
            # counters do otherwise); PostgreSQL: the client's own counts (run/turn_counts.py)
            lean = not self.runner.exp.file.observe.status
            self.sampler = self.runner.kind.turn_counters(server, self.clock, lean)
            self._start_client(seconds)
            self.sampler.start_clock()
            self.sample(0.0)
        except PerflabError as exc:
            self.error = exc

    def _start_client(self, seconds: int) -> None:
        spec, server = self.runner.exp.file, self.server
        assert server is not None and self.clock is not None
        self.command = sysbench.argv(
            str(WRAPPER),
            "run",
            socket=server.socket,
            tables=spec.dataset.tables,
            table_size=spec.dataset.table_size,
            threads=self.cell.threads,
            seconds=seconds,
            options={**spec.workload.options, **self.cell.workload_options},
            driver=self.runner.kind.sysbench_driver,
        )
        env = {**client_variant.environment(self.cell, server.rundir), **self.clock.environment(spec.workload.test)}
        self.child = client.start(self.command, self.logs / "sysbench.txt", None, env)
        watch = client.StartWatch(self.logs / "sysbench.txt", self.child, spec.experiment.timeout_margin)
        client_variant.wait_loaded(self.child.pid, self.cell, self.logs / "sysbench.txt")
        self.client_fields = client_variant.prove(self.child.pid, self.cell)
        watch.wait()
        self.pause()
        if self.child.poll() is not None:
            raise self._client_died()
        self.switches.update(self.runner.kind.clients_connected(server, self.cell))

    def cpu_s(self) -> dict[str, float | None]:
        """The cumulative CPU of its server (every process of it), client and status client, by
        name ("server 12345"); None for one that is gone."""
        out: dict[str, float | None] = {}
        if self.server is not None and self.server.child is not None:
            try:
                out[f"server {self.server.pid}"] = self.runner.kind.process_counters(self.server.pid).cpu_s
            except (FileNotFoundError, ProcessLookupError, IndexError):
                out[f"server {self.server.pid}"] = None
        for role, pid in (
            ("client", self.child.pid if self.child else None),
            ("status client", self.sampler and self.sampler.pid),
        ):
            if pid:
                out[f"{role} {pid}"] = process_cpu_s(pid)
        return out

    def pause(self) -> None:
        assert self.child is not None
        self.child.signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.child is not None
        if self.clock is not None:  # before SIGCONT: an event in flight since the last pause is "spanned"
            self.clock.advance()
        self.child.signal_group(signal.SIGCONT)

    def sample(self, active_s: float) -> None:
        """The server's counters now; a server that does not answer within timeout_margin fails
        the seat (its status client is killed, which ends the read)."""
        assert self.sampler is not None
        margin = self.runner.exp.file.experiment.timeout_margin
        watchdog = threading.Timer(margin, self.sampler.abort)
        watchdog.start()
        try:
            self.sampler.sample()
        except StatusError:
            if watchdog.is_alive():
                raise
            raise WorkloadError(
                f"timed out: the server did not answer SHOW GLOBAL STATUS within {margin:.0f} s",
                "a hung server; raise experiment.timeout_margin if the machine is just slow",
            ) from None
        finally:
            watchdog.cancel()
        self.points.append((self.nominal, active_s, self.sampler.samples[-1][1]))
        if self.clock is not None:
            self.latency.append(self.clock.read())

    def turn(self, seconds: float, others: list[Seat], measured: bool) -> None:
        """Its client runs `seconds` (whole, a sample every second; or a fraction of a second, a
        sample at the end of the turn that completes a second of its running time). Only a turn
        that ends with a sample reads /proc around it: the machine's steal and the others'
        servers' CPU while paused (their idle work), sampled once a second a seat; the turns in
        between do nothing but SIGCONT, sleep and SIGSTOP, as reads between 100 ms turns made the
        servers' QPS noisier (docs/methodology.md#nothing-read-between-turns). A dead client
        or server is noticed at that turn, within a second."""
        assert self.server is not None and self.child is not None
        closing = seconds >= 1 or self.part_s + seconds > 1 - 1e-6  # a sample follows this turn
        reads = closing and measured
        idle_before = {s: s.idle_counters() for s in others} if reads else {}
        steal = machine_steal_s() if reads else 0.0
        self.resume()
        t0 = time.monotonic()
        ran = 0.0  # seconds its client has run in this turn (to the pause, not to the sample after it)
        try:
            if seconds < 1:
                time.sleep(max(0.0, t0 + seconds - time.monotonic()))
                self.pause()
                ran = time.monotonic() - t0
                self.part_s = 0.0 if closing else self.part_s + seconds
                if closing:  # a second of turns is complete
                    self.nominal += 1
                    self.sample(self.active_s + ran)
            for k in range(1, int(seconds) + 1):
                time.sleep(max(0.0, t0 + k - time.monotonic()))
                if k == seconds:
                    self.pause()
                ran = time.monotonic() - t0
                self.nominal += 1
                self.sample(self.active_s + ran)
        finally:
            self.pause()  # a failed sample too: its client must not run in the others' turns
        self.active_s += ran
        if reads:
            self.steal_s += machine_steal_s() - steal
            self.steal_sampled_s += ran
            for seat, before in idle_before.items():
                after = seat.idle_counters()
                if before is not None and after is not None:
                    seat.idle_used = seat.idle_used.plus(after.minus(before))
                    seat.idle_s += ran
        if closing:
            self._server_counters()  # ServerCrashedError once it has died
            if self.child.poll() is not None:
                raise self._client_died()

    def idle_counters(self) -> ProcCounters | None:
        """Its server's CPU and faults now (None once it has gone: its own turn says why)."""
        try:
            return self._server_counters()
        except ServerCrashedError:
            return None

    def start_window(self) -> None:
        """Mark the measured window's start: its first point, the time, and the client's and the
        server's full counters (the server's use over its own turns is the window's less its idle
        work, `window_use`: nothing is read around each turn)."""
        assert self.child is not None
        self.window_from = len(self.points) - 1
        self.warmup_s = self.active_s
        try:
            self.client_start = ProcCounters.read(self.child.pid)
            self.server_start = self._server_counters(threads=True)
            self.window_t0 = time.monotonic()
        except (FileNotFoundError, ProcessLookupError):
            self.error = self._client_died()
        except PerflabError as exc:
            self.error = exc

    def window_use(self, own_s: float) -> ProcCounters | None:
        """The server's counters over its own `own_s` seconds of turns: the whole window's (read at
        its two ends) less its idle work while its client was stopped, at the rate sampled around
        the others' turns (`idle_used` over `idle_s`); its context switches are the whole
        window's. None when the server cannot be read."""
        if self.server_start is None:
            return None
        try:
            total = self._server_counters(threads=True).minus(self.server_start)
        except PerflabError:
            return None
        idle_s = max(0.0, time.monotonic() - self.window_t0 - own_s)
        idle = self.idle_used.scaled(idle_s / self.idle_s) if self.idle_s else ProcCounters.zero()
        # idle holds no context switches (sampled from /proc/PID/stat alone): the window's stay
        return ProcCounters(*(max(v, type(v)(0)) for v in astuple(total.minus(idle))))

    def _server_counters(self, threads: bool = False) -> ProcCounters:
        """The server's /proc counters (CPU and faults; with `threads`, its context switches
        too: never between turns, ProcCounters.read); ServerCrashedError once it has died."""
        assert self.server is not None
        try:
            if self.server.alive():
                return self.runner.kind.process_counters(self.server.pid, threads)
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
        raise ServerCrashedError(f"{self.server.death()} during the run:\n{self.server.error_lines()}")

    def _client_died(self) -> WorkloadError:
        assert self.child is not None
        code = self.child.poll()
        tail = "\n".join((self.logs / "sysbench.txt").read_text(errors="replace").strip().splitlines()[-10:])
        return WorkloadError(f"sysbench exited with code {code} during its turns:\n{tail}",
                             f"full output: {self.logs / 'sysbench.txt'}")  # fmt: skip

    def intervals(self, warmup: int) -> list[dict[str, Any]]:
        return intervals(self.points, warmup, self.sampler.statements if self.sampler else STATEMENTS, self.latency)

    def summary(self) -> dict[str, Any]:
        statements = self.sampler.statements if self.sampler else STATEMENTS
        return summary(self.points[self.window_from :], statements, self.latency[self.window_from :])

    def latency_spanned(self) -> float | None:
        """The share of the window's events left out of its latency: they spanned a pause."""
        if len(self.latency) <= self.window_from + 1:
            return None
        return (self.latency[-1] - self.latency[self.window_from]).spanned_share()

    def close(self) -> None:
        """Stop its client and server, keep the logs, free the copy of the dataset."""
        if self.child is not None:
            self.child.kill()
        if self.clock is not None:
            self.clock.close()
        if self.sampler is not None:
            self.sampler.close()
        if self.server is not None:
            self.server.stop()
            keep_logs(self.server, self.rundir, self.logs)
        shutil.rmtree(self.rundir, ignore_errors=True)


def intervals(
    points: list[Point], warmup: int, statements: int = STATEMENTS, latency: list[Histogram] | None = None
) -> list[dict[str, Any]]:
    """One interval per sampled second of running time, from the counters at its ends: `t` is
    the whole seconds of turns so far (1, 2, ...), the rates are over the seconds really run;
    p95_ms from the latency histograms at its ends (`latency`, one per point; None without)."""
    out = []
    hists = latency if latency is not None and len(latency) == len(points) else [None] * len(points)
    for ((_, a0, v0), (nominal, a1, v1)), (h0, h1) in zip(
        itertools.pairwise(points), itertools.pairwise(hists), strict=True
    ):
        seconds = a1 - a0
        if seconds <= 0:
            continue
        reads = _delta(v0, v1, "Com_select")
        writes = sum(_delta(v0, v1, k) for k in WRITES)
        queries = _delta(v0, v1, "Questions") - statements
        commits = _delta(v0, v1, "Com_commit")
        out.append({
            "t": float(nominal), "warmup": int(nominal <= warmup),
            "tps": round((commits or queries) / seconds, 2), "qps": round(queries / seconds, 2),
            "reads": round(reads / seconds, 2), "writes": round(writes / seconds, 2),
            "other": round(max(0.0, queries - reads - writes) / seconds, 2),
            "p95_ms": (h1 - h0).percentile(95) if h0 is not None and h1 is not None else None,
            "errors_per_s": None, "reconnects_per_s": None,
        })  # fmt: skip
    return out


def summary(
    points: list[Point], statements: int = STATEMENTS, latency: list[Histogram] | None = None
) -> dict[str, Any]:
    """The measured window's figures from its points, as sysbench's summary names them: the
    statements less the sampler's own, COMMITs as transactions (none: a statement is one);
    latency from the histograms at its first and last point (`latency`, one per point)."""
    (_, a0, first), (_, a1, last) = points[0], points[-1]
    seconds = a1 - a0
    queries = _delta(first, last, "Questions") - statements * (len(points) - 1)
    transactions = _delta(first, last, "Com_commit") or queries
    return {
        "transactions": int(transactions),
        "queries": int(queries),
        "tps": round(transactions / seconds, 2) if seconds > 0 else None,
        "qps": round(queries / seconds, 2) if seconds > 0 else None,
        "errors": None,
        "errors_per_s": None,
        "reconnects": None,
        "total_time_s": round(seconds, 3),
        "latency_ms": (latency[-1] - latency[0]).summary()
        if latency and len(latency) == len(points)
        else dict.fromkeys(("min", "avg", "max", "p50", "p95", "p99")),
    }


def _delta(v0: dict[str, float], v1: dict[str, float], name: str) -> float:
    return v1.get(name, 0.0) - v0.get(name, 0.0)


def run_group(
    runner: CellRunner, cells: list[Cell], snapshots: list[dataset.Snapshot | None], workdir: Path
) -> list[dict[str, Any]]:
    """Run `cells` (one round, one thread count) interleaved; commit and return their rows in
    the order given, which is also the order of the turns."""
    spec = runner.exp.file.experiment
    warmup, duration, slice_s = round(spec.window_start), round(spec.duration), spec.slice
    groupdir = workdir / f"group-{cells[0].order:04d}"  # the group's perf recording
    observers = SeatObservers(runner.exp.file.observe, groupdir)
    seats = [Seat(runner, cell, snap, workdir, observers) for cell, snap in zip(cells, snapshots, strict=True)]
    budget = 2 * len(seats) * (warmup + duration) + round(spec.timeout_margin)  # sysbench's own deadline
    try:
        for seat in seats:
            seat.open(budget)
        opened = [s for s in seats if s.live]
        if opened:
            _run_opened(opened, observers, warmup, duration, slice_s, spec.stall_threshold)
    finally:
        for seat in seats:
            seat.close()
        shutil.rmtree(groupdir, ignore_errors=True)
    return _commit(runner, seats, cells, slice_s)


def _run_opened(
    opened: list[Seat], observers: SeatObservers, warmup: int, duration: int, slice_s: float, threshold: float
) -> None:
    """The turns of the seats whose server and client started: the warm-up, the measured window
    (observed: RSS, perf and allocation counts per seat), then each seat's figures."""
    assert opened[0].server is not None
    with observers.recording(opened[0].server.pid):
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
            rss = {s: stack.enter_context(s.runner.kind.memory_sampler(s.server.pid)) for s in live if s.server}
            observers.window_started([(s.server.pid, s.rundir, s.tracer) for s in live if s.server is not None])
            try:
                _rotate(live, duration, slice_s, measured=True)
            finally:
                observers.window_ended()
        window_end = time.monotonic()
        other = mark.other_cores(live)
    for seat in live:
        if seat.live and seat.sampler is not None:
            try:  # the client's counts (PostgreSQL) get their queries from the run's queries per event
                seat.counted = seat.sampler.finish()
            except PerflabError as exc:
                seat.error = exc
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
    """A seat's profiles and `alloc` ([observe] perf and alloc, run/observers/seats.py) over its
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
            seat.runner.results, seat.cell.order, wall, {"server": seat.server.pid, "client": seat.child.pid},
            seat.tracer,
        )  # fmt: skip
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


def _finish(seat: Seat, warmup: int, rss: RssSampler, other: float | None) -> None:
    """A seat whose turns all ran: its summary, resources, steady state; status ok."""
    spec = seat.runner.exp.file
    summary = seat.summary()
    transactions = summary["transactions"]
    resources = server_resources(seat.window_use(summary["total_time_s"] or 0.0), transactions, rss)
    assert seat.child is not None and seat.client_start is not None
    try:
        client_used = ProcCounters.read(seat.child.pid).minus(seat.client_start)
    except (FileNotFoundError, ProcessLookupError):
        client_used = None
    client_cpu = round(client_used.cpu_s, 3) if client_used else None
    idle = round(seat.idle_used.cpu_s / seat.idle_s, 3) if seat.idle_s else None
    assert seat.server is not None
    resources.update(
        pss_end_bytes=seat.runner.kind.pss_bytes(seat.server), pss_peak_bytes=getattr(rss, "pss_peak", None)
    )
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
        sysbench_options=sysbench.effective_options(seat.runner.sysbench_defaults, seat.command),
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
