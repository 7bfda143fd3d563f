"""Fuzzing the experiment-file loader: whatever bytes a file holds, `spec.load` returns an
Experiment or raises SpecError (exit code 2) whose every problem names a key path, an
expectation and a finding. Never another exception, never a hang.

The generators: arbitrary bytes and text; TOML documents built from random nested values at
the known keys (and at random keys), so that validation is exercised deep in the file, not only
the TOML parser; the files in examples/ with values replaced anywhere in their structure; and
byte-level mutations of those files. Every input that
once broke the loader is kept in tests/data/fuzz_corpus/ and replayed on every run, against its
expected outcome in tests/data/fuzz_corpus.toml (refused at a key path, or accepted).

"Never a hang" is checked per input: every load (and the cells of an accepted file) must take
less than LOAD_CPU_LIMIT_S of CPU time. CPU time, not wall time, so that a loaded machine does
not fail the test; hypothesis' own `deadline` (wall time) stays off for the same reason.

`make test` runs a fixed, derandomized set of examples (a few seconds). A long session:

    PERFLAB_FUZZ_EXAMPLES=20000 python -m pytest tests/unit/test_fuzz_spec.py -k fuzz -x

(random seeds each time; a failure prints the smallest input found: add it to the corpus, and
its expected outcome to tests/data/fuzz_corpus.toml).
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
import string
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perflab import spec
from perflab.errors import EXIT_USAGE, SpecError
from perflab.servers import mysqld

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "fuzz_corpus"
CORPUS_EXPECTED = ROOT / "tests" / "data" / "fuzz_corpus.toml"
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))

LONG_RUN = int(os.environ.get("PERFLAB_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=LONG_RUN or 200,
    derandomize=not LONG_RUN,  # `make test` sees the same inputs every time
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


# --- the property ------------------------------------------------------------------------------


# The slowest input known takes ~10 ms; a quadratic or exponential path in the parser or the
# validators (the deep dotted keys once took seconds) lands far above this.
LOAD_CPU_LIMIT_S = 1.0


def check_load(data: bytes) -> spec.Experiment | SpecError:
    """Load `data` from a file; assert the outcome is an Experiment or a well-formed SpecError,
    reached within LOAD_CPU_LIMIT_S of CPU time. Returns the one it got."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.toml"
        path.write_bytes(data)
        started = time.process_time()
        try:
            outcome: spec.Experiment | SpecError = spec.load(path)
        except SpecError as exc:
            outcome = exc
        else:
            outcome.cells()  # part of loading: the matrix is built from the file
        used = time.process_time() - started
    assert used < LOAD_CPU_LIMIT_S, f"{used:.2f} s of CPU to load {len(data)} bytes: {data[:200]!r}"
    if isinstance(outcome, SpecError):
        check_error(outcome)
    else:
        check_experiment(outcome)
    return outcome


def check_error(exc: SpecError) -> None:
    assert exc.exit_code == EXIT_USAGE
    assert exc.problems, "a SpecError must carry at least one problem"
    for problem in exc.problems:
        for part in (problem.path, problem.expected, problem.found):
            assert isinstance(part, str) and part.strip(), problem
            # one problem per line: user input never adds lines or terminal escapes to the report
            assert part.isprintable(), problem
        assert problem.hint is None or problem.hint.isprintable(), problem
    message = exc.message
    assert message.count("\n") == sum(1 + (p.hint is not None) for p in exc.problems)


def check_experiment(exp: spec.Experiment) -> None:
    cells = exp.cells()  # bounded: the file's limits keep this small and quick
    assert cells
    for cell in cells[:50]:
        for name, value in cell.env.items():
            assert ENV_NAME.fullmatch(name) and "\0" not in value, (name, value)
        check_option_file(cell.server_options)


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_option_file(options: dict[str, Any]) -> None:
    """Every option is one line of the option file and reads back as written."""
    lines = [mysqld.option_line(name, value) for name, value in options.items()]
    assert all("\n" not in line and "\r" not in line and "\0" not in line for line in lines)
    assert read_option_lines(lines) == [(name, _as_read(value)) for name, value in options.items()]


def _as_read(value: Any) -> str | None:
    return None if value is True else "0" if value is False else str(value)


def read_option_lines(lines: list[str]) -> list[tuple[str, str | None]]:
    """MariaDB's option-file reader for one group (mysys/my_default.c): comments, quotes and
    backslash escapes, which the server applies to every value, quoted or not."""
    options = []
    for line in lines:
        line = line.strip(" \t")
        assert line and line[0] not in "#;[!", f"not an option line: {line!r}"
        line = _remove_end_comment(line)
        name, eq, value = line.partition("=")
        if not eq:
            options.append((name.strip(), None))
            continue
        value = value.strip(" \t\r\n\v\f")
        if len(value) > 1 and value[0] in "\"'" and value[0] == value[-1]:
            value = value[1:-1]
        options.append((name.strip(), _unescape(value)))
    return options


def _remove_end_comment(line: str) -> str:
    quote, escape = "", False
    for i, char in enumerate(line):
        if char in "\"'" and not escape:
            quote = char if not quote else ("" if quote == char else quote)
        if not quote and char == "#":
            return line[:i]
        escape = bool(quote) and char == "\\" and not escape
    return line


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "s": " ", '"': '"', "'": "'", "\\": "\\"}


def _unescape(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        if value[i] == "\\" and i != len(value) - 1:
            i += 1
            out.append(_ESCAPES.get(value[i], "\\" + value[i]))
        else:
            out.append(value[i])
        i += 1
    return "".join(out)


# --- generators --------------------------------------------------------------------------------


def toml_string(text: str) -> str:
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (dt.date, dt.time)):  # datetimes are dates
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{ " + ", ".join(f"{toml_string(k)} = {toml_value(v)}" for k, v in value.items()) + " }"


def toml_document(doc: dict[str, Any]) -> str:
    return "".join(f"{toml_string(k)} = {toml_value(v)}\n" for k, v in doc.items())


# values a user might plausibly (or maliciously) write somewhere in the file
TRICKY_STRINGS = [
    "",
    " ",
    "auto",
    "20s",
    "1m30s",
    "500ms",
    "99999999999999999999h",
    "1%",
    "150%",
    "nan%",
    "glibc",
    "jemalloc",
    "tcmalloc",
    "mimalloc",
    "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "/bin/ls",
    "/tmp",
    "/etc/passwd",
    "/nonexistent.so",
    "/" + "a" * 300,
    "/dev/null",
    "oltp_read_only",
    "x.lua",
    "a\nb",
    "a\rb",
    "a\0b",
    "x=y",
    "#",
    "a # b",
    "[mariadbd]",
    "\n[client]\nx=1",
    '"',
    "'q'",
    '"q"',
    "\\",
    "a\\nb",
    "C:\\temp",
    " lead",
    "trail ",
    "\t",
    "\x1b[31m",
    "\u2028",
    "\ufeff",
    "é",
    "💥",
    "2M",
    "OFF",
    "ON",
    "-1",
    "1e308",
    "LD_PRELOAD",
    "1BAD",
    "A-B",
]
SCALARS = st.one_of(
    st.sampled_from(TRICKY_STRINGS),
    st.text(max_size=20),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, -1, 2**63, 10**30, 10**300, 99999999999]),
    st.floats(),
    st.booleans(),
    st.dates(),
    st.datetimes(),
    st.times(),
)
KEY_NAMES = [
    "experiment",
    "dataset",
    "workload",
    "server_options",
    "variants",
    "observe",
    "name",
    "server",
    "duration",
    "warmup",
    "max_warmup",
    "repeats",
    "target_ci",
    "min_repeats",
    "max_repeats",
    "time_budget",
    "pin",
    "stall_threshold",
    "measure_again",
    "cv_warning",
    "tables",
    "table_size",
    "tool",
    "test",
    "threads",
    "options",
    "preload",
    "env",
    "rss",
    "sort_buffer_size",
    "datadir",
    "socket",
    "MALLOC_ARENA_MAX",
    "range_size",
    "strict_mode",
    "int",
    "str",
    "[key]",
    "a.b",
    "a=b",
    "",
    " ",
    "a\nb",
    "\x1b[2J",
]
KEYS = st.one_of(st.sampled_from(KEY_NAMES), st.text(max_size=12))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=12,
)

NAMES = st.one_of(st.sampled_from(["t", "quick", "a.b-c_d"]), st.text(max_size=10), VALUES)
DURATIONS = st.one_of(
    st.sampled_from(["auto", "1s", "20s", "1m30s", "500ms", "2h", "48h"]), st.integers(-2, 10**6), st.floats(), VALUES
)
COUNTS = st.one_of(
    st.integers(-2, 12), st.integers(-(2**63), 2**63 - 1), st.sampled_from([2**31, 10**9, 10**30]), VALUES
)
OPTION_VALUES = st.one_of(st.sampled_from(TRICKY_STRINGS), st.text(), st.integers(), st.floats(), st.booleans(), VALUES)
OPTION_NAMES = st.one_of(
    st.sampled_from(["sort_buffer_size", "innodb-buffer-pool-size", "datadir", "log_error", "x", "a=b", "a\n", "[x]"]),
    st.text(max_size=10),
)
SERVER_OPTIONS = st.dictionaries(OPTION_NAMES, OPTION_VALUES, max_size=4)
ENV = st.dictionaries(
    st.one_of(
        st.sampled_from(["MALLOC_ARENA_MAX", "GLIBC_TUNABLES", "LD_PRELOAD", "A=B", "A\n", "1BAD"]), st.text(max_size=8)
    ),
    OPTION_VALUES,
    max_size=3,
)


def _section(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """A table with some of `fields` (and sometimes a stray key), or sometimes anything at all."""
    table = st.fixed_dictionaries({}, optional=fields).flatmap(
        lambda d: st.dictionaries(KEYS, VALUES, max_size=1).map(lambda extra: {**d, **extra}) if not d else st.just(d)
    )
    return st.one_of(table, table, table, VALUES)


VARIANT = _section(
    {"preload": st.one_of(st.sampled_from(TRICKY_STRINGS), VALUES), "env": ENV, "server_options": SERVER_OPTIONS}
)
AXES = st.dictionaries(
    st.one_of(st.sampled_from(["allocator", "sort_buffer", "bad axis"]), st.text(max_size=6)),
    st.one_of(
        st.dictionaries(
            st.one_of(st.sampled_from(["glibc", "jemalloc", "32K", "a/b"]), st.text(max_size=6)), VARIANT, max_size=3
        ),
        VALUES,
    ),
    max_size=3,
)
DOCUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "experiment": _section(
            {
                "name": NAMES,
                "server": st.one_of(st.just("mariadb"), VALUES),
                "duration": DURATIONS,
                "warmup": DURATIONS,
                "max_warmup": DURATIONS,
                "repeats": st.one_of(st.just("auto"), COUNTS),
                "target_ci": st.one_of(st.sampled_from(["1%", "0.5%", 0.01]), VALUES),
                "min_repeats": COUNTS,
                "max_repeats": COUNTS,
                "time_budget": DURATIONS,
                "pin": st.one_of(st.booleans(), VALUES),
                "stall_threshold": VALUES,
                "measure_again": st.one_of(st.booleans(), VALUES),
                "cv_warning": VALUES,
            }
        ),
        "dataset": _section({"tables": COUNTS, "table_size": COUNTS}),
        "workload": _section(
            {
                "tool": st.one_of(st.just("sysbench"), VALUES),
                "test": st.one_of(st.sampled_from(TRICKY_STRINGS), VALUES),
                "threads": st.one_of(st.lists(COUNTS, max_size=5), COUNTS),
                "options": st.dictionaries(OPTION_NAMES, OPTION_VALUES, max_size=3),
            }
        ),
        "server_options": SERVER_OPTIONS,
        "variants": AXES,
        "observe": _section({"rss": st.one_of(st.booleans(), VALUES)}),
    },
)
# Most generated documents get a valid experiment name, so validation goes past `experiment`.
VALID_HEAD = {"experiment": {"name": "t"}}


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    doc = draw(DOCUMENTS)
    if draw(st.integers(0, 3)):
        doc = (
            {**doc, "experiment": {**VALID_HEAD["experiment"], **(doc.get("experiment") or {})}}
            if isinstance(doc.get("experiment", {}), dict)
            else doc
        )
    if draw(st.integers(0, 9)) == 0:
        doc = {**doc, **draw(st.dictionaries(KEYS, VALUES, max_size=2))}
    return toml_document(doc).encode("utf-8")


@st.composite
def near_valid(draw: st.DrawFn) -> bytes:
    """An example file with one to three values replaced (or keys added) anywhere in it: each
    validator meets hostile values while the rest of the file is valid."""
    doc = tomllib.loads(draw(st.sampled_from(EXAMPLES)).read_text(encoding="utf-8"))
    for _ in range(draw(st.integers(1, 3))):
        node = doc
        while isinstance(node, dict) and node and draw(st.integers(0, 4)):
            key = draw(st.sampled_from(sorted(node)))
            if not isinstance(node[key], dict):
                break
            node = node[key]
        if isinstance(node, dict):
            existing = st.sampled_from(sorted(node) or ["x"])
            key = draw(st.one_of(existing, existing, existing, KEYS))  # mostly a value, sometimes a new key
            node[key] = draw(st.one_of(VALUES, OPTION_VALUES, SERVER_OPTIONS, VARIANT))
    return toml_document(doc).encode("utf-8")


TOKENS = [
    b"[",
    b"]",
    b"{",
    b"}",
    b"=",
    b'"',
    b"'",
    b"\n",
    b"#",
    b"\\",
    b"\x00",
    b"\xff",
    b"\xef\xbb\xbf",
    b".",
    b",",
    b"99999999999999999999999999",
    b"1" * 5000,
    b"1e308",
    b"nan",
    b"-inf",
    b"true",
    b"[[",
    b"]]",
    b'"""',
    b"'''",
    b"[" * 3000,
    b"{a=" * 2000,
    b"1979-05-27T07:32:00Z",
    b"\r\n",
    b"\t",
    b" ",
    b"\\u0000",
    b"[variants.x]\n",
    b"[server_options]\n",
    b'preload = "/bin/ls"\n',
    b"threads = [0, 99999999999]\n",
]


@st.composite
def mutations(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(EXAMPLES)).read_bytes())
    for _ in range(draw(st.integers(1, 6))):
        where = draw(st.integers(0, len(data)))
        op = draw(st.integers(0, 4))
        if op == 0:  # delete a run of bytes
            del data[where : where + draw(st.integers(1, 40))]
        elif op == 1:  # insert a token
            data[where:where] = draw(st.sampled_from(TOKENS))
        elif op == 2:  # insert random bytes
            data[where:where] = draw(st.binary(min_size=1, max_size=8))
        elif op == 3:  # replace one byte
            if where < len(data):
                data[where] = draw(st.integers(0, 255))
        else:  # duplicate a line
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            data = bytearray(b"\n".join([*lines[: i + 1], lines[i], *lines[i + 1 :]]))
    return bytes(data)


# --- the fuzz tests ------------------------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=2000))
def test_fuzz_arbitrary_bytes(data: bytes) -> None:
    check_load(data)


@FUZZ
@given(st.text(alphabet=string.printable + "\x00\x7f\ufeffé", max_size=400))
def test_fuzz_arbitrary_text(text: str) -> None:
    check_load(text.encode("utf-8"))


@FUZZ
@given(documents())
def test_fuzz_documents(data: bytes) -> None:
    check_load(data)


@FUZZ
@given(near_valid())
def test_fuzz_near_valid_examples(data: bytes) -> None:
    check_load(data)


@FUZZ
@given(mutations())
def test_fuzz_mutated_examples(data: bytes) -> None:
    check_load(data)


OPTION_TEXT = st.text(st.characters(blacklist_categories=["Cs", "Cc"]) | st.sampled_from("\t=#[]\"'\\ "), max_size=30)


@FUZZ
@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True), OPTION_TEXT, max_size=6))
def test_fuzz_option_file_reads_back(options: dict[str, str]) -> None:
    """Any value the spec accepts is one line of the option file and reads back as written."""
    check_option_file(options)


# --- the regression corpus: every input that once broke the loader ---------------------------------


CORPUS_FILES = sorted(CORPUS.iterdir())
EXPECTED = tomllib.loads(CORPUS_EXPECTED.read_text(encoding="utf-8"))


def test_corpus_manifest_lists_every_file() -> None:
    assert sorted(EXPECTED) == [p.name for p in CORPUS_FILES], f"add the new file's outcome to {CORPUS_EXPECTED}"


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_corpus(path: Path) -> None:
    expected = EXPECTED.get(path.name)
    assert expected is not None, f"{path.name}: no expected outcome in {CORPUS_EXPECTED}"
    outcome = check_load(path.read_bytes())
    if expected["outcome"] == "accepted":
        assert isinstance(outcome, spec.Experiment), f"refused: {outcome}"
        assert len(outcome.cells()) == expected["cells"]
        return
    assert expected["outcome"] == "refused"
    assert isinstance(outcome, SpecError) and outcome.exit_code == EXIT_USAGE, "accepted an input that must be refused"
    found = {p.path: p.found for p in outcome.problems}
    assert expected["path"] in found, f"refused, but not at {expected['path']}: {outcome.message}"
    assert expected["found"] in found[expected["path"]], outcome.message


# --- the CLI, as a user runs it, on a handful of corpus files ------------------------------------

CLI_CASES = [
    "binary-junk.bin",
    "not-utf8-latin1.toml",
    "nul-bytes.toml",
    "deep-arrays-10000.toml",
    "int-5000-digits.toml",
    "repeats-1e18.toml",
    "axes-2pow30.toml",
    "preload-executable.toml",
]


@pytest.fixture
def fake_path(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose server, client and process tools only write down that they were started."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    started = tmp_path / "started.log"
    for name in ("mariadbd", "mariadb-install-db", "mariadb", "sysbench", "setpriv", "taskset"):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} $*" >> "{started}"\nexit 1\n', encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT)}
    return env, started


@pytest.mark.parametrize("name", CLI_CASES)
def test_cli_check_hostile_file(name: str, tmp_path: Path, fake_path: tuple[dict[str, str], Path]) -> None:
    env, started = fake_path
    done = subprocess.run(
        [sys.executable, "-m", "perflab", "run", str(CORPUS / name), "--check"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == EXIT_USAGE, done.stderr
    assert done.stderr.startswith("error: "), done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not started.exists(), f"a process was started: {started.read_text()}"
    assert set(tmp_path.iterdir()) == {tmp_path / "bin"}  # no results directory


def test_cli_directory_as_experiment_file(tmp_path: Path, fake_path: tuple[dict[str, str], Path]) -> None:
    env, started = fake_path
    (folder := tmp_path / "my experiments").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "perflab", "run", str(folder), "--check"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "is a directory" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not started.exists()
