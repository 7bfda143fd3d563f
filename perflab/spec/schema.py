"""The experiment file's schema: sections, variants and observers, as pydantic models.

Unknown keys are errors (extra = "forbid"), models are frozen. Defaults are the documented
ones (docs/experiment.md).

    ExperimentFile.model_validate(tomllib.loads(text)).experiment.duration  -> 20.0
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from perflab import allocators, elf
from perflab.hosts.target import TARGET_FORM, parse_target
from perflab.spec.builds import BuildSpec
from perflab.spec.fields import (
    AUTO_FIELDS,
    MAX_PGBENCH_SCALE,
    MAX_TABLE_SIZE,
    MAX_TABLES,
    MAX_THREADS,
    MAX_WAREHOUSES,
    NAME_RE,
    Duration,
    EnvVars,
    Fraction,
    Margin,
    ServerOptions,
    WorkloadOptions,
    check_axis_name,
    check_label,
    check_non_empty_axis,
    fail,
    storage_value,
)
from perflab.spec.matrix import merge, merge_client, merge_glibc, merge_switches
from perflab.spec.problems import short
from perflab.units import parse_size

DEFAULT_BUDGET_S = 600.0  # [experiment] budget's default: 10 minutes


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExperimentSection(_Strict):
    name: str
    server: Literal["mariadb", "postgresql"] = "mariadb"
    duration: Duration = 20.0
    # "auto": the window starts after max_warmup, and the per-cell detection (MSER) checks
    # that the warm-up really ended by then; a duration: the window starts after it.
    warmup: Literal["auto"] | Duration = "auto"
    max_warmup: Duration = 10.0
    # unset (None): rounds until every comparison has a verdict (stop = "verdict"), within `budget`;
    # an integer: exactly that many rounds; "auto": adaptive, stop = "target_ci" unless `stop` says
    repeats: Literal["auto"] | Annotated[StrictInt, Field(ge=1)] | None = None
    # repeats = "auto": stop a group once its CI is tight (target_ci), or a comparison once it
    # has a verdict on a group-sequential boundary (analyze/sequential.py); unset: see `stop_rule`
    stop: Literal["target_ci", "verdict"] | None = None
    target_ci: Fraction = 0.01  # repeats = "auto": stop when the 95% CI half-width is within this
    min_repeats: Annotated[StrictInt, Field(ge=3)] = 3
    max_repeats: Annotated[StrictInt, Field(ge=3)] = 10
    time_budget: Duration | None = None  # the older name of `budget`
    # the wall time an adaptive run may take, from its first cell (the dataset not included); the
    # default rule (repeats unset) stops here at the latest, 10 minutes unless set
    budget: Duration | None = None
    # how a run that stops on verdicts spends its 5% over the looks (analyze/sequential.py): "pocock"
    # (the default: big effects stop at round 3) or "obrien-fleming" (almost nothing early)
    spending: Literal["pocock", "obrien-fleming"] = "pocock"
    pin: StrictBool = False
    stall_threshold: Fraction = 0.5  # a second below this fraction of the steady median is a stall
    cv_warning: Fraction = 0.03  # warn when QPS varies more than this across repeats
    # a ratio whose interval lies within 1 +/- this is `equivalent` (analyze/verdict.py)
    equivalence_margin: Margin = 0.02
    timeout_margin: Duration = 60.0  # a cell's workload is killed after warm-up + duration + this
    # server-side variance sources (issue 12 item 7; docs/experiment.md): the server's address
    # space randomization (false: started under `setarch -R`), and a full read of every table
    # and index into the buffer pool before the workload starts; a variant may set either
    aslr: StrictBool = True
    prewarm: StrictBool = False
    # how a round runs its cells (run/interleave.py): "sequential", one fresh server after another;
    # "interleaved", the round's servers of one thread count started together, their clients taking
    # turns of `slice`, so a change in the host's speed falls on every variant alike; on two kept
    # servers 100 ms turns left a seventh of the sd of 1 s turns (bench/server_noise.py)
    # unset: interleaved wherever it measures what the file asks (spec/design.py choose), else
    # sequential, with the reason recorded (meta `design_reason`)
    design: Literal["sequential", "interleaved"] | None = None
    slice: Duration = 0.1
    # where the datadirs live (run/storage.py, docs/storage.md): "tmpfs", or a directory on disk,
    # where the server's own durability defaults apply; drop_caches: sync and drop the whole
    # machine's page cache before each cell
    storage: Annotated[str, AfterValidator(storage_value)] = "tmpfs"
    drop_caches: StrictBool = False
    # remote hosts (docs/hosts.md): a [hosts.NAME] each; unset: this machine
    server_host: str | None = None
    client_host: str | None = None

    @property
    def window_start(self) -> float:
        """Seconds of warm-up before the measured window."""
        return self.max_warmup if self.warmup == "auto" else float(self.warmup)

    @property
    def on_disk(self) -> bool:
        """storage names a directory (on disk): the server's own durability defaults apply."""
        return self.storage != "tmpfs"

    @property
    def interleaved(self) -> bool:
        """design = "interleaved": a round's servers at once, clients in turns (run/interleave.py)."""
        return self.design == "interleaved"

    @property
    def adaptive(self) -> bool:
        """Rounds decided as the run goes: repeats unset (stop on verdicts) or "auto"."""
        return self.repeats is None or self.repeats == "auto"

    @property
    def stop_rule(self) -> str | None:
        """What ends an adaptive run: "verdict" (the default without repeats) or "target_ci"
        (the default of repeats = "auto"); None for a fixed number of repeats."""
        if not self.adaptive:
            return None
        return self.stop or ("verdict" if self.repeats is None else "target_ci")

    @property
    def budget_s(self) -> float | None:
        """The adaptive run's wall-time budget: `budget` (or its older name `time_budget`); 10
        minutes by default when repeats is unset; None: none (max_repeats bounds it)."""
        if not self.adaptive:
            return None
        given = self.budget if self.budget is not None else self.time_budget
        return given if given is not None or self.repeats == "auto" else DEFAULT_BUDGET_S

    @property
    def planned_repeats(self) -> int:
        """Repeats known in advance: all of them, or the minimum of an adaptive run."""
        return self.min_repeats if self.adaptive else int(self.repeats)  # type: ignore[arg-type]

    # Validators run in field order and only on keys the file sets, so `repeats` and
    # `warmup` are known here and a default never triggers them.
    @field_validator(*AUTO_FIELDS)
    @classmethod
    def _auto_only(cls, value: Any, info: ValidationInfo) -> Any:
        if info.data.get("repeats") not in (None, "auto"):
            raise fail(
                'no fixed repeats beside it (repeats unset or "auto")',
                f"{info.field_name} applies only to a run whose rounds are decided as it goes: remove repeats "
                f"(rounds until a verdict) or {info.field_name}",
            )
        if info.field_name in ("budget", "time_budget") and "time_budget" in info.data and info.data["time_budget"]:
            raise fail("budget or time_budget, not both", "time_budget is budget's older name: keep budget")
        stop = info.data.get("stop") or ("verdict" if info.data.get("repeats") is None else "target_ci")
        if info.field_name == "target_ci" and stop == "verdict":
            raise fail(
                'stop = "target_ci" beside it',
                'stop = "verdict" ends on verdicts, not on a CI width: remove target_ci or set stop = "target_ci"',
            )
        if info.field_name == "max_repeats" and value < info.data.get("min_repeats", 3):
            raise fail(
                f"at least min_repeats ({info.data.get('min_repeats')})", "raise max_repeats or lower min_repeats"
            )
        return value

    @field_validator("max_warmup")
    @classmethod
    def _auto_warmup_only(cls, value: Any, info: ValidationInfo) -> Any:
        if info.data.get("warmup", "auto") != "auto":
            raise fail(
                'warmup = "auto" beside it',
                'max_warmup applies only to warmup = "auto"; remove it or set warmup = "auto"',
            )
        return value

    @field_validator("slice")
    @classmethod
    def _slice(cls, value: float, info: ValidationInfo) -> float:
        if info.data.get("design") == "sequential":
            raise fail('design = "interleaved" beside it', 'slice is the turn of an interleaved design: remove it '
                       'or set design = "interleaved"')  # fmt: skip
        per_second = 1 / value if value > 0 else 0.0
        whole = value >= 1 and value == round(value)
        if not (0.1 <= value <= 60 and (whole or abs(per_second - round(per_second)) < 1e-6)):
            raise fail("whole seconds from 1s to 60s, or a tenth to a half of a second that divides it "
                       "(100ms, 125ms, 200ms, 250ms, 500ms)",
                       "every second of a client's running time ends with a turn; 100ms (the default) shares "
                       "the host best (docs/experiment.md)")  # fmt: skip
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise fail("a name of letters, digits, '.', '_' or '-'", "it names the results directory")
        return value

    @field_validator("duration")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value < 1:
            raise fail("at least 1s", "sysbench reports once per second")
        return value

    @field_validator("duration", "warmup", "max_warmup")
    @classmethod
    def _whole_seconds(cls, value: float | str) -> float | str:
        if isinstance(value, float) and value != int(value):
            raise fail("whole seconds", f"sysbench runs and reports in whole seconds: use {int(value) or 1}s")
        return value


class DatasetSection(_Strict):
    tables: StrictInt = Field(default=4, ge=1, le=MAX_TABLES)
    table_size: StrictInt = Field(default=10000, ge=1, le=MAX_TABLE_SIZE)
    scale: StrictInt | None = Field(default=None, ge=1, le=MAX_PGBENCH_SCALE)  # pgbench -i -s SCALE


class WorkloadSection(_Strict):
    tool: Literal["sysbench", "pgbench", "go-tpc"] = "sysbench"
    test: str = "oltp_read_only"
    threads: list[StrictInt] = [1]
    options: WorkloadOptions = {}
    warehouses: StrictInt | None = Field(default=None, ge=1, le=MAX_WAREHOUSES)  # go-tpc's TPC-C dataset

    @field_validator("threads", mode="before")
    @classmethod
    def _threads(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if isinstance(value, list):
            if not value:
                raise fail("a non-empty list of thread counts", "threads = [1, 2, 4]")
            ints = [t for t in value if isinstance(t, int) and not isinstance(t, bool)]
            bad = [t for t in ints if t <= 0]
            if bad:
                raise fail("thread counts >= 1", f"remove {bad}")
            huge = [t for t in ints if t > MAX_THREADS]
            if huge:
                raise fail(f"thread counts <= {MAX_THREADS}", f"remove {huge}: each thread is a server connection")
            repeated = sorted({t for t in ints if ints.count(t) > 1})
            if repeated:  # each thread count names its cells; a repeat would run (and store) them twice
                raise fail("distinct thread counts", f"remove the repeated {repeated}; use experiment.repeats")
        return value

    @field_validator("test")
    @classmethod
    def _test(cls, value: str, info: ValidationInfo) -> str:
        from perflab.run import workloads

        return workloads.get(info.data.get("tool") or "sysbench").check_test(value)


class Variant(_Strict):
    build: str | None = None  # a [builds.NAME]; none: the installed package's server
    preload: str | None = None
    env: EnvVars = {}
    server_options: ServerOptions = {}
    workload_options: WorkloadOptions = {}  # sysbench options of this variant, over workload.options
    # the workload client (sysbench): a library preloaded into it, its environment, and another
    # libmariadb for it (loaded under the soname sysbench links: run/client_variant.py)
    client_preload: str | None = None
    client_env: EnvVars = {}
    client_library: str | None = None
    aslr: StrictBool | None = None  # None: [experiment] aslr
    prewarm: StrictBool | None = None  # None: [experiment] prewarm
    # the C library the server runs with: that Debian suite's libc6 and loader, in a private root
    # (run/builds/glibc.py); None: the server's own (the system's, or its private root's)
    glibc: Literal["bookworm", "bookworm-backports", "trixie", "sid"] | None = None

    @field_validator("preload", "client_preload")
    @classmethod
    def _preload(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value.startswith("/"):
            if not value.isprintable():
                raise fail("a path without control characters", "check the path")
            try:
                what = elf.not_preloadable(Path(value)) if Path(value).exists() else "no such file"
            except OSError as exc:
                what = exc.strerror or str(exc)
            if what == "no such file":
                raise fail("an existing .so file", "check the path, or use a known allocator name")
            if what:
                raise fail(
                    "a shared library (.so) to preload",
                    "check the path, or use a known allocator name",
                    f"{short(value, 200)!r}: {what}",
                )
            if allocators.is_alloc_tracer(Path(value)):
                raise fail(
                    "an allocator, not perflab's allocation counter",
                    "remove this preload and set alloc = true under [observe]: perflab preloads the counter "
                    "itself, in front of the variant's allocator (loaded twice, it would count every call twice)",
                    f"{short(value, 200)!r}: perflab_alloc.so",
                )
            return value
        if value not in allocators.NAMES:
            raise fail(
                f"one of {', '.join(allocators.NAMES)} or an absolute path to a .so",
                f"known allocators: {', '.join(allocators.NAMES)}",
            )
        return value

    @field_validator("client_library")
    @classmethod
    def _client_library(cls, value: str | None) -> str | None:
        if value is None:
            return None
        hint = "an absolute path to a libmariadb.so.3 (or a compatible client library) for sysbench"
        if not value.startswith("/") or not value.isprintable():
            raise fail("an absolute path to a shared library", hint)
        try:
            what = elf.not_preloadable(Path(value)) if Path(value).exists() else "no such file"
        except OSError as exc:
            what = exc.strerror or str(exc)
        if what:
            raise fail("a shared library (.so) sysbench can load", hint, f"{short(value, 200)!r}: {what}")
        return value

    @field_validator("env", "client_env")
    @classmethod
    def _env(cls, value: dict[str, Any]) -> dict[str, str]:
        return {k: str(v) for k, v in value.items()}


Axes = dict[
    Annotated[str, AfterValidator(check_axis_name)],
    Annotated[dict[Annotated[str, AfterValidator(check_label)], "Variant"], AfterValidator(check_non_empty_axis)],
]


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
    leaves out the kernel's syscall tracepoints (and their cost): `syscalls_per_txn` is then null."""

    period: StrictInt | StrictStr = 512 * 1024
    stacks: StrictBool = True
    syscalls: StrictBool = True

    @field_validator("period")
    @classmethod
    def _period(cls, value: int | str) -> int:
        try:
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
    # (run/observers/io.py, docs/storage.md)
    io: StrictBool = False
    status: StrictBool = False  # SHOW GLOBAL STATUS and INNODB_METRICS once a second (run/observers/status.py)
    # a canary's CPU time for fixed work, the verdicts' covariate (observers/host_speed.py); unset: on in
    # `perflab calibrate`, and in a run whose calibration measured a usable slope (cli/calibrated.py)
    host_speed: StrictBool | None = None


class HostSection(_Strict):
    """[hosts.NAME]: a machine reached over SSH (docs/hosts.md); identity and options from the ssh config."""

    ssh: str  # user@address[:port]

    @field_validator("ssh")
    @classmethod
    def _target(cls, value: str) -> str:
        try:
            parse_target(value)
        except ValueError:
            raise PydanticCustomError(
                "perflab", "{expected}", {"expected": TARGET_FORM, "found": repr(value)}
            ) from None
        return value


class ExperimentFile(_Strict):
    experiment: ExperimentSection
    hosts: dict[Annotated[str, AfterValidator(check_label)], HostSection] = {}
    dataset: DatasetSection = DatasetSection()
    workload: WorkloadSection = WorkloadSection()
    server_options: ServerOptions = {}
    builds: dict[Annotated[str, AfterValidator(check_label)], BuildSpec] = {}
    variants: Axes = {}
    observe: ObserveSection = ObserveSection()

    @field_validator("variants")
    @classmethod
    def _known_builds(cls, value: dict[str, dict[str, Variant]], info: ValidationInfo) -> dict[str, dict[str, Variant]]:
        known = info.data.get("builds")
        if known is None:  # [builds] itself is invalid: reported there
            return value
        for axis, labels in value.items():
            for label, variant in labels.items():
                if variant.build is not None and variant.build not in known:
                    names = ", ".join(known) or "none: add a [builds.NAME] table"
                    raise PydanticCustomError(
                        "perflab",
                        "{expected}",
                        {
                            "expected": f"variants.{axis}.{label}.build: the name of a [builds] table",
                            "hint": f"defined builds: {names}",
                            "found": repr(variant.build),
                        },
                    )
        return value

    @field_validator("variants")
    @classmethod
    def _conflicts(cls, value: dict[str, dict[str, Variant]]) -> dict[str, dict[str, Variant]]:
        # a conflict is always between two axes: check pairs, not the (exponential) product
        for one, other in itertools.combinations(value.values(), 2):
            for combo in itertools.product(one.items(), other.items()):
                merge([v for _, v in combo], [label for label, _ in combo])
                merge_client([v for _, v in combo], [label for label, _ in combo])
                merge_switches([v for _, v in combo], [label for label, _ in combo])
                merge_glibc([v for _, v in combo], [label for label, _ in combo])
        return value

    @field_validator("variants")
    @classmethod
    def _glibc_of_a_root(cls, value: dict[str, dict[str, Variant]], info: ValidationInfo) -> dict[str, dict[str, Variant]]:
        """glibc = SUITE meeting a build that runs from a private root, in the same variant or on
        another axis (every combination is a cell): that build has its own suite's C library."""
        builds = info.data.get("builds") or {}
        rooted = {(axis, v.build) for axis, ls in value.items() for v in ls.values() if v.build in builds
                  and builds[v.build].suite is not None}  # fmt: skip
        for axis, labels in value.items():
            for label, variant in labels.items():
                met = sorted(b for a, b in rooted if a != axis or b == variant.build)
                if variant.glibc and met:
                    raise PydanticCustomError("perflab", "{expected}", {
                        "expected": f"variants.{axis}.{label}.glibc: a binary of this system",
                        "hint": f"builds.{met[0]} runs from its own {builds[met[0]].suite} private root, with that "
                                "suite's C library: drop glibc there, or use the installed server or a basedir",
                        "found": repr(variant.glibc)})  # fmt: skip
        return value
