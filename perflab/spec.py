"""Experiment file (TOML) -> validated Experiment -> list of Cells (the matrix).

Input: a TOML file as documented in the README ("Experiment file"). Every problem in it is
collected and raised at once as a SpecError (key path, expected, found, hint); nothing is
started before the whole file is valid.

    exp = load("examples/quick.toml"); cells = exp.cells()   # interleaved run order
"""

from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import dataclass, field
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
    ValidationError,
    field_validator,
)
from pydantic_core import PydanticCustomError

from perflab import allocators
from perflab.errors import Problem, SpecError
from perflab.units import parse_duration

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
OPTION_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
# sysbench options perflab sets itself; a user value would silently break the measurement
RESERVED_SYSBENCH = {
    "threads", "time", "events", "tables", "table_size", "report_interval", "histogram",
    "percentile", "db_driver", "mysql_socket", "mysql_host", "mysql_port", "mysql_user",
    "mysql_password", "mysql_db", "warmup_time",
}  # fmt: skip
# environment perflab controls; a variant setting it would bypass the allocator check
RESERVED_ENV = {"LD_PRELOAD", "LD_LIBRARY_PATH"}


def _fail(expected: str, hint: str | None = None) -> PydanticCustomError:
    return PydanticCustomError("perflab", "{expected}", {"expected": expected, "hint": hint or ""})


def _duration(value: Any) -> float:
    try:
        return parse_duration(value)
    except (ValueError, TypeError, AttributeError):
        raise _fail("a duration", 'write it like "20s", "1m30s" or "500ms"') from None


Duration = Annotated[float, BeforeValidator(_duration)]
OptionValue = str | StrictInt | float | StrictBool


# Keys and values are checked one by one (not the whole table at once) so that every bad
# entry is reported at its own key path, even when another entry of the table is also bad.
def _server_option_name(name: str) -> str:
    if not OPTION_NAME_RE.match(name):
        raise _fail("a server option name like sort_buffer_size", "letters, digits, '_' and '-'")
    return name


def _one_line(value: Any) -> Any:
    if isinstance(value, str) and ("\n" in value or "\r" in value):
        raise _fail("a one-line value", "option files hold one option per line")
    return value


def _workload_option_name(key: str) -> str:
    if key.replace("-", "_") in RESERVED_SYSBENCH:
        raise _fail(
            f"no '{key}' (perflab sets it)",
            "use workload.threads, dataset.tables/table_size, experiment.duration",
        )
    if not OPTION_NAME_RE.match(key):
        raise _fail("an option name of letters, digits and '_'", "see `sysbench <test> help` for the names")
    return key


def _env_name(name: str) -> str:
    if not ENV_NAME_RE.match(name):
        raise _fail(
            "an environment variable name like MALLOC_ARENA_MAX", "letters, digits and '_', not starting with a digit"
        )
    if name in RESERVED_ENV:
        raise _fail(f"no {name} in env", "use preload = \"jemalloc\" or a path instead")
    return name


def _env_value(value: Any) -> Any:
    if "\0" in str(value):
        raise _fail("a value without NUL bytes", "remove the \\u0000")
    return value


def _axis_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise _fail("an axis name of letters, digits, '.', '_' or '-'", "it names a column of the report")
    return name


LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def _label(name: str) -> str:
    if not LABEL_RE.match(name):
        raise _fail("a variant label of letters, digits, '.', '_', '+' or '-'",
                    "labels name cells (axis=label/tN/rN): no spaces, '/', ',' or '='")  # fmt: skip
    return name


def _non_empty_axis(entries: dict[str, Any]) -> dict[str, Any]:
    if not entries:
        raise _fail("at least one variant", "add e.g. baseline = {} under the axis, or remove the axis")
    return entries


ServerOptions = dict[
    Annotated[str, AfterValidator(_server_option_name)], Annotated[OptionValue, AfterValidator(_one_line)]
]
EnvVars = dict[
    Annotated[str, AfterValidator(_env_name)], Annotated[str | StrictInt | float, AfterValidator(_env_value)]
]
WorkloadOptions = dict[Annotated[str, AfterValidator(_workload_option_name)], OptionValue]
Axes = dict[
    Annotated[str, AfterValidator(_axis_name)], Annotated[dict[Annotated[str, AfterValidator(_label)], "Variant"], AfterValidator(_non_empty_axis)]
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExperimentSection(_Strict):
    name: str
    server: Literal["mariadb"] = "mariadb"
    duration: Duration = 20.0
    warmup: Duration = 5.0
    repeats: StrictInt = Field(default=3, ge=1)
    pin: StrictBool = False

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise _fail("a name of letters, digits, '.', '_' or '-'", "it names the results directory")
        return value

    @field_validator("duration")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value < 1:
            raise _fail("at least 1s", "sysbench reports once per second")
        return value

    @field_validator("duration", "warmup")
    @classmethod
    def _whole_seconds(cls, value: float) -> float:
        if value != int(value):
            raise _fail("whole seconds", f"sysbench runs and reports in whole seconds: use {int(value) or 1}s")
        return value


class DatasetSection(_Strict):
    tables: StrictInt = Field(default=4, ge=1)
    table_size: StrictInt = Field(default=10000, ge=1)


class WorkloadSection(_Strict):
    tool: Literal["sysbench"] = "sysbench"
    test: str = "oltp_read_only"
    threads: list[StrictInt] = [1]
    options: WorkloadOptions = {}

    @field_validator("threads", mode="before")
    @classmethod
    def _threads(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if isinstance(value, list):
            if not value:
                raise _fail("a non-empty list of thread counts", "threads = [1, 2, 4]")
            ints = [t for t in value if isinstance(t, int) and not isinstance(t, bool)]
            bad = [t for t in ints if t <= 0]
            if bad:
                raise _fail("thread counts >= 1", f"remove {bad}")
            repeated = sorted({t for t in ints if ints.count(t) > 1})
            if repeated:  # each thread count names its cells; a repeat would run (and store) them twice
                raise _fail("distinct thread counts", f"remove the repeated {repeated}; use experiment.repeats")
        return value

    @field_validator("test")
    @classmethod
    def _test(cls, value: str) -> str:
        if not re.match(r"^[A-Za-z0-9_]+$", value) and not value.endswith(".lua"):
            raise _fail(
                "a sysbench test name such as oltp_read_only, or a path to a .lua script",
                "the tests are the .lua files in /usr/share/sysbench",
            )
        return value


class Variant(_Strict):
    preload: str | None = None
    env: EnvVars = {}
    server_options: ServerOptions = {}
    workload_options: WorkloadOptions = {}  # sysbench options of this variant, over workload.options

    @field_validator("preload")
    @classmethod
    def _preload(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value.startswith("/"):
            if not Path(value).is_file():
                raise _fail("an existing .so file", "check the path, or use a known allocator name")
            return value
        if value not in allocators.NAMES:
            raise _fail(
                f"one of {', '.join(allocators.NAMES)} or an absolute path to a .so",
                f"known allocators: {', '.join(allocators.NAMES)}",
            )
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, Any]) -> dict[str, str]:
        return {k: str(v) for k, v in value.items()}


class PerfObserve(_Strict):
    """`perf = { frequency = 99, call_graph = "fp" }`: on-CPU call graphs (README "Profiles")."""

    frequency: StrictInt = Field(default=99, ge=1, le=5000)
    call_graph: Literal["fp", "dwarf"] = "fp"


class PmpObserve(_Strict):
    """`pmp = { interval = "1s" }`: wall-clock stacks of every server thread (README "Profiles")."""

    interval: Duration = 1.0
    tool: Literal["libdw", "eu-stack"] = "libdw"

    @field_validator("interval")
    @classmethod
    def _interval(cls, value: float) -> float:
        if not 0.05 <= value <= 60:
            raise _fail("an interval between 50ms and 60s", 'e.g. interval = "1s" or "200ms"')
        return value


def _observer_flag(value: Any) -> Any:
    """`perf = true` means the defaults, `perf = false` none."""
    if value is True:
        return {}
    return None if value is False else value


class ObserveSection(_Strict):
    rss: StrictBool = True
    perf: Annotated[PerfObserve | None, BeforeValidator(_observer_flag)] = None
    pmp: Annotated[PmpObserve | None, BeforeValidator(_observer_flag)] = None


class ExperimentFile(_Strict):
    experiment: ExperimentSection
    dataset: DatasetSection = DatasetSection()
    workload: WorkloadSection = WorkloadSection()
    server_options: ServerOptions = {}
    variants: Axes = {}
    observe: ObserveSection = ObserveSection()

    @field_validator("variants")
    @classmethod
    def _conflicts(cls, value: dict[str, dict[str, Variant]]) -> dict[str, dict[str, Variant]]:
        for combo in itertools.product(*(d.items() for d in value.values())):
            _merge([v for _, v in combo], [label for label, _ in combo])
        return value


@dataclass(frozen=True)
class Cell:
    """One run of the matrix: a combination of variant labels, a thread count, a repeat."""

    order: int  # position in the interleaved run order, from 0
    variant: dict[str, str]  # axis -> label
    threads: int
    repeat: int  # from 1
    preload: str | None
    env: dict[str, str]
    server_options: dict[str, Any]
    workload_options: dict[str, Any] = field(default_factory=dict)  # the variants' own, over workload.options

    @property
    def variant_key(self) -> str:
        return ",".join(f"{a}={lbl}" for a, lbl in self.variant.items()) or "default"

    @property
    def key(self) -> str:
        return f"{self.variant_key}/t{self.threads}/r{self.repeat}"


@dataclass(frozen=True)
class Experiment:
    source: str
    raw: dict[str, Any]
    file: ExperimentFile

    @property
    def name(self) -> str:
        return self.file.experiment.name

    def cells(self) -> list[Cell]:
        """All cells in run order: repeats outermost, so variants interleave (A B C A B C)."""
        spec = self.file
        combos = list(itertools.product(*(d.items() for d in spec.variants.values()))) or [()]
        axes = list(spec.variants)
        cells = []
        for repeat in range(1, spec.experiment.repeats + 1):
            for threads in spec.workload.threads:
                for combo in combos:
                    preload, env, options, wopts = _merge([v for _, v in combo], [lbl for lbl, _ in combo])
                    cells.append(
                        Cell(
                            order=len(cells),
                            variant=dict(zip(axes, (lbl for lbl, _ in combo))),
                            threads=threads,
                            repeat=repeat,
                            preload=preload,
                            env=env,
                            server_options={**spec.server_options, **options},
                            workload_options=wopts,
                        )
                    )
        return cells


def _merge(variants: list[Variant], labels: list[str]) -> tuple[str | None, dict, dict, dict]:
    """Combine one variant per axis; two axes setting the same thing differently is an error."""
    preload: str | None = None
    env: dict[str, str] = {}
    options: dict[str, Any] = {}
    wopts: dict[str, Any] = {}
    for variant, label in zip(variants, labels):
        if variant.preload is not None:
            if preload is not None and preload != variant.preload:
                raise ValueError(f"variants {labels} set preload twice ({preload}, {variant.preload})")
            preload = variant.preload
        for target, source, what in ((env, variant.env, "env"), (options, variant.server_options, "server_options"),
                                     (wopts, variant.workload_options, "workload_options")):
            for key, val in source.items():
                if key in target and target[key] != val:
                    raise ValueError(f"variants {labels} set {what}.{key} to both {target[key]!r} and {val!r}")
                target[key] = val
    return preload, env, options, wopts


def load(path: str | Path) -> Experiment:
    """Read and validate an experiment file; raise SpecError listing every problem."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(source, [Problem("(file)", "an experiment file", "no such file", "check the path")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(
            source, [Problem("(file)", "a readable UTF-8 TOML file", str(exc), "save it as UTF-8 text")]
        ) from None
    return parse(text, source)


def parse(text: str, source: str = "<string>") -> Experiment:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(
            source,
            [Problem("(file)", "valid TOML", f"a syntax error: {exc}", "see https://toml.io")],
        ) from None
    try:
        spec = ExperimentFile.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(source, _collapse([_problem(err, raw) for err in exc.errors()])) from None
    return Experiment(source=source, raw=raw, file=spec)


_TYPE_NAMES = {
    "int_type": "an integer", "string_type": "a string", "bool_type": "true or false",
    "list_type": "a list", "dict_type": "a table", "model_type": "a table",
    "float_type": "a number", "int_parsing": "an integer", "float_parsing": "a number",
}  # fmt: skip
# how to write a value of that type, for the hint "write it like ..."
_TYPE_EXAMPLES = {
    "int_type": "3", "string_type": '"text"', "bool_type": "true", "list_type": "[1, 2]",
    "dict_type": "{ key = value }", "model_type": "a [section] or { key = value }",
    "float_type": "2.5", "int_parsing": "3", "float_parsing": "2.5",
}  # fmt: skip
_WRITE_LIKE = "write it like "


# What pydantic adds to an error's loc besides the user's keys: the union member it tried
# ("str", "int", "function-after[...]", ...) and "[key]" for an error in a table's key.
_LOC_TAG = re.compile(r"^(?:str|int|float|bool|none|[\w-]+\[.*\])$")


def _user_loc(loc: tuple[Any, ...], raw: Any) -> list[str]:
    """The key path the user wrote: loc without pydantic's tags. A part that is a key of the
    file at that point is always kept, so a key named like a tag (or `strict_mode`) survives."""
    path: list[str] = []
    node = raw
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif part == "[key]" or (isinstance(part, str) and _LOC_TAG.match(part)):
            continue
        else:
            node = None  # a key the file lacks (e.g. a missing one)
        path.append(str(part))
    return path


def _collapse(problems: list[Problem]) -> list[Problem]:
    """One problem per (path, found): the union members pydantic tried become one expectation."""
    groups: dict[tuple[str, str], list[Problem]] = {}
    for problem in problems:
        groups.setdefault((problem.path, problem.found), []).append(problem)
    out = []
    for (path, found), group in groups.items():
        expected = list(dict.fromkeys(p.expected for p in group))
        hints = list(dict.fromkeys(p.hint for p in group if p.hint))
        if len(hints) > 1 and all(h.startswith(_WRITE_LIKE) for h in hints):
            hints = [_WRITE_LIKE + _either([h.removeprefix(_WRITE_LIKE) for h in hints])]
        out.append(Problem(path, _either(expected), found, "; ".join(hints) or None))
    return out


def _either(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _problem(err: dict[str, Any], raw: Any = None) -> Problem:
    loc = _user_loc(err["loc"], raw)
    path = ".".join(loc) or "(top level)"
    kind = err["type"]
    found = _show(err.get("input"))
    ctx = err.get("ctx") or {}
    if kind == "perflab":
        return Problem(path, ctx["expected"], found, ctx.get("hint") or None)
    if kind == "extra_forbidden":
        return Problem(path, "no such key", f"unknown key {loc[-1]!r}", "check the spelling; see README 'Experiment file'")
    if kind == "missing":
        return Problem(path, "a value", "nothing", f"add {loc[-1]} = ...")
    if kind == "literal_error":
        return Problem(path, f"one of {ctx.get('expected')}", found, "or leave the key out for the default")
    if kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        return Problem(path, f"a number >= {bound}", found, f"use {bound} or more")
    if kind == "value_error":
        return Problem(path, "a consistent combination", str(ctx.get("error", err["msg"])), "each setting may come from one axis only")
    if kind in _TYPE_NAMES:
        return Problem(path, _TYPE_NAMES[kind], found, _WRITE_LIKE + _TYPE_EXAMPLES[kind])
    return Problem(path, err["msg"], found, "see README 'Experiment file'")


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a table" if value else "an empty table"
    if isinstance(value, list):
        return f"a list {value!r}"[:80]
    return f"{type(value).__name__} {value!r}"[:80]
