"""The experiment file's [observe] section: what is watched while a cell runs (docs/profiles.md).

`perf`, `pmp` and `alloc` take a table of options, or true for the defaults (false: off); the
others are switches. Unknown keys are errors, models are frozen.

    ObserveSection.model_validate({"perf": {"targets": ["server", "client"]}}).perf.frequency  -> 99
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
)

from perflab.spec.fields import (
    STRICT,
    Duration,
    fail,
)
from perflab.units import parse_size


class _Strict(BaseModel):
    model_config = STRICT


Target = Literal["server", "client"]


def _targets(value: list[str]) -> list[str]:
    if not value:
        raise fail('at least one of "server", "client"', 'e.g. targets = ["server", "client"]')
    return list(dict.fromkeys(value))


Targets = Annotated[list[Target], AfterValidator(_targets)]


class PerfObserve(_Strict):
    """`perf = { frequency = 99, call_graph = "fp", targets = ["server", "client"], warmup = true }`:
    on-CPU call graphs of the server and/or the client (sysbench), over the window and, with
    warmup (the default: perf records system-wide, so the warm-up costs no more), from the
    workload's start; the seconds of detected stalls get their own profile (docs/profiles.md)."""

    frequency: StrictInt = Field(default=99, ge=1, le=5000)
    call_graph: Literal["fp", "dwarf"] = "fp"
    targets: Targets = ["server"]
    warmup: StrictBool = True


class PmpObserve(_Strict):
    """`pmp = { interval = "1s", targets = ["client"], warmup = false }`: wall-clock stacks of
    every thread of the server and/or the client; warmup = true samples from the workload's start
    (off by default: it stops every thread once per interval, during the warm-up too)."""

    interval: Duration = 1.0
    tool: Literal["libdw", "eu-stack"] = "libdw"
    targets: Targets = ["server"]
    warmup: StrictBool = False

    @field_validator("interval")
    @classmethod
    def _interval(cls, value: float) -> float:
        if not 0.05 <= value <= 60:
            raise fail("an interval between 50ms and 60s", 'e.g. interval = "1s" or "200ms"')
        return value


class AllocObserve(_Strict):
    """`alloc = { period = "512K", stacks = true, syscalls = true }`: what the server asks of its
    allocator (calls and bytes by size class, and its mmap/munmap/... syscalls) per transaction,
    and one allocation stack per `period` bytes on average (docs/profiles.md). `syscalls = false`
    leaves out the kernel's syscall tracepoints (and their cost): `syscalls_per_txn` is then null.
    `samples`: the records the ring of sampled stacks holds (408 bytes each, in the server's
    counter file on tmpfs); a window that samples more drops the rest and says so."""

    period: StrictInt = 512 * 1024  # "512K" read as bytes before it is checked (_period)
    stacks: StrictBool = True
    syscalls: StrictBool = True
    samples: StrictInt = 65536

    @field_validator("samples")
    @classmethod
    def _samples(cls, value: int) -> int:
        if not 1024 <= value <= 1 << 22:
            raise fail("a number of records between 1024 and 4194304 (1.6 GiB)", "e.g. samples = 262144")
        return value

    @field_validator("period", mode="before")
    @classmethod
    def _period(cls, value: Any) -> int:
        try:
            if not isinstance(value, int | str):
                raise ValueError(value)
            size = parse_size(value)
        except ValueError:
            raise fail("a size such as 512K or 1M", "the mean bytes between two sampled allocations") from None
        if not 4096 <= size <= 1 << 34:
            raise fail("a period between 4K and 16G", 'e.g. period = "512K"')
        return size


def _observer_flag(value: Any) -> Any:
    """`perf = true` means the defaults, `perf = false` none."""
    if value is True:
        return {}
    return None if value is False else value


class ObserveSection(_Strict):
    rss: StrictBool = True
    perf: Annotated[PerfObserve | None, BeforeValidator(_observer_flag)] = None
    pmp: Annotated[PmpObserve | None, BeforeValidator(_observer_flag)] = None
    alloc: Annotated[AllocObserve | None, BeforeValidator(_observer_flag)] = None
    # the storage's reads and writes, the server's fsyncs and its own I/O counters, once a second
    # (observers/io.py, docs/storage.md); unset: on with storage on disk (ExperimentFile.with_io_default)
    io: StrictBool | None = None
    status: StrictBool = False  # SHOW GLOBAL STATUS and INNODB_METRICS once a second (observers/status.py)
    # a canary's CPU time for fixed work, the verdicts' covariate (observers/host_speed.py); unset: on in
    # `perflab calibrate`, and in a run whose calibration measured a usable slope (cli/calibrated.py)
    host_speed: StrictBool | None = None
