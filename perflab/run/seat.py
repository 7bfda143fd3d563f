"""One seat of the interleaved design (run/interleave.py): a cell's started server, its paused
client (the workload's `seat_client`) and the counters at every turn's end and every second
inside a turn: the server's, sysbench's wrapper's, or pgbench's log's (workloads/turn_log.py).

A seat opens (restore, start, start the client and stop it once connected), takes turns
(`Seat.turn`: SIGCONT, sleep, SIGSTOP, a sample once a second of its running time), marks its
measured window and reports its server's use over its own turns (`Seat.window_use`).

    seat = Seat(runner, cell, snapshot, workdir, observers); seat.open(budget); seat.turn(0.25, others, True)
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import astuple
from pathlib import Path
from typing import Any

from perflab.errors import PerflabError, ServerCrashedError, WorkloadError
from perflab import workloads
from perflab.servers import dataset
from perflab.builds import Build, BuildError
from perflab.run.cell import CellRunner
from perflab.observers.alloc.tracer import AllocTracer
from perflab.places.here import HERE
from perflab.places.procfs import ProcCounters, process_cpu_s
from perflab.observers.resources import machine_steal_s
from perflab.observers.seats import SeatObservers
from perflab.observers.status import SELECTS, STATEMENTS, StatusError, StatusSampler
from perflab.run.prewarm import server_switches
from perflab.places.proc import Child
from perflab.places.proc import read_tail
from perflab.workloads.turn_counts import ClientCounts
from perflab.workloads.turn_latency import Histogram, TurnClock
from perflab.hosts.turns import HostTurns
from perflab.run.ends import Turns
from perflab.run.turn_series import Point, intervals, summary
from perflab.servers.managed import Managed
from perflab.spec.matrix import Cell


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
        self.workload = workloads.of(runner.exp.file)
        self.out = self.logs / self.workload.output_name  # its client's output
        self.stage = runner.stage()  # where its server runs: here, or the server host (run/stage.py)
        self.end = runner.client_end(cell)  # where its client runs: here, or its client host (run/ends.py)
        self.password = self.end.password  # a server or a client on a host: the run's login
        self.login: dict[str, str] | None = None  # the client's and sampler's login there (Kind.remote_login)
        self.server: Managed | None = None
        self.child: Child | None = None
        self.client_pid: int | None = None  # its client's pid where it runs, once it has connected
        self.sampler: StatusSampler | ClientCounts | None = None
        self.error: PerflabError | None = None
        self.command: list[str] = []
        self.client_fields: dict[str, Any] = {}
        self.switches: dict[str, Any] = {}
        # counters at every turn's end and every second inside a turn: (nominal s, active s, values)
        self.points: list[Point] = []
        self.latency: list[Histogram] = []  # the client's latency histogram at each point (turn_latency)
        self.spans: list[list[float]] = []  # its client's runs: [epoch before SIGCONT, after SIGSTOP]
        self.clock: TurnClock | HostTurns | None = None
        self.turns: Turns | HostTurns | None = None  # its client's pause and resume (the end's)
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
        self.client_end: ProcCounters | None = None  # read before a client that must end (pgbench) ends
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
        stage = self.stage  # the cell's server: the same steps as CellRunner.run's (run/stage.py)
        stage.check(self.snapshot, self.rundir.parent)
        self.rundir.mkdir()
        try:
            if self.observers is not None:
                self.tracer = stage.tracer(self.rundir, self.workdir)  # [observe] alloc, else None
        except PerflabError as exc:
            self.error = exc
            return
        server = stage.server(self.cell, self.snapshot, self.rundir, build, self.tracer)
        self.server = server
        self.row["build"] = stage.build_record(build, server)
        try:
            restore_s, restore_method = stage.restore(self.snapshot, server, self.workdir)
            started = time.monotonic()
            server.start()
            start_s = time.monotonic() - started
            stage.prove(server, self.cell, build, self.row, self.tracer)  # allocator, libc, pinning
            self.switches = {
                "restore_s": round(restore_s, 3),
                "restore_method": restore_method,
                "server_start_s": round(start_s, 3),
                **server_switches(self.cell, server, self.workload.name, self.runner.kind),
            }
            if self.password is not None:  # over TCP, its password in files only their owner reads
                self.login = self.runner.kind.remote_login(server, self.password)
            if self.workload.turn_clock:
                self.clock = self.end.turn_clock(self.rundir, self.cell.threads)
            # MariaDB: the full SHOW GLOBAL STATUS only when [observe] status asks for it (8
            # counters do otherwise); PostgreSQL: the client's own counts (workloads/turn_counts.py,
            # pgbench's log: workloads/turn_log.py)
            lean = not self.runner.exp.file.observe.status
            own = self.workload.seat_counts(self)
            self.sampler = own or stage.turn_counters(server, self.clock, lean, self.password)
            self._start_client(seconds)
            self.sampler.start_clock()
            self.sample(0.0)
        except PerflabError as exc:
            self.error = exc

    def _start_client(self, seconds: int) -> None:
        assert self.server is not None
        self.spans.append([time.time(), math.inf])  # it runs from its launch to the first pause
        self.workload.seat_client(self, seconds)  # connected
        assert self.child is not None  # started by seat_client
        self.turns = self.end.turns(self.child, self.clock)
        self.client_pid = self.end.profiled_pid(self.child)  # where it runs (perf there folds it)
        self.pause()
        if self.child.poll() is not None:
            raise self._client_died()
        self.switches.update(self.stage.clients_connected(self.server, self.cell))

    def cpu_s(self) -> dict[str, float | None]:
        """The cumulative CPU of its server (every process of it), client and status client, by
        name ("server 12345"); None for one that is gone."""
        out: dict[str, float | None] = {}
        server = self.stage.pid(self.server) if self.server is not None and self.server.child is not None else None
        if server is not None:  # this machine's processes only (on a host, they use that one's CPU)
            try:
                out[f"server {server}"] = self.runner.kind.process_counters(HERE, server).cpu_s
            except (FileNotFoundError, ProcessLookupError, IndexError):
                out[f"server {server}"] = None
        for role, pid in (
            ("client", self.end.pid(self.child) if self.child else None),
            ("status client", self.sampler and self.sampler.pid),
        ):
            if pid:
                out[f"{role} {pid}"] = process_cpu_s(pid)
        return out

    def pause(self) -> None:
        assert self.turns is not None
        self.turns.pause()
        if self.spans and self.spans[-1][1] == math.inf:
            self.spans[-1][1] = time.time()

    def resume(self) -> None:
        assert self.turns is not None
        self.spans.append([time.time(), math.inf])
        self.turns.resume()  # its clock's turn written first: an event in flight since the last pause is "spanned"

    def finish_counts(self) -> None:
        """After the window: the client's counts completed (pgbench: ended, its log read) and
        how they were counted (`counted`); a failure is kept in `error`."""
        if self.sampler is None:
            return
        assert self.child is not None
        try:  # its window's use, before the client ends (a reaped process has no /proc)
            self.client_end = self.end.counters(self.child)
        except (FileNotFoundError, ProcessLookupError):
            self.client_end = None
        try:
            self.workload.seat_end(self)
            self.counted = self.sampler.finish()
        except PerflabError as exc:
            self.error = exc
            return
        latency = getattr(self.sampler, "latency", None)  # a log's: known only now
        if latency:
            self.latency = latency

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
            self.client_start = self.end.counters(self.child)
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
                return self.runner.kind.process_counters(self.runner.server_place, self.server.pid, threads)
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
        raise ServerCrashedError(f"{self.server.death()} during the run:\n{self.server.error_lines()}")

    def _client_died(self) -> WorkloadError:
        assert self.child is not None
        code = self.child.poll()
        tail = read_tail(self.out, 10) or ""
        return WorkloadError(
            f"{self.workload.name} exited with code {code} during its turns:\n{tail}", f"full output: {self.out}"
        )

    def intervals(self, warmup: int) -> list[dict[str, Any]]:
        own = (self.sampler.statements, self.sampler.selects) if self.sampler else (STATEMENTS, SELECTS)
        return intervals(self.points, warmup, *own, latency=self.latency)

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
        self.stage.finish(self.server, self.rundir, self.logs)  # stopped, its logs kept, its directory removed
