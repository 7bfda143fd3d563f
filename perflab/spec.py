"""Experiment file (TOML) -> validated Experiment -> list of Cells (the matrix).

Input: a TOML file as documented in the README ("Experiment file"). Every problem in it is
collected and raised at once as a SpecError (key path, expected, found, hint); nothing is
started before the whole file is valid.

    exp = load("examples/quick.toml"); cells = exp.cells()   # interleaved run order
"""

from __future__ import annotations

import codecs
import itertools
import math
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
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from perflab import allocators, elf
from perflab.errors import Problem, SpecError
from perflab.units import parse_duration

# \Z, not $: `$` also matches before a final newline, which let "name\n" through
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
OPTION_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*\Z")
# sysbench options perflab sets itself; a user value would silently break the measurement
RESERVED_SYSBENCH = {
    "threads", "time", "events", "tables", "table_size", "report_interval", "histogram",
    "percentile", "db_driver", "mysql_socket", "mysql_host", "mysql_port", "mysql_user",
    "mysql_password", "mysql_db", "warmup_time",
}  # fmt: skip
# environment perflab controls; a variant setting it would bypass the allocator check
RESERVED_ENV = {"LD_PRELOAD", "LD_LIBRARY_PATH"}
# server options perflab writes itself (its own files on tmpfs, its port); compared with '-' as '_'
RESERVED_SERVER = {"datadir", "socket", "port", "bind_address", "pid_file", "log_error", "tmpdir", "user"}

# Limits on hostile or mistaken input: each is far beyond a real experiment, and keeps
# validation, the matrix and the option file bounded (a huge number is an error, not a hang).
MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 12  # tables and arrays inside each other; variants.axis.label.env.NAME is 5
MAX_LINE_DOTS = 32  # tomllib takes quadratic time in a dotted key's parts: 10,000 take seconds
MAX_DURATION_S = 7 * 24 * 3600
MAX_THREADS = 10_000  # one server connection each
MAX_TABLES = 10_000
MAX_TABLE_SIZE = 2**31 - 1  # sysbench's id column is a signed INT
MAX_REPEATS = 1000
MAX_CELLS = 20_000
INT64 = 2**63


def _fail(expected: str, hint: str | None = None, found: str | None = None) -> PydanticCustomError:
    context = {"expected": expected, "hint": hint or "", "found": found or ""}  # found: "" -> the input, shown
    return PydanticCustomError("perflab", "{expected}", context)


def _duration(value: Any) -> float:
    try:
        seconds = parse_duration(value)
    except (ValueError, TypeError, AttributeError, OverflowError):
        raise _fail("a duration", 'write it like "20s", "1m30s" or "500ms"') from None
    if seconds > MAX_DURATION_S:
        raise _fail("a duration of at most 7 days", 'write it like "20s", "1m30s" or "500ms"')
    return seconds


Duration = Annotated[float, BeforeValidator(_duration)]
OptionValue = str | StrictInt | float | StrictBool


# Keys and values are checked one by one (not the whole table at once) so that every bad
# entry is reported at its own key path, even when another entry of the table is also bad.
def _server_option_name(name: str) -> str:
    if not OPTION_NAME_RE.match(name):
        raise _fail("a server option name like sort_buffer_size", "letters, digits, '_' and '-'")
    if name.lower().replace("-", "_") in RESERVED_SERVER:
        raise _fail(f"no {name} (perflab sets it)", "each server gets its own datadir, socket, port and logs on tmpfs")
    return name


def _one_line(value: Any) -> Any:
    if isinstance(value, str) and ("\n" in value or "\r" in value):
        raise _fail("a one-line value", "option files hold one option per line")
    if isinstance(value, str) and _control(value):
        raise _fail("a value without control characters", f"remove the {_control(value)}")
    return value


def _control(text: str) -> str:
    """The first control character in `text` (a tab is text), spelled as an escape; or ''."""
    bad = next((c for c in text if (ord(c) < 0x20 and c != "\t") or 0x7F <= ord(c) < 0xA0), "")
    return f"\\u{ord(bad):04x}" if bad else ""


def _argv_value(value: Any) -> Any:
    if isinstance(value, str) and "\0" in value:
        raise _fail("a value without NUL bytes", "remove the \\u0000: a command-line argument cannot hold one")
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


LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*\Z")


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
WorkloadOptions = dict[
    Annotated[str, AfterValidator(_workload_option_name)], Annotated[OptionValue, AfterValidator(_argv_value)]
]
Axes = dict[
    Annotated[str, AfterValidator(_axis_name)], Annotated[dict[Annotated[str, AfterValidator(_label)], "Variant"], AfterValidator(_non_empty_axis)]
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _fraction(value: Any) -> float:
    """ "1%" or 0.01 -> 0.01."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            value = float(value.strip()[:-1]) / 100
        except ValueError:
            raise _fail("a percentage", 'write it like "1%" or 0.01') from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail("a percentage", 'write it like "1%" or 0.01')
    if not 0 < value < 1:
        raise _fail("a percentage between 0% and 100%", 'write it like "1%" or 0.01')
    return float(value)


Fraction = Annotated[float, BeforeValidator(_fraction)]
AUTO_FIELDS = ("target_ci", "min_repeats", "max_repeats", "time_budget")


class ExperimentSection(_Strict):
    name: str
    server: Literal["mariadb"] = "mariadb"
    duration: Duration = 20.0
    # "auto": the window starts after max_warmup, and the per-cell detection (MSER) checks
    # that the warm-up really ended by then; a duration: the window starts after it.
    warmup: Literal["auto"] | Duration = "auto"
    max_warmup: Duration = 10.0
    repeats: Literal["auto"] | Annotated[StrictInt, Field(ge=1)] = 3
    target_ci: Fraction = 0.01  # repeats = "auto": stop when the 95% CI half-width is within this
    min_repeats: Annotated[StrictInt, Field(ge=3)] = 3
    max_repeats: Annotated[StrictInt, Field(ge=3)] = 10
    time_budget: Duration | None = None
    pin: StrictBool = False
    stall_threshold: Fraction = 0.5  # a second below this fraction of the steady median is a stall
    cv_warning: Fraction = 0.03  # warn when QPS varies more than this across repeats
    timeout_margin: Duration = 60.0  # a cell's workload is killed after warm-up + duration + this

    @property
    def window_start(self) -> float:
        """Seconds of warm-up before the measured window."""
        return self.max_warmup if self.warmup == "auto" else float(self.warmup)

    @property
    def adaptive(self) -> bool:
        return self.repeats == "auto"

    @property
    def planned_repeats(self) -> int:
        """Repeats known in advance: all of them, or the minimum of an adaptive run."""
        return self.min_repeats if self.repeats == "auto" else int(self.repeats)

    # Validators run in field order and only on keys the file sets, so `repeats` and
    # `warmup` are known here and a default never triggers them.
    @field_validator(*AUTO_FIELDS)
    @classmethod
    def _auto_only(cls, value: Any, info: ValidationInfo) -> Any:
        if info.data.get("repeats", "auto") != "auto":
            raise _fail('repeats = "auto" beside it', f'{info.field_name} applies only to adaptive repeats: set repeats = "auto" or remove it')
        if info.field_name == "max_repeats" and value < info.data.get("min_repeats", 3):
            raise _fail(f"at least min_repeats ({info.data.get('min_repeats')})", "raise max_repeats or lower min_repeats")
        return value

    @field_validator("max_warmup")
    @classmethod
    def _auto_warmup_only(cls, value: Any, info: ValidationInfo) -> Any:
        if info.data.get("warmup", "auto") != "auto":
            raise _fail('warmup = "auto" beside it', 'max_warmup applies only to warmup = "auto"; remove it or set warmup = "auto"')
        return value

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

    @field_validator("duration", "warmup", "max_warmup")
    @classmethod
    def _whole_seconds(cls, value: float | str) -> float | str:
        if isinstance(value, float) and value != int(value):
            raise _fail("whole seconds", f"sysbench runs and reports in whole seconds: use {int(value) or 1}s")
        return value


class DatasetSection(_Strict):
    tables: StrictInt = Field(default=4, ge=1, le=MAX_TABLES)
    table_size: StrictInt = Field(default=10000, ge=1, le=MAX_TABLE_SIZE)


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
            huge = [t for t in ints if t > MAX_THREADS]
            if huge:
                raise _fail(f"thread counts <= {MAX_THREADS}", f"remove {huge}: each thread is a server connection")
            repeated = sorted({t for t in ints if ints.count(t) > 1})
            if repeated:  # each thread count names its cells; a repeat would run (and store) them twice
                raise _fail("distinct thread counts", f"remove the repeated {repeated}; use experiment.repeats")
        return value

    @field_validator("test")
    @classmethod
    def _test(cls, value: str) -> str:
        # a script path is an argument of sysbench: one starting with "-" would be read as an option
        lua = value.endswith(".lua") and value.isprintable() and not value.startswith("-")
        if not re.match(r"^[A-Za-z0-9_]+\Z", value) and not lua:
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
            if not value.isprintable():
                raise _fail("a path without control characters", "check the path")
            try:
                what = elf.not_preloadable(Path(value)) if Path(value).exists() else "no such file"
            except OSError as exc:
                what = exc.strerror or str(exc)
            if what == "no such file":
                raise _fail("an existing .so file", "check the path, or use a known allocator name")
            if what:
                raise _fail("a shared library (.so) to preload", "check the path, or use a known allocator name",
                            f"{_short(value, 200)!r}: {what}")  # fmt: skip
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
        # a conflict is always between two axes: check pairs, not the (exponential) product
        for one, other in itertools.combinations(value.values(), 2):
            for combo in itertools.product(one.items(), other.items()):
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
    text: str = ""  # the file as written, stored with the results

    @property
    def name(self) -> str:
        return self.file.experiment.name

    def cells(self) -> list[Cell]:
        """All cells known in advance, in run order: repeats outermost, so variants
        interleave (A B C A B C). With repeats = "auto", the first min_repeats rounds."""
        cells: list[Cell] = []
        for repeat in range(1, self.file.experiment.planned_repeats + 1):
            cells += self.round(repeat, start=len(cells))
        return cells

    def round(self, repeat: int, start: int = 0, only: set[tuple[str, int]] | None = None) -> list[Cell]:
        """One repeat of every (variant, threads), or of those in `only` ((variant_key,
        threads) pairs), numbered from `start`."""
        spec = self.file
        combos = list(itertools.product(*(d.items() for d in spec.variants.values()))) or [()]
        axes = list(spec.variants)
        cells: list[Cell] = []
        for threads in spec.workload.threads:
            for combo in combos:
                preload, env, options, wopts = _merge([v for _, v in combo], [lbl for lbl, _ in combo])
                cell = Cell(
                    order=start + len(cells),
                    variant=dict(zip(axes, (lbl for lbl, _ in combo))),
                    threads=threads,
                    repeat=repeat,
                    preload=preload,
                    env=env,
                    server_options={**spec.server_options, **options},
                    workload_options=wopts,
                )
                if only is None or (cell.variant_key, threads) in only:
                    cells.append(cell)
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
        with open(path, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)  # bounded: /dev/zero is a file too
    except FileNotFoundError:
        raise SpecError(source, [Problem("(file)", "an experiment file", "no such file", "check the path")]) from None
    except IsADirectoryError:
        raise SpecError(source, [Problem("(file)", "an experiment file", "a directory",
                                         "give the .toml file in it")]) from None  # fmt: skip
    except OSError as exc:
        raise SpecError(source, [Problem("(file)", "a readable file", exc.strerror or str(exc),
                                         "check the file's permissions")]) from None  # fmt: skip
    if len(data) > MAX_FILE_BYTES:
        raise SpecError(source, [Problem("(file)", "an experiment file of at most 1 MiB", "a larger file",
                                         "an experiment is a few dozen lines: is this the right file?")])  # fmt: skip
    return parse(_decode(data, source), source)


def _decode(data: bytes, source: str) -> str:
    """UTF-8 text (a leading byte-order mark is dropped); where it is not, say where."""
    try:
        text = data.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as exc:
        utf16 = data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
        hint = "save the file as UTF-8 text" + (" (it is UTF-16)" if utf16 else "")
        line, column = _position(data, exc.start + (len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0))
        raise SpecError(source, [Problem("(file)", "UTF-8 text", f"byte 0x{exc.object[exc.start]:02x} at line {line}, "
                                         f"column {column}, which is not UTF-8", hint)]) from None  # fmt: skip
    if "\0" in text:
        line, column = _position(text, text.index("\0"))
        raise SpecError(source, [Problem("(file)", "a text file", f"a NUL byte at line {line}, column {column}",
                                         "is this a binary file? an experiment file is TOML text")])  # fmt: skip
    return text


def _position(data: bytes | str, offset: int) -> tuple[int, int]:
    newline = b"\n" if isinstance(data, bytes) else "\n"
    return data.count(newline, 0, offset) + 1, offset - (data.rfind(newline, 0, offset) + 1) + 1


_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'|#.*')


def _dotted_line(text: str) -> Problem | None:
    """A line whose keys have more parts than any experiment could use (checked before tomllib)."""
    for number, line in enumerate(text.split("\n"), 1):
        if line.count(".") > MAX_LINE_DOTS:
            dots = _STRING_OR_COMMENT.sub("", line).count(".")
            if dots > MAX_LINE_DOTS:
                return Problem("(file)", f"at most {MAX_LINE_DOTS} dots on a line outside strings and comments",
                               f"{dots} on line {number}", "no experiment needs a key of that many parts")  # fmt: skip
    return None


def parse(text: str, source: str = "<string>") -> Experiment:
    dotted = _dotted_line(text)
    if dotted:
        raise SpecError(source, [dotted])
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(
            source,
            [Problem("(file)", "valid TOML", f"a syntax error: {exc}", "see https://toml.io")],
        ) from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise SpecError(source, [_too_deep("(file)")]) from None
    except ValueError:  # an integer of more than 4300 digits (sys.get_int_max_str_digits)
        raise SpecError(source, [Problem("(file)", "valid TOML", "an integer with thousands of digits",
                                         "TOML integers are 64-bit: -2^63 to 2^63-1")]) from None  # fmt: skip
    problems = _raw_problems(raw)
    if problems:  # pydantic would recurse into them, and error messages would print them
        raise SpecError(source, problems)
    try:
        spec = ExperimentFile.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(source, _collapse([_problem(err, raw) for err in exc.errors()])) from None
    problems = _limits(spec)
    if problems:
        raise SpecError(source, problems)
    return Experiment(source=source, raw=raw, file=spec, text=text)


def _too_deep(path: str) -> Problem:
    return Problem(path, f"tables and arrays nested at most {MAX_DEPTH} deep", "deeper nesting",
                   "an experiment file needs 5 levels (variants.axis.label.env.NAME)")  # fmt: skip


def _raw_problems(raw: dict[str, Any]) -> list[Problem]:
    """Values no experiment holds and the validation should not meet: nesting beyond
    MAX_DEPTH, integers outside TOML's 64-bit range. Walked without recursion."""
    problems: list[Problem] = []
    stack: list[tuple[Any, list[str]]] = [(raw, [])]
    while stack and len(problems) < 20:  # the first 20 say enough
        node, path = stack.pop()
        if isinstance(node, dict | list) and len(path) >= MAX_DEPTH:
            problems.append(_too_deep(_key_path(path)))
        elif isinstance(node, dict):
            stack += [(v, [*path, k]) for k, v in reversed(node.items())]
        elif isinstance(node, list):
            stack += [(v, [*path, str(i)]) for i, v in reversed(list(enumerate(node)))]
        elif isinstance(node, int) and not -INT64 <= node < INT64:
            problems.append(Problem(_key_path(path), "an integer between -2^63 and 2^63-1",
                                    f"an integer of {node.bit_length()} bits",
                                    "TOML integers are 64-bit; no setting needs more"))  # fmt: skip
    return problems


def _limits(spec: ExperimentFile) -> list[Problem]:
    """Bounds on the size of the matrix, checked by arithmetic before any cell is built."""
    e = spec.experiment
    problems = []
    for key in ("repeats", "min_repeats", "max_repeats"):
        value = getattr(e, key)
        if isinstance(value, int) and value > MAX_REPEATS and key in e.model_fields_set:
            hint = 'repeats = "auto" stops once the figures are tight' if key == "repeats" else \
                "target_ci and time_budget end an adaptive run earlier"  # fmt: skip
            problems.append(Problem(f"experiment.{key}", f"at most {MAX_REPEATS}", f"int {value}", hint))
    combos = math.prod(len(labels) for labels in spec.variants.values())
    rounds = max(e.planned_repeats, e.max_repeats if e.adaptive else 0)
    cells = combos * len(spec.workload.threads) * rounds
    if not problems and cells > MAX_CELLS:
        problems.append(Problem("(matrix)", f"at most {MAX_CELLS} cells", f"{cells} cells "
                                f"({combos} variants x {len(spec.workload.threads)} thread counts x {rounds} repeats)",
                                "split it, or use fewer axes, labels, thread counts or repeats"))  # fmt: skip
    return problems


def _key_path(keys: list[str]) -> str:
    return ".".join(_printable(k) for k in keys) or "(top level)"


def _printable(key: str) -> str:
    """A key as printed in a key path: shortened if long; quoted and escaped if it is blank,
    starts or ends with a space, or holds control or unassigned characters (a report line
    stays one line, and never reaches the terminal as an escape sequence)."""
    key = _short(key)
    if key and key.isprintable() and key.strip() == key:
        return key
    return '"' + key.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 20] + "..." + text[-17:]


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
_LOC_TAG = re.compile(r"^(?:str|int|float|bool|none|constrained-\w+|[\w-]+\[.*\])$")


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
    path = _key_path(loc)
    kind = err["type"]
    found = _show(err.get("input"))
    ctx = err.get("ctx") or {}
    if kind == "perflab":
        return Problem(path, ctx["expected"], ctx.get("found") or found, ctx.get("hint") or None)
    if kind == "extra_forbidden":
        found = f"unknown key {_short(loc[-1])!r}"
        return Problem(path, "no such key", found, "check the spelling; see README 'Experiment file'")
    if kind == "missing":
        return Problem(path, "a value", "nothing", f"add {loc[-1]} = ...")
    if kind == "literal_error":
        return Problem(path, f"one of {ctx.get('expected')}", found, "or leave the key out for the default")
    if kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        return Problem(path, f"a number >= {bound}", found, f"use {bound} or more")
    if kind in ("less_than_equal", "less_than"):
        bound = ctx.get("le", ctx.get("lt"))
        return Problem(path, f"a number <= {bound}", found, f"use {bound} or less; no experiment needs more")
    if kind == "value_error":
        return Problem(path, "a consistent combination", str(ctx.get("error", err["msg"])), "each setting may come from one axis only")
    if kind in _TYPE_NAMES:
        return Problem(path, _TYPE_NAMES[kind], found, _WRITE_LIKE + _TYPE_EXAMPLES[kind])
    return Problem(path, err["msg"], found, "see README 'Experiment file'")


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a table" if value else "an empty table"
    if isinstance(value, list):
        return f"a list {value[:20]!r}"[:80]  # (nesting is bounded by _raw_problems)
    if isinstance(value, str):
        value = value[:100]
    return f"{type(value).__name__} {value!r}"[:80]
