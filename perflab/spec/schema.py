"""The experiment file's schema: sections, variants and observers, as pydantic models.

Unknown keys are errors (extra = "forbid"), models are frozen. Defaults are the documented
ones (docs/experiment.md).

    ExperimentFile.model_validate(tomllib.loads(text)).experiment.duration  -> 20.0
"""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    StrictBool,
    StrictInt,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

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
    STRICT,
    Duration,
    Fraction,
    Margin,
    Rate,
    ServerOptions,
    WorkloadOptions,
    TEST_CHECKS,
    check_label,
    fail,
    storage_value,
)
from perflab.spec.observe import ObserveSection
from perflab.spec.variant import (
    Axes,
    Variant,
    merge,
    merge_client,
    merge_glibc,
    merge_host,
    merge_rate,
    merge_switches,
)


class _Strict(BaseModel):
    model_config = STRICT


DEFAULT_BUDGET_S = 600.0  # [experiment] budget's default: 10 minutes


class ExperimentSection(_Strict):
    name: str
    server: Literal["mariadb", "mysql", "postgresql"] = "mariadb"
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
    # a cell that did not settle, or failed where its variant ran well, is measured again once in its
    # round (run/scheduler.retries); false: never (a study of the warm-up itself, whose cells do not settle)
    measure_again: StrictBool = True
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
    # with server_host: where the dataset is prepared (docs/hosts.md): "host", by the server host's
    # own server, the loader here over TCP; "here", by this machine's, its snapshot copied there
    prepare_on: Literal["host", "here"] = "host"
    # a host axis: its hosts run their rounds at once where they are independent (each server host
    # with client hosts of its own: spec/hosts.host_lanes); false: one host at a time
    concurrent_hosts: StrictBool = True

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
            raise fail(
                'design = "interleaved" beside it',
                'slice is the turn of an interleaved design: remove it or set design = "interleaved"',
            )
        per_second = 1 / value if value > 0 else 0.0
        whole = value >= 1 and value == round(value)
        if not (0.1 <= value <= 60 and (whole or abs(per_second - round(per_second)) < 1e-6)):
            raise fail(
                "whole seconds from 1s to 60s, or a tenth to a half of a second that divides it "
                "(100ms, 125ms, 200ms, 250ms, 500ms)",
                "every second of a client's running time ends with a turn; 100ms (the default) shares "
                "the host best (`perflab docs experiment`)",
            )
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
    # open loop: transactions a second over all client threads (workloads/rate.py); None: closed loop
    rate: Rate | None = None

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
        return TEST_CHECKS[info.data.get("tool") or "sysbench"](value)  # as the tool names its tests


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

    def with_io_default(self) -> ExperimentFile:
        """The file with `[observe] io` decided where it does not say: on with storage on a disk,
        where a write verdict's Why is its fsyncs and redo/WAL bytes per transaction, unless
        design = "interleaved" (a round's servers would share the disk); off on tmpfs."""
        if self.observe.io is not None:
            return self
        on = self.experiment.on_disk and self.experiment.design != "interleaved"
        return self.model_copy(update={"observe": self.observe.model_copy(update={"io": on})})

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
                merge_rate([v for _, v in combo], [label for label, _ in combo])
                merge_host([v for _, v in combo], [label for label, _ in combo], None)
                merge_host([v for _, v in combo], [label for label, _ in combo], None, "client_host")
        return value

    @field_validator("variants")
    @classmethod
    def _glibc_of_a_root(
        cls, value: dict[str, dict[str, Variant]], info: ValidationInfo
    ) -> dict[str, dict[str, Variant]]:
        """glibc = SUITE meeting a build that runs from a private root, in the same variant or on
        another axis (every combination is a cell): that build has its own suite's C library."""
        builds = info.data.get("builds") or {}
        rooted = {
            (axis, v.build)
            for axis, ls in value.items()
            for v in ls.values()
            if v.build in builds and builds[v.build].suite is not None
        }
        for axis, labels in value.items():
            for label, variant in labels.items():
                met = sorted(b for a, b in rooted if b is not None and (a != axis or b == variant.build))
                if variant.glibc and met:
                    raise PydanticCustomError(
                        "perflab",
                        "{expected}",
                        {
                            "expected": f"variants.{axis}.{label}.glibc: a binary of this system",
                            "hint": f"builds.{met[0]} runs from its own {builds[met[0]].suite} private root, with that "
                            "suite's C library: drop glibc there, or use the installed server or a basedir",
                            "found": repr(variant.glibc),
                        },
                    )
        return value
