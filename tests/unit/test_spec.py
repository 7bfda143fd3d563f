"""The experiment file: every problem reported at once with key path, expectation, finding and
hint (Python API and `perflab run` as a user runs it), and the matrix of cells it expands to."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from perflab import allocators, spec
from perflab.errors import EXIT_USAGE, Problem, SpecError

ROOT = Path(__file__).resolve().parents[2]
HEAD = '[experiment]\nname = "t"\n'


def problems_of(text: str) -> list[Problem]:
    with pytest.raises(SpecError) as info:
        spec.parse(text, "bad.toml")
    assert info.value.exit_code == EXIT_USAGE
    assert info.value.problems, "a SpecError must carry at least one problem"
    return info.value.problems


def only_problem(text: str) -> Problem:
    problems = problems_of(text)
    assert len(problems) == 1, "\n".join(p.render() for p in problems)
    return problems[0]


def by_path(problems: list[Problem]) -> dict[str, Problem]:
    paths = [p.path for p in problems]
    assert len(paths) == len(set(paths)), f"one problem per key path expected, got {paths}"
    return {p.path: p for p in problems}


# --- one problem per file: the right key path, expectation, finding and hint -------------

CASES = [
    # (id, file text, key path, in `expected`, in `found`, in `hint`): every problem has a hint
    ("unknown-top-level-key", 'colour = "red"\n' + HEAD, "colour", "no such key", "'colour'", "spelling"),
    (
        "unknown-key-in-section",
        HEAD + 'durration = "5s"\n',
        "experiment.durration",
        "no such key",
        "'durration'",
        "did you mean duration?",
    ),
    (
        "unknown-key-in-workload",
        HEAD + "[workload]\nthread = [1]\n",
        "workload.thread",
        "no such key",
        "'thread'",
        "did you mean threads?",
    ),
    (
        "unknown-key-in-variant",
        HEAD + '[variants.alloc]\na = { prelaod = "jemalloc" }\n',
        "variants.alloc.a.prelaod",
        "no such key",
        "'prelaod'",
        "did you mean preload?",
    ),
    ("missing-experiment", "", "experiment", "a value", "nothing", "add experiment"),
    ("missing-name", '[experiment]\nduration = "5s"\n', "experiment.name", "a value", "nothing", "add name"),
    ("experiment-not-a-table", 'experiment = "x"\n', "experiment", "a table", "str 'x'", "write it like a [section]"),
    ("repeats-string", HEAD + 'repeats = "3"\n', "experiment.repeats", "an integer", "str '3'", "write it like 3"),
    ("repeats-zero", HEAD + "repeats = 0\n", "experiment.repeats", ">= 1", "int 0", "use 1 or more"),
    ("pin-string", HEAD + 'pin = "yes"\n', "experiment.pin", "true or false", "str 'yes'", "write it like true"),
    (
        "server-literal",
        HEAD + 'server = "oracle"\n',
        "experiment.server",
        "'mariadb'",
        "str 'oracle'",
        "leave the key out",
    ),
    (  # Debian 12 has no MySQL: server = "mysql" runs builds only (servers/mysql/)
        "mysql-without-a-build",
        HEAD + 'server = "mysql"\n[variants.a]\nx = {}\n',
        "variants.a.x.build",
        "a MySQL build",
        "none: the installed server",
        'package = "mysql-server-core", suite = "sid"',
    ),
    (
        "bad-name",
        HEAD.replace('"t"', '"my exp"'),
        "experiment.name",
        "letters, digits",
        "str 'my exp'",
        "results directory",
    ),
    (
        "tables-float",
        HEAD + "[dataset]\ntables = 1.5\n",
        "dataset.tables",
        "an integer",
        "float 1.5",
        "write it like 3",
    ),
    ("table-size-zero", HEAD + "[dataset]\ntable_size = 0\n", "dataset.table_size", ">= 1", "int 0", "use 1 or more"),
    (
        "threads-string",
        HEAD + '[workload]\nthreads = "many"\n',
        "workload.threads",
        "a list",
        "str 'many'",
        "write it like [1, 2]",
    ),
    (
        "threads-item-string",
        HEAD + '[workload]\nthreads = [1, "two"]\n',
        "workload.threads.1",
        "an integer",
        "str 'two'",
        "write it like 3",
    ),
    (
        "threads-item-bool",
        HEAD + "[workload]\nthreads = [true]\n",
        "workload.threads.0",
        "an integer",
        "bool True",
        "write it like 3",
    ),
    ("threads-empty", HEAD + "[workload]\nthreads = []\n", "workload.threads", "non-empty", "a list []", "threads ="),
    (
        "threads-repeated",
        HEAD + "[workload]\nthreads = [1, 2, 2]\n",
        "workload.threads",
        "distinct",
        "[1, 2, 2]",
        "remove the repeated [2]",
    ),
    (
        "bad-test-name",
        HEAD + '[workload]\ntest = "oltp read"\n',
        "workload.test",
        "sysbench test name",
        "str 'oltp read'",
        "/usr/share/sysbench",
    ),
    (
        "reserved-workload-option",
        HEAD + "[workload]\noptions = { threads = 4 }\n",
        "workload.options.threads",
        "perflab sets it",
        "'threads'",
        "workload.threads",
    ),
    (
        "reserved-workload-option-dashes",
        HEAD + '[workload]\noptions = { "report-interval" = 5 }\n',
        "workload.options.report-interval",
        "perflab sets it",
        "'report-interval'",
        "workload.threads",
    ),
    (
        "bad-workload-option-name",
        HEAD + '[workload]\noptions = { "range size" = 5 }\n',
        "workload.options.range size",
        "option name",
        "'range size'",
        "sysbench <test> help",
    ),
    (
        "fractional-duration",
        HEAD.replace('name = "t"', 'name = "t"\nduration = "2500ms"'),
        "experiment.duration",
        "whole seconds",
        "2500ms",
        "use 2s",
    ),
    (
        "bad-variant-label",
        HEAD + '[variants.allocator]\n"a/b" = {}\n',
        "variants.allocator.a/b",
        "variant label",
        "'a/b'",
        "no spaces",
    ),
    ("rss-int", HEAD + "[observe]\nrss = 1\n", "observe.rss", "true or false", "int 1", "write it like true"),
    (
        "unknown-allocator",
        HEAD + '[variants.allocator]\nfoo = { preload = "foomalloc" }\n',
        "variants.allocator.foo.preload",
        "absolute path",
        "str 'foomalloc'",
        "known allocators: glibc, jemalloc, tcmalloc, mimalloc",
    ),
    (
        "preload-missing-file",
        HEAD + '[variants.allocator]\nfoo = { preload = "/nonexistent/libnothing.so" }\n',
        "variants.allocator.foo.preload",
        "an existing .so file",
        "'/nonexistent/libnothing.so'",
        "check the path",
    ),
    (
        "preload-not-a-string",
        HEAD + "[variants.allocator]\nfoo = { preload = 5 }\n",
        "variants.allocator.foo.preload",
        "a string",
        "int 5",
        'write it like "text"',
    ),
    (
        "env-name-digit",
        HEAD + '[variants.v]\nx = { env = { 1BAD = "1" } }\n',
        "variants.v.x.env.1BAD",
        "environment variable name",
        "'1BAD'",
        "not starting with a digit",
    ),
    (
        "env-name-dash",
        HEAD + '[variants.v]\nx = { env = { MALLOC-ARENA = "1" } }\n',
        "variants.v.x.env.MALLOC-ARENA",
        "environment variable name",
        "'MALLOC-ARENA'",
        "letters, digits and '_'",
    ),
    (
        "env-name-space",
        HEAD + '[variants.v]\nx = { env = { "A B" = "1" } }\n',
        "variants.v.x.env.A B",
        "environment variable name",
        "'A B'",
        "letters",
    ),
    (
        "env-ld-preload",
        HEAD + '[variants.v]\nx = { env = { LD_PRELOAD = "/x.so" } }\n',
        "variants.v.x.env.LD_PRELOAD",
        "no LD_PRELOAD",
        "'LD_PRELOAD'",
        "preload =",
    ),
    (
        "env-value-list",
        HEAD + "[variants.v]\nx = { env = { A = [1] } }\n",
        "variants.v.x.env.A",
        "a string",
        "a list [1]",
        'write it like "text", 3 or 2.5',
    ),
    (
        "server-option-newline",
        'server_options = { init_connect = "SET @a=1\\nSET @b=2" }\n' + HEAD,
        "server_options.init_connect",
        "one-line",
        "SET @a=1\\nSET @b=2",
        "one option per line",
    ),
    (
        "server-option-carriage-return",
        'server_options = { init_connect = "x\\ry" }\n' + HEAD,
        "server_options.init_connect",
        "one-line",
        "x\\ry",
        "one option per line",
    ),
    (
        "variant-server-option-newline",
        HEAD + '[variants.v]\nx = { server_options = { init_connect = "a\\nb" } }\n',
        "variants.v.x.server_options.init_connect",
        "one-line",
        "a\\nb",
        "one option per line",
    ),
    (
        "server-option-bad-name",
        'server_options = { "sort buffer" = 1 }\n' + HEAD,
        "server_options.sort buffer",
        "server option name",
        "'sort buffer'",
        "letters, digits",
    ),
    (
        "empty-axis",
        HEAD + "[variants.empty]\n",
        "variants.empty",
        "at least one variant",
        "an empty table",
        "baseline = {}",
    ),
    (
        "axis-not-a-table",
        HEAD + '[variants]\nalloc = "jemalloc"\n',
        "variants.alloc",
        "a table",
        "str 'jemalloc'",
        "write it like { key = value }",
    ),
    (
        "bad-axis-name",
        HEAD + '[variants."bad axis"]\na = {}\n',
        "variants.bad axis",
        "axis name",
        "'bad axis'",
        "column of the report",
    ),
]


@pytest.mark.parametrize(
    ("text", "path", "expected", "found", "hint"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_single_problem(text: str, path: str, expected: str, found: str, hint: str) -> None:
    problem = only_problem(text)
    assert problem.path == path
    assert expected in problem.expected
    assert found in problem.found
    assert problem.hint and hint in problem.hint
    assert problem.render() == f"{path}: expected {problem.expected}, found {problem.found}\n    hint: {problem.hint}"


@pytest.mark.parametrize(
    "value", ['"ten seconds"', '"5"', '"-5s"', "true", '"1x"', '""', "-3", "nan", "inf", "[5]", '"1m30"']
)
@pytest.mark.parametrize("key", ["duration", "warmup"])
def test_bad_duration(key: str, value: str) -> None:
    problem = only_problem(HEAD + f"{key} = {value}\n")
    assert problem.path == f"experiment.{key}"
    assert problem.expected == {"duration": "a duration", "warmup": "one of 'auto' or a duration"}[key]
    assert problem.hint and '"1m30s"' in problem.hint


def test_duration_below_one_second() -> None:
    problem = only_problem(HEAD + 'duration = "500ms"\n')
    assert problem.path == "experiment.duration"
    assert "at least 1s" in problem.expected


@pytest.mark.parametrize(
    ("threads", "hint"),
    [
        ("[0]", "remove [0]"),
        ("[-1, 2]", "remove [-1]"),
        ("0", "remove [0]"),
        ("-4", "remove [-4]"),
        ("[1, 0, 4, -3]", "remove [0, -3]"),
    ],
)
def test_threads_not_positive(threads: str, hint: str) -> None:
    """The hint names exactly the bad thread counts."""
    problem = only_problem(HEAD + f"[workload]\nthreads = {threads}\n")
    assert problem.path == "workload.threads"
    assert ">= 1" in problem.expected
    assert problem.hint == hint


def test_unknown_allocator_lists_every_known_name() -> None:
    problem = only_problem(HEAD + '[variants.allocator]\nfoo = { preload = "foomalloc" }\n')
    for name in allocators.NAMES:
        assert name in (problem.hint or "")
        assert name in problem.expected


def test_existing_preload_path_is_accepted(tmp_path: Path) -> None:
    lib = tmp_path / "libfake.so"
    shutil.copyfile("/usr/lib/x86_64-linux-gnu/libc.so.6", lib)  # a real shared object (see test_fuzz_spec)
    exp = spec.parse(HEAD + f'[variants.allocator]\nfake = {{ preload = "{lib}" }}\n')
    assert [c.preload for c in exp.cells()] == [str(lib)] * 3


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("this is not toml\n", 1),
        ('[experiment]\nname = "t"\nduration = = 5\n', 3),
        ('[experiment]\nname = "t"\n\n\n[workload\n', 5),
        ('[experiment]\nname = "unterminated\n', 2),
        ("{\x00}\n", 1),
    ],
)
def test_not_toml_names_the_line(text: str, line: int) -> None:
    problem = only_problem(text)
    assert problem.path == "(file)"
    assert problem.expected == "valid TOML"
    assert f"line {line}," in problem.found
    assert f"line {line}," in problem.render()


# --- union members: pydantic's tags leave the path, the user's keys stay ------------------

UNION_KEYS = ["strict_mode", "integer_x", "float_size", "bool_flag", "str", "int", "function_x", "none"]


@pytest.mark.parametrize("where", ["server_options", "variants.v.x.server_options", "workload.options"])
def test_union_tags_are_dropped_and_user_keys_survive(where: str) -> None:
    table = "{ " + ", ".join(f"{k} = [1]" for k in UNION_KEYS) + " }"
    if where == "server_options":
        text = f"server_options = {table}\n" + HEAD
    elif where == "workload.options":
        text = HEAD + f"[workload]\noptions = {table}\n"
    else:
        text = HEAD + f"[variants.v]\nx = {{ server_options = {table} }}\n"
    problems = by_path(problems_of(text))  # also: one problem per key, not one per union member
    assert set(problems) == {f"{where}.{k}" for k in UNION_KEYS}
    for problem in problems.values():
        for member in ("a string", "an integer", "a number", "true or false"):
            assert member in problem.expected
        assert problem.found == "a list [1]"


def test_union_problem_is_one_line_per_key() -> None:
    problems = problems_of("server_options = { strict_mode = [1] }\n" + HEAD)
    assert len(problems) == 1
    assert problems[0].render() == (
        "server_options.strict_mode: expected a string, an integer, a number or true or false, found a list [1]\n"
        '    hint: write it like "text", 3, 2.5 or true'
    )


def test_env_union_collapsed() -> None:
    problem = only_problem(HEAD + "[variants.v]\nx = { env = { integer_x = { a = 1 } } }\n")
    assert problem.path == "variants.v.x.env.integer_x"
    assert problem.expected == "a string, an integer or a number"


def test_newline_check_and_type_check_in_one_table() -> None:
    """A bad value does not hide a bad neighbour: both are reported, each at its own key."""
    text = 'server_options = { strict_mode = "a\\nb", integer_x = [1], "bad name" = 1 }\n' + HEAD
    problems = by_path(problems_of(text))
    assert set(problems) == {"server_options.strict_mode", "server_options.integer_x", "server_options.bad name"}
    assert "one-line" in problems["server_options.strict_mode"].expected


@pytest.mark.parametrize(
    ("loc", "raw", "path"),
    [
        (
            ("server_options", "strict_mode", "str"),
            {"server_options": {"strict_mode": [1]}},
            "server_options.strict_mode",
        ),
        (("server_options", "integer_x", "int"), {"server_options": {"integer_x": [1]}}, "server_options.integer_x"),
        (
            ("workload", "options", "x", "function-after[_one_line(), union[str,int,float,bool]]"),
            {"workload": {"options": {"x": [1]}}},
            "workload.options.x",
        ),
        (("server_options", "str", "str"), {"server_options": {"str": [1]}}, "server_options.str"),
        (
            ("variants", "v", "x", "env", "1BAD", "[key]"),
            {"variants": {"v": {"x": {"env": {"1BAD": "1"}}}}},
            "variants.v.x.env.1BAD",
        ),
        (("experiment", "name"), {"experiment": {}}, "experiment.name"),  # missing: not in the file, kept
        (("workload", "threads", 1), {"workload": {"threads": [1, "two"]}}, "workload.threads.1"),
        (("server_options", "strict_mode", "float"), None, "server_options.strict_mode"),  # without the file
        ((), {}, "(top level)"),
    ],
)
def test_problem_path_from_pydantic_loc(loc: tuple, raw: object, path: str) -> None:
    err = {"loc": loc, "type": "string_type", "input": [1], "msg": "Input should be a valid string"}
    assert spec.problem(err, raw).path == path


# --- every problem at once -----------------------------------------------------------------

MANY = """\
colour = "red"
server_options = { init_connect = "a\\nb", strict_mode = [1] }

[experiment]
name = "bad name"
duration = "ten seconds"
warmup = -1
repeats = 0

[dataset]
tables = "four"

[workload]
threads = [2, 0]
options = { time = 5 }

[variants.allocator]
foo = { preload = "foomalloc" }
bar = { preload = "/nonexistent/libbar.so", env = { "1BAD" = "x", GOOD = "y", LD_PRELOAD = "z" } }
baz = { server_options = { sort_buffer_size = "1M\\n" } }

[variants.empty]
"""
MANY_PATHS = {
    "colour",
    "server_options.init_connect",
    "server_options.strict_mode",
    "experiment.name",
    "experiment.duration",
    "experiment.warmup",
    "experiment.repeats",
    "dataset.tables",
    "workload.threads",
    "workload.options.time",
    "variants.allocator.foo.preload",
    "variants.allocator.bar.preload",
    "variants.allocator.bar.env.1BAD",
    "variants.allocator.bar.env.LD_PRELOAD",
    "variants.allocator.baz.server_options.sort_buffer_size",
    "variants.empty",
}


def test_every_problem_reported_at_once() -> None:
    problems = by_path(problems_of(MANY))
    assert set(problems) == MANY_PATHS
    assert all(p.expected and p.found and p.hint for p in problems.values())
    with pytest.raises(SpecError) as info:
        spec.parse(MANY, "many.toml")
    message = info.value.message
    assert message.startswith(f"many.toml: {len(MANY_PATHS)} problems\n")
    for path in MANY_PATHS:
        assert f"\n  {path}: expected " in message


def test_conflicting_preload_across_axes() -> None:
    text = HEAD + '[variants.a]\nx = { preload = "jemalloc" }\n[variants.b]\ny = { preload = "tcmalloc" }\n'
    problem = only_problem(text)
    assert problem.path == "variants"
    assert "preload" in problem.found and "jemalloc" in problem.found and "tcmalloc" in problem.found
    assert problem.hint and "one axis" in problem.hint


@pytest.mark.parametrize(
    ("a", "b", "what"),
    [
        ('env = { A = "1" }', 'env = { A = "2" }', "env.A"),
        (
            "server_options = { sort_buffer_size = 1 }",
            "server_options = { sort_buffer_size = 2 }",
            "server_options.sort_buffer_size",
        ),
    ],
)
def test_conflicting_setting_across_axes(a: str, b: str, what: str) -> None:
    problem = only_problem(HEAD + f"[variants.a]\nx = {{ {a} }}\n[variants.b]\ny = {{ {b} }}\n")
    assert problem.path == "variants"
    assert what in problem.found


def test_conflict_reported_with_other_problems() -> None:
    text = (
        HEAD + 'repeats = 0\n[variants.a]\nx = { preload = "jemalloc" }\n[variants.b]\ny = { preload = "tcmalloc" }\n'
    )
    assert set(by_path(problems_of(text))) == {"experiment.repeats", "variants"}


def test_same_setting_on_two_axes_is_no_conflict() -> None:
    text = HEAD + (
        '[variants.a]\nx = { preload = "jemalloc", env = { A = "1" } }\n'
        '[variants.b]\ny = { preload = "jemalloc", env = { A = 1 } }\n'
    )
    (cell, *_) = spec.parse(text).cells()
    assert cell.preload == "jemalloc"
    assert cell.env == {"A": "1"}


# --- load(): files ---------------------------------------------------------------------------


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        spec.load(tmp_path / "nope.toml")
    (problem,) = info.value.problems
    assert problem.path == "(file)" and problem.found == "no such file"
    assert str(tmp_path / "nope.toml") in info.value.message


def test_load_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "binary.toml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SpecError) as info:
        spec.load(path)
    (problem,) = info.value.problems
    assert problem.path == "(file)" and "UTF-8" in problem.expected


def test_load_reports_problems_with_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(MANY, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        spec.load(path)
    assert info.value.message.startswith(f"{path}: {len(MANY_PATHS)} problems")
    assert {p.path for p in info.value.problems} == MANY_PATHS


def test_load_example() -> None:
    exp = spec.load(ROOT / "examples" / "quick.toml")
    assert exp.name == "quick"
    assert exp.file.experiment.duration == 8.0 and exp.file.experiment.window_start == 3.0
    assert exp.file.workload.test == "oltp_point_select" and exp.file.experiment.budget_s == 120.0
    assert exp.file.experiment.stop_rule == "verdict" and exp.file.experiment.design == "interleaved"
    assert [c.variant_key for c in exp.cells()] == ["general_log=OFF", "general_log=ON"] * 3


def test_defaults() -> None:
    exp = spec.parse(HEAD)
    file = exp.file
    assert (file.experiment.duration, file.experiment.warmup, file.experiment.repeats) == (20.0, "auto", None)
    # no repeats: rounds until every comparison has a verdict, within a 10-minute budget
    assert file.experiment.stop_rule == "verdict" and file.experiment.budget_s == 600.0
    assert file.experiment.spending == "pocock" and file.experiment.planned_repeats == 3
    assert file.experiment.window_start == 10.0 and file.experiment.stall_threshold == 0.5
    assert (file.dataset.tables, file.dataset.table_size) == (4, 10000)
    assert file.workload.test == "oltp_read_only" and file.workload.threads == [1]
    assert file.experiment.pin is False and file.observe.rss is True


def test_scalar_threads_become_a_list() -> None:
    assert spec.parse(HEAD + "[workload]\nthreads = 4\n").file.workload.threads == [4]


# --- cells: the matrix in run order -----------------------------------------------------------

MATRIX = """\
server_options = { innodb_buffer_pool_size = "512M", sort_buffer_size = "2M" }
[experiment]
name = "m"
repeats = 3
[workload]
threads = [1, 4]
[variants.allocator]
glibc = {}
jemalloc = { preload = "jemalloc", env = { MALLOC_CONF = "background_thread:true" } }
[variants.arena]
default = {}
one = { env = { MALLOC_ARENA_MAX = 1 } }
small = { env = { MALLOC_ARENA_MAX = 2 }, server_options = { sort_buffer_size = "256K", max_heap_table_size = "32M" } }
"""


def test_cells_are_the_product_of_axes_threads_and_repeats() -> None:
    cells = spec.parse(MATRIX).cells()
    assert len(cells) == 2 * 3 * 2 * 3
    assert [c.order for c in cells] == list(range(len(cells)))
    assert len({c.key for c in cells}) == len(cells)
    combos = {(c.variant["allocator"], c.variant["arena"], c.threads, c.repeat) for c in cells}
    assert combos == {
        (a, b, t, r)
        for a in ("glibc", "jemalloc")
        for b in ("default", "one", "small")
        for t in (1, 4)
        for r in (1, 2, 3)
    }


def test_cells_interleave_repeat_outermost() -> None:
    cells = spec.parse(MATRIX).cells()
    per_repeat = len(cells) // 3
    assert [c.repeat for c in cells] == [1] * per_repeat + [2] * per_repeat + [3] * per_repeat
    first = [(c.variant_key, c.threads) for c in cells[:per_repeat]]
    for r in (1, 2):
        assert [(c.variant_key, c.threads) for c in cells[r * per_repeat : (r + 1) * per_repeat]] == first


def test_two_variants_alternate() -> None:
    """A B A B ..., never A A B B: slow drift of the machine hits every variant alike."""
    text = HEAD + 'repeats = 4\n[variants.allocator]\nA = {}\nB = { preload = "jemalloc" }\n'
    labels = [c.variant["allocator"] for c in spec.parse(text).cells()]
    assert labels == ["A", "B", "A", "B", "A", "B", "A", "B"]
    assert all(x != y for x, y in zip(labels, labels[1:]))


def test_cells_merge_env_and_server_options_across_axes() -> None:
    cells = {(c.variant["allocator"], c.variant["arena"]): c for c in spec.parse(MATRIX).cells() if c.repeat == 1}
    cell = cells["jemalloc", "small"]
    assert cell.preload == "jemalloc"
    assert cell.env == {"MALLOC_CONF": "background_thread:true", "MALLOC_ARENA_MAX": "2"}
    # a variant's server option overrides the file's; the others are kept
    assert cell.server_options == {
        "innodb_buffer_pool_size": "512M",
        "sort_buffer_size": "256K",
        "max_heap_table_size": "32M",
    }
    plain = cells["glibc", "default"]
    assert plain.preload is None and plain.env == {}
    assert plain.server_options == {"innodb_buffer_pool_size": "512M", "sort_buffer_size": "2M"}
    assert cells["glibc", "one"].env == {"MALLOC_ARENA_MAX": "1"}  # env values become strings


def test_cell_keys() -> None:
    cell = spec.parse(MATRIX).cells()[0]
    assert cell.variant == {"allocator": "glibc", "arena": "default"}
    assert cell.variant_key == "allocator=glibc,arena=default"
    assert cell.key == "allocator=glibc,arena=default/t1/r1"


def test_no_variants_is_one_default_variant() -> None:
    cells = spec.parse(HEAD + "repeats = 2\n[workload]\nthreads = [1, 2]\n").cells()
    assert [(c.variant_key, c.threads, c.repeat) for c in cells] == [
        ("default", 1, 1),
        ("default", 2, 1),
        ("default", 1, 2),
        ("default", 2, 2),
    ]
    assert all(c.preload is None and c.env == {} for c in cells)


# --- the CLI, as a user runs it ----------------------------------------------------------------

TOOLS = ("mariadbd", "mariadb-install-db", "mariadb", "sysbench", "setpriv", "taskset")


@pytest.fixture
def fake_tools(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose server, client and process tools only write down that they were started."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    started = tmp_path / "started.log"
    for name in TOOLS:
        tool = bin_dir / name
        tool.write_text(f'#!/bin/sh\necho "{name} $*" >> "{started}"\nexit 1\n', encoding="utf-8")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    # this checkout's perflab, whatever is installed (the subprocess runs in tmp_path)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT)}
    return env, started


def run_cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "perflab", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60
    )


CLI_CASES = [
    (
        "unknown-allocator",
        HEAD + '[variants.allocator]\nfoo = { preload = "foomalloc" }\n',
        ["variants.allocator.foo.preload", "known allocators: glibc, jemalloc"],
    ),
    ("not-toml", "this is not toml\n", ["(file)", "line 1"]),
    ("threads", HEAD + "[workload]\nthreads = [0]\n", ["workload.threads", ">= 1"]),
    ("empty-axis", HEAD + "[variants.empty]\n", ["variants.empty", "at least one variant"]),
    (
        "newline",
        HEAD + '[variants.v]\nx = { server_options = { init_connect = "a\\nb" } }\n',
        ["variants.v.x.server_options.init_connect", "one-line"],
    ),
    ("many", MANY, [f"{len(MANY_PATHS)} problems", *MANY_PATHS]),
]


@pytest.mark.parametrize(("text", "needles"), [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_cli_run_bad_file(
    tmp_path: Path, fake_tools: tuple[dict[str, str], Path], text: str, needles: list[str]
) -> None:
    env, started = fake_tools
    bad = tmp_path / "bad.toml"
    bad.write_text(text, encoding="utf-8")
    out = tmp_path / "results-dir"
    done = run_cli(["run", str(bad), "-o", str(out)], env, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not out.exists()
    assert not started.exists(), f"a process was started: {started.read_text()}"
    assert str(bad) in done.stderr
    for needle in needles:
        assert needle in done.stderr


def test_cli_run_bad_file_without_output_option(tmp_path: Path, fake_tools: tuple[dict[str, str], Path]) -> None:
    env, started = fake_tools
    (tmp_path / "bad.toml").write_text(HEAD + "[workload]\nthreads = [-1]\n", encoding="utf-8")
    before = set(tmp_path.iterdir())
    done = run_cli(["run", "bad.toml"], env, tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "workload.threads" in done.stderr
    assert set(tmp_path.iterdir()) == before  # no results/ directory
    assert not started.exists()


def test_cli_fake_tools_do_record_a_start(tmp_path: Path, fake_tools: tuple[dict[str, str], Path]) -> None:
    """The detector used above works: a valid file gets as far as asking (fake) sysbench."""
    env, started = fake_tools
    good = tmp_path / "good.toml"
    good.write_text(HEAD, encoding="utf-8")
    done = run_cli(["run", str(good), "--check", "-o", str(tmp_path / "out")], env, tmp_path)
    assert started.exists() and "sysbench oltp_read_only help" in started.read_text()
    assert done.returncode == 2  # the fake sysbench knows no test
    assert "workload.test" in done.stderr
    assert not (tmp_path / "out").exists()


def test_cli_value_that_looks_like_markup(tmp_path: Path, fake_tools: tuple[dict[str, str], Path]) -> None:
    env, _ = fake_tools
    bad = tmp_path / "bad.toml"
    bad.write_text('[experiment]\nname = "[/x]"\n', encoding="utf-8")
    done = run_cli(["run", str(bad), "-o", str(tmp_path / "out")], env, tmp_path)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2
    assert "[/x]" in done.stderr


# --- steady state and adaptive repeats -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path", "expected", "hint"),
    [
        ('repeats = 3\ntarget_ci = "2%"\n', "experiment.target_ci", "no fixed repeats", "decided as it goes"),
        ('target_ci = "2%"\n', "experiment.target_ci", 'stop = "target_ci"', 'stop = "verdict" ends on verdicts'),
        ("repeats = 3\nmax_repeats = 5\n", "experiment.max_repeats", "no fixed repeats", "remove repeats"),
        ('repeats = 3\ntime_budget = "10m"\n', "experiment.time_budget", "no fixed repeats", "or time_budget"),
        ('repeats = 3\nbudget = "10m"\n', "experiment.budget", "no fixed repeats", "remove repeats"),
        ('budget = "soon"\n', "experiment.budget", "a duration", '"1m30s"'),
        ('budget = "1m"\ntime_budget = "2m"\n', "experiment.budget", "budget or time_budget", "older name"),
        ('budget = "10s"\n', "experiment.budget", "at least one round, about 33s here", "3 rounds"),
        ('spending = "fast"\n', "experiment.spending", "'pocock' or 'obrien-fleming'", "leave the key out"),
        (
            'repeats = "auto"\nmin_repeats = 5\nmax_repeats = 4\n',
            "experiment.max_repeats",
            "at least min_repeats (5)",
            "raise",
        ),
        ('repeats = "auto"\nmin_repeats = 2\n', "experiment.min_repeats", ">= 3", "use 3"),
        ('warmup = "3s"\nmax_warmup = "5s"\n', "experiment.max_warmup", 'warmup = "auto"', "remove it"),
        ('repeats = "many"\n', "experiment.repeats", "one of 'auto' or an integer", "write it like 3"),
        ('warmup = "soon"\n', "experiment.warmup", "one of 'auto' or a duration", '"1m30s"'),
        ('repeats = "auto"\ntarget_ci = "150%"\n', "experiment.target_ci", "between 0% and 100%", '"1%"'),
        ('stall_threshold = "half"\n', "experiment.stall_threshold", "a percentage", '"1%"'),
        ("cv_warning = true\n", "experiment.cv_warning", "a percentage", "0.01"),
    ],
)
def test_steady_and_adaptive_settings_errors(text: str, path: str, expected: str, hint: str) -> None:
    problem = only_problem(HEAD + text)
    assert problem.path == path
    assert expected in problem.expected
    assert problem.hint and hint in problem.hint


def test_adaptive_settings() -> None:
    exp = spec.parse(
        HEAD + 'repeats = "auto"\ntarget_ci = "0.5%"\nmax_repeats = 6\ntime_budget = "30m"\n'
        'stall_threshold = "30%"\n[variants.a]\nx = {}\ny = {}\n[workload]\nthreads = [1, 2]\n'
    )
    e = exp.file.experiment
    assert (e.adaptive, e.target_ci, e.min_repeats, e.max_repeats, e.time_budget) == (True, 0.005, 3, 6, 1800.0)
    assert e.stall_threshold == 0.3 and e.planned_repeats == 3
    assert len(exp.cells()) == 3 * 2 * 2  # the min_repeats rounds are planned
    fourth = exp.round(4, start=12, only={("a=y", 2)})
    assert [(c.order, c.key) for c in fourth] == [(12, "a=y/t2/r4")]
    assert [c.key for c in exp.round(1)] == ["a=x/t1/r1", "a=y/t1/r1", "a=x/t2/r1", "a=y/t2/r1"]


def test_window_start() -> None:
    assert spec.parse(HEAD + 'warmup = "7s"\n').file.experiment.window_start == 7.0
    assert spec.parse(HEAD + 'max_warmup = "15s"\n').file.experiment.window_start == 15.0


def test_cli_missing_tool_is_an_environment_problem(tmp_path: Path, fake_tools: tuple[dict[str, str], Path]) -> None:
    """Exit code 3 (the machine lacks something), not 2 (bad input), with the package to install."""
    env, started = fake_tools
    (tmp_path / "bin" / "sysbench").unlink()
    env = {**env, "PATH": str(tmp_path / "bin")}  # nothing else: sysbench is nowhere
    good = tmp_path / "good.toml"
    good.write_text(HEAD, encoding="utf-8")
    done = run_cli(["run", str(good), "-o", str(tmp_path / "out")], env, tmp_path)
    assert done.returncode == 3, done.stderr
    assert "(tool) sysbench: expected installed, found missing" in done.stderr
    assert "apt-get install sysbench" in done.stderr
    assert not (tmp_path / "out").exists() and not started.exists()
