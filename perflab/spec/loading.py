"""Reading an experiment file: bytes -> text -> TOML -> validated Experiment.

Every problem is collected and raised at once as a SpecError (key path, expected, found,
hint); nothing is started before the whole file is valid. Hostile input (huge, deeply
nested, binary, quadratic-time keys) is refused with a bounded amount of work.

    exp = load("examples/quick.toml")
"""

from __future__ import annotations

import codecs
import math
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from perflab.errors import Problem, SpecError
from perflab.spec.design import choose, design_problems
from perflab.spec.fields import CELL_OVERHEAD_S, INT64, MAX_CELLS, MAX_DEPTH, MAX_FILE_BYTES, MAX_LINE_DOTS, MAX_REPEATS
from perflab.spec.hosts import host_problems
from perflab.spec.matrix import Experiment
from perflab.spec.problems import collapse, key_path, problem
from perflab.spec.schema import ExperimentFile
from perflab.spec.servers import server_problems
from perflab.units import format_duration


def load(path: str | Path) -> Experiment:
    """Read and validate an experiment file; raise SpecError listing every problem."""
    source = str(path)
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)  # bounded: /dev/zero is a file too
    except FileNotFoundError:
        raise SpecError(source, [Problem("(file)", "an experiment file", "no such file", "check the path")]) from None
    except IsADirectoryError:
        raise SpecError(
            source, [Problem("(file)", "an experiment file", "a directory", "give the .toml file in it")]
        ) from None
    except OSError as exc:
        raise SpecError(
            source, [Problem("(file)", "a readable file", exc.strerror or str(exc), "check the file's permissions")]
        ) from None
    if len(data) > MAX_FILE_BYTES:
        raise SpecError(
            source,
            [
                Problem(
                    "(file)",
                    "an experiment file of at most 1 MiB",
                    "a larger file",
                    "an experiment is a few dozen lines: is this the right file?",
                )
            ],
        )
    return parse(_decode(data, source), source)


def _decode(data: bytes, source: str) -> str:
    """UTF-8 text (a leading byte-order mark is dropped); where it is not, say where."""
    try:
        text = data.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as exc:
        utf16 = data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
        hint = "save the file as UTF-8 text" + (" (it is UTF-16)" if utf16 else "")
        line, column = _position(data, exc.start + (len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0))
        raise SpecError(
            source,
            [
                Problem(
                    "(file)",
                    "UTF-8 text",
                    f"byte 0x{exc.object[exc.start]:02x} at line {line}, column {column}, which is not UTF-8",
                    hint,
                )
            ],
        ) from None
    if "\0" in text:
        line, column = _position(text, text.index("\0"))
        raise SpecError(
            source,
            [
                Problem(
                    "(file)",
                    "a text file",
                    f"a NUL byte at line {line}, column {column}",
                    "is this a binary file? an experiment file is TOML text",
                )
            ],
        )
    return text


def _position(data: bytes | str, offset: int) -> tuple[int, int]:
    if isinstance(data, bytes):  # offsets in bytes
        return data.count(b"\n", 0, offset) + 1, offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return data.count("\n", 0, offset) + 1, offset - (data.rfind("\n", 0, offset) + 1) + 1


_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'|#.*')


def _dotted_line(text: str) -> Problem | None:
    """A line whose keys have more parts than any experiment could use (checked before tomllib)."""
    for number, line in enumerate(text.split("\n"), 1):
        if line.count(".") > MAX_LINE_DOTS:
            dots = _STRING_OR_COMMENT.sub("", line).count(".")
            if dots > MAX_LINE_DOTS:
                return Problem(
                    "(file)",
                    f"at most {MAX_LINE_DOTS} dots on a line outside strings and comments",
                    f"{dots} on line {number}",
                    "no experiment needs a key of that many parts",
                )
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
        raise SpecError(
            source,
            [
                Problem(
                    "(file)",
                    "valid TOML",
                    "an integer with thousands of digits",
                    "TOML integers are 64-bit: -2^63 to 2^63-1",
                )
            ],
        ) from None
    problems = _raw_problems(raw)
    if problems:  # pydantic would recurse into them, and error messages would print them
        raise SpecError(source, problems)
    try:
        spec = ExperimentFile.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(source, collapse([problem(dict(err), raw, ExperimentFile) for err in exc.errors()])) from None
    spec = spec.with_io_default()
    problems = _limits(spec) or server_problems(spec) + design_problems(spec) + host_problems(spec)
    if problems:
        raise SpecError(source, problems)
    spec, why = choose(spec)
    problems = budget_problems(spec)
    if problems:
        raise SpecError(source, problems)
    return Experiment(source=source, raw=raw, file=spec, text=text, design_reason=why)


def budget_problems(spec: ExperimentFile) -> list[Problem]:
    """A budget shorter than one round (it could not even run the rounds a verdict needs)."""
    e = spec.experiment
    if e.budget_s is None or not ({"budget", "time_budget"} & e.model_fields_set):
        return []
    per_round = round_seconds(spec)
    if e.budget_s >= per_round:
        return []
    key = "budget" if "budget" in e.model_fields_set else "time_budget"
    return [
        Problem(
            f"experiment.{key}",
            f"at least one round, about {format_duration(per_round)} here",
            format_duration(e.budget_s),
            f"a round runs every cell once; {e.min_repeats} rounds, about {format_duration(e.min_repeats * per_round)}, "
            "are the fewest a verdict needs",
        )
    ]


def _too_deep(path: str) -> Problem:
    return Problem(
        path,
        f"tables and arrays nested at most {MAX_DEPTH} deep",
        "deeper nesting",
        "an experiment file needs 5 levels (variants.axis.label.env.NAME)",
    )


def _raw_problems(raw: dict[str, Any]) -> list[Problem]:
    """Values no experiment holds and the validation should not meet: nesting beyond
    MAX_DEPTH, integers outside TOML's 64-bit range. Walked without recursion."""
    problems: list[Problem] = []
    stack: list[tuple[Any, list[str]]] = [(raw, [])]
    while stack and len(problems) < 20:  # the first 20 say enough
        node, path = stack.pop()
        if isinstance(node, dict | list) and len(path) >= MAX_DEPTH:
            problems.append(_too_deep(key_path(path)))
        elif isinstance(node, dict):
            stack += [(v, [*path, k]) for k, v in reversed(node.items())]
        elif isinstance(node, list):
            stack += [(v, [*path, str(i)]) for i, v in reversed(list(enumerate(node)))]
        elif isinstance(node, int) and not -INT64 <= node < INT64:
            problems.append(
                Problem(
                    key_path(path),
                    "an integer between -2^63 and 2^63-1",
                    f"an integer of {node.bit_length()} bits",
                    "TOML integers are 64-bit; no setting needs more",
                )
            )
    return problems


def round_seconds(spec: ExperimentFile) -> float:
    """Wall time of one round, estimated: every cell's warm-up, window and CELL_OVERHEAD_S (in
    the interleaved design a round's servers run their turns one after another: the same sum); a
    host axis whose hosts run at once takes its busiest host's share (spec/hosts.longest_lane)."""
    from perflab.spec.hosts import longest_lane

    combos = math.prod(len(labels) for labels in spec.variants.values())
    return combos * len(spec.workload.threads) * cell_estimate(spec) * longest_lane(spec)


def cell_estimate(spec: ExperimentFile) -> float:
    """Wall time of one cell, estimated: its warm-up, its window and CELL_OVERHEAD_S."""
    e = spec.experiment
    return e.window_start + e.duration + CELL_OVERHEAD_S


def _limits(spec: ExperimentFile) -> list[Problem]:
    """Bounds on the size of the matrix, checked by arithmetic before any cell is built."""
    e = spec.experiment
    problems = []
    for key in ("repeats", "min_repeats", "max_repeats"):
        value = getattr(e, key)
        if isinstance(value, int) and value > MAX_REPEATS and key in e.model_fields_set:
            hint = (
                'repeats = "auto" stops once the figures are tight'
                if key == "repeats"
                else "target_ci and budget end an adaptive run earlier"
            )
            problems.append(Problem(f"experiment.{key}", f"at most {MAX_REPEATS}", f"int {value}", hint))
    combos = math.prod(len(labels) for labels in spec.variants.values())
    # repeats unset: its budget bounds the run, and no more rounds than it holds are planned
    rounds = max(e.planned_repeats, e.max_repeats if e.repeats == "auto" or "max_repeats" in e.model_fields_set else 0)
    cells = combos * len(spec.workload.threads) * rounds
    if not problems and cells > MAX_CELLS:
        problems.append(
            Problem(
                "(matrix)",
                f"at most {MAX_CELLS} cells",
                f"{cells} cells ({combos} variants x {len(spec.workload.threads)} thread counts x {rounds} repeats)",
                "split it, or use fewer axes, labels, thread counts or repeats",
            )
        )
    return problems
