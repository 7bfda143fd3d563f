"""Hostile and malformed experiment files, case by case: each gives a clear error (exit code 2)
naming where and what, never a traceback or a hang; server option and environment values
cannot add lines to the option file; preloads must be real shared libraries, and a path with
spaces works. The random side of this is test_fuzz_spec.py."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from perflab import elf, spec
from perflab.errors import EXIT_USAGE, Problem, SpecError
from perflab.servers import mysqld

HEAD = '[experiment]\nname = "t"\n'
LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
)


def toml_str(text: str) -> str:
    """`text` as a TOML basic string."""
    escaped = "".join(
        f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else "\\" + c if c in '"\\' else c for c in text
    )
    return f'"{escaped}"'


def problems_of(text: str) -> list[Problem]:
    with pytest.raises(SpecError) as info:
        spec.parse(text, "bad.toml")
    assert info.value.exit_code == EXIT_USAGE
    return info.value.problems


def only_problem(text: str) -> Problem:
    problems = problems_of(text)
    assert len(problems) == 1, "\n".join(p.render() for p in problems)
    return problems[0]


def load_problem(path: Path) -> Problem:
    with pytest.raises(SpecError) as info:
        spec.load(path)
    assert info.value.exit_code == EXIT_USAGE
    (problem,) = info.value.problems
    return problem


@pytest.fixture(scope="module")
def shared_object() -> Path:
    """A small real shared library of this machine, harmless to preload (zlib)."""
    for name in ("libz.so.1", "libjemalloc.so.2"):
        for directory in LIB_DIRS:
            path = Path(directory) / name
            if path.is_file() and elf.not_preloadable(path) is None:
                return path
    pytest.skip("no libz.so.1 or libjemalloc.so.2 found")


# --- the file itself ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected", "found"),
    [
        (bytes(range(256)), "UTF-8 text", "byte 0x80 at line 2, column 118"),
        (b'[experiment]\nname = "caf\xe9"\n', "UTF-8 text", "byte 0xe9 at line 2, column 12, which is not UTF-8"),
        (b'[experiment]\nname = "t"\x00\n', "a text file", "a NUL byte at line 2, column 11"),
        (b"\x00\x01\x02\x03", "a text file", "a NUL byte at line 1, column 1"),
        ('[experiment]\nname = "t"\n'.encode("utf-16"), "UTF-8 text", "byte 0xff at line 1, column 1"),
        (b"\x1f\x8b\x08\x00junk", "UTF-8 text", "byte 0x8b"),
    ],
    ids=["binary-junk", "latin-1", "nul-in-text", "nul-first", "utf-16", "gzip"],
)
def test_not_a_text_file(tmp_path: Path, data: bytes, expected: str, found: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(data)
    problem = load_problem(path)
    assert problem.path == "(file)"
    assert problem.expected == expected
    assert found in problem.found
    assert problem.hint


def test_utf16_is_named_in_the_hint(tmp_path: Path) -> None:
    (path := tmp_path / "u16.toml").write_bytes(HEAD.encode("utf-16"))
    assert "UTF-16" in (load_problem(path).hint or "")


def test_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    (path := tmp_path / "bom.toml").write_bytes(b"\xef\xbb\xbf" + HEAD.encode())
    assert spec.load(path).name == "t"


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n# [experiment]\n", "   \t\n"])
def test_empty_file_or_only_comments(tmp_path: Path, text: str) -> None:
    (path := tmp_path / "empty.toml").write_text(text, encoding="utf-8")
    problem = load_problem(path)
    assert (problem.path, problem.expected, problem.found) == ("experiment", "a value", "nothing")


def test_directory(tmp_path: Path) -> None:
    problem = load_problem(tmp_path)
    assert (problem.path, problem.found) == ("(file)", "a directory")


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root, chmod 000 does not stop reading: the permission error is injected instead."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(spec.loading, "open", refuse, raising=False)
    problem = load_problem(tmp_path / "x.toml")
    assert (problem.path, problem.expected, problem.found) == ("(file)", "a readable file", "Permission denied")
    assert "permissions" in (problem.hint or "")


def test_unreadable_file_chmod() -> None:
    """A real permission check: as root, the file is read with the effective uid of `nobody`."""
    folder = Path(tempfile.mkdtemp(prefix="perflab-perm-"))
    try:
        folder.chmod(0o755)  # nobody may enter, not read the file
        (path := folder / "secret.toml").write_text(HEAD, encoding="utf-8")
        path.chmod(0)
        root = os.geteuid() == 0
        if root:
            os.setegid(65534)
            os.seteuid(65534)
        try:
            problem = load_problem(path)
        finally:
            if root:
                os.seteuid(0)
                os.setegid(0)
        assert problem.found == "Permission denied"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_huge_file_is_not_read_whole(tmp_path: Path) -> None:
    (path := tmp_path / "big.toml").write_text(HEAD + "#" * spec.MAX_FILE_BYTES, encoding="utf-8")
    assert "at most 1 MiB" in load_problem(path).expected
    assert "at most 1 MiB" in load_problem(Path("/dev/zero")).expected  # endless: read only 1 MiB


def test_experiment_file_path_with_spaces(tmp_path: Path) -> None:
    (folder := tmp_path / "my experiments").mkdir()
    (path := folder / "first try.toml").write_text(HEAD, encoding="utf-8")
    exp = spec.load(path)
    assert exp.name == "t" and exp.source == str(path)


# --- huge numbers: sane upper bounds, each with its key path ------------------------------------

BOUNDS = [
    ("repeats = 1" + "0" * 30, "experiment.repeats", "between -2^63 and 2^63-1", "an integer of 100 bits"),
    ("repeats = 1000000000000000000", "experiment.repeats", "at most 1000", "1000000000000000000"),
    ('repeats = "auto"\nmax_repeats = 5000', "experiment.max_repeats", "at most 1000", "5000"),
    ("duration = 1e308", "experiment.duration", "at most 7 days", "1e+308"),
    ('duration = "99999999999h"', "experiment.duration", "at most 7 days", "99999999999h"),
    ("duration = 1" + "0" * 400, "experiment.duration", "2^63", "bits"),
    ('warmup = "200h"', "experiment.warmup", "at most 7 days", "200h"),
    ('repeats = "auto"\ntime_budget = "1000h"', "experiment.time_budget", "at most 7 days", "1000h"),
    ("[dataset]\ntable_size = 1e308", "dataset.table_size", "an integer", "1e+308"),
    ("[dataset]\ntable_size = 3000000000", "dataset.table_size", "<= 2147483647", "3000000000"),
    ("[dataset]\ntables = 99999999999", "dataset.tables", "<= 10000", "99999999999"),
    ("[dataset]\ntables = 0x" + "f" * 5000, "dataset.tables", "2^63", "20000 bits"),
    ("[workload]\nthreads = [1, 99999999999]", "workload.threads", "<= 10000", "99999999999"),
    ("[workload]\nthreads = [99999999999999999999]", "workload.threads.0", "2^63", "67 bits"),
    ("repeats = " + "9" * 5000, "(file)", "valid TOML", "thousands of digits"),
]


@pytest.mark.parametrize(("text", "path", "expected", "found"), BOUNDS, ids=[b[1] + ":" + b[0][-12:] for b in BOUNDS])
def test_huge_numbers(text: str, path: str, expected: str, found: str) -> None:
    problem = only_problem(HEAD + text + "\n")
    assert problem.path == path
    assert expected in problem.expected
    assert found in problem.found
    assert problem.hint


def test_matrix_too_large_is_refused_without_building_it() -> None:
    """30 axes of 2 labels: 2^30 combinations, refused by arithmetic (it used to loop on them)."""
    text = HEAD + "".join(f"[variants.a{i}]\nx = {{}}\ny = {{}}\n" for i in range(30))
    problem = only_problem(text)
    assert problem.path == "(matrix)"
    assert "at most 20000 cells" in problem.expected
    assert "1073741824 variants" in problem.found


def test_largest_matrix_is_accepted() -> None:
    exp = spec.parse(
        HEAD
        + "repeats = 10\n[workload]\nthreads = [1, 2, 4, 8]\n[variants.a]\n"
        + "".join(f"l{i} = {{}}\n" for i in range(500))
    )
    assert len(exp.cells()) == spec.MAX_CELLS


# --- deep nesting and long keys -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path", "expected"),
    [
        ("x = " + "[" * 10000 + "]" * 10000, "(file)", "nested at most 12 deep"),
        ("x = " + "{a=" * 5000 + "1" + "}" * 5000, "(file)", "nested at most 12 deep"),
        ("[" + ".".join(["a"] * 10000) + "]", "(file)", "at most 32 dots on a line"),
        (".".join(["a"] * 10000) + " = 1", "(file)", "at most 32 dots on a line"),
        ("server_options = { x = " + "[" * 13 + "]" * 13 + " }", "server_options.x" + ".0" * 10, "nested at most 12"),
        ("[" + ".".join(["a"] * 20) + "]", ".".join(["a"] * 12), "nested at most 12 deep"),
    ],
    ids=["arrays-10000", "inline-tables-5000", "table-header-10000", "dotted-key-10000", "arrays-13", "header-20"],
)
def test_deep_nesting(text: str, path: str, expected: str) -> None:
    problem = only_problem(text + "\n" + HEAD)
    assert problem.path == path
    assert expected in problem.expected


def test_dots_inside_strings_and_comments_do_not_count() -> None:
    exp = spec.parse('server_options = { init_connect = "' + "." * 500 + '" }  # ' + "." * 500 + "\n" + HEAD)
    assert exp.file.server_options["init_connect"] == "." * 500


def test_long_key_and_value_are_shortened_in_the_report() -> None:
    problems = problems_of(HEAD + "k" * 100_000 + ' = 1\n[workload]\ntest = "' + "t" * 100_000 + ' x"\n')
    assert {p.path.split(".")[0] for p in problems} == {"experiment", "workload"}
    for problem in problems:
        assert len(problem.render()) < 400


@pytest.mark.parametrize("key", ["", " ", "a\nb", "\x1b[2J", "\U00018cd6", "tab\tkey"])
def test_keys_print_on_one_line_and_without_escapes(key: str) -> None:
    text = HEAD + f"{toml_str(key)} = 1\n"
    problem = only_problem(text)
    assert problem.path.startswith('experiment."') and problem.path.isprintable()
    assert problem.found.isprintable()


# --- server option values: the option file ----------------------------------------------------------

# Each of these is a valid value: it must reach the server exactly, as one option.
SAFE_VALUES = {
    "equals": "a=b=c",
    "hash": "#x",
    "comment": "x # y",
    "section": "[client]",
    "include": "!include /etc/passwd",
    "double_quotes": '"q"',
    "single_quotes": "'q'",
    "backslash_n": "a\\nb",
    "windows_path": "C:\\temp\\new",
    "trailing_backslash": "x\\",
    "lead_space": " lead",
    "trail_space": "trail ",
    "empty": "",
    "tab": "a\tb",
    "semicolon": ";x",
    "unicode": "é💥",
    "quote_then_hash": "'a#b",
    "mixed": '"a\\" # b\' ; [x]',
}


def test_option_values_are_accepted_by_the_spec() -> None:
    table = ", ".join(f"{name} = {toml_str(value)}" for name, value in SAFE_VALUES.items())
    exp = spec.parse(f"server_options = {{ {table} }}\n" + HEAD)
    assert exp.file.server_options == SAFE_VALUES


def write_option_file(tmp_path: Path, options: dict[str, object]) -> Path:
    """The option file exactly as perflab writes it for a server (nothing is started)."""
    server = mysqld.Mysqld(tmp_path / "run", tmp_path / "run" / "data", options)
    server.write_option_file()
    return server.option_file


def server_reads(option_file: Path) -> list[tuple[str, str | None]]:
    """The options mariadbd reads from the file, in order, as MariaDB's own my_print_defaults prints them."""
    tool = shutil.which("my_print_defaults") or shutil.which("mariadb-print-defaults")
    if tool is None:
        pytest.skip("my_print_defaults (mariadb-client) is not installed")
    out = subprocess.run(
        [tool, f"--defaults-file={option_file}", "mariadbd"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    options = []
    for line in out.splitlines():
        assert line.startswith("--"), f"an option value spilled onto its own line: {line!r}"
        name, eq, value = line[2:].partition("=")
        options.append((name, value if eq else None))
    return options


def test_option_values_reach_the_server_exactly(tmp_path: Path) -> None:
    option_file = write_option_file(tmp_path, dict(SAFE_VALUES))
    lines = option_file.read_text(encoding="utf-8").splitlines()
    assert [ln for ln in lines if ln.startswith("[")] == ["[mariadbd]"]  # no value opened a section
    read = server_reads(option_file)
    assert len(read) == len(lines) - 2  # one option per written line: nothing injected, nothing lost
    values = dict(read)
    for name, value in SAFE_VALUES.items():
        assert values[name] == value, name


def test_fixed_options_win_over_server_options(tmp_path: Path) -> None:
    """The spec refuses them; if one got through, the option file still ends with perflab's."""
    option_file = write_option_file(tmp_path, {"datadir": "/", "socket": "/tmp/x.sock", "log-error": "/etc/passwd"})
    read = server_reads(option_file)
    last = {name: value for name, value in read}  # the server keeps the last occurrence
    assert last["datadir"] == str(tmp_path / "run" / "data")
    assert last["socket"] == str(tmp_path / "run" / "mysqld.sock")
    assert last["log-error"] == str(tmp_path / "run" / "error.log")


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "a\x00b", "\n[client]\nuser=x", "a\x1bb", "a\x7fb"])
def test_option_value_cannot_add_a_line(value: str) -> None:
    problem = only_problem(f"server_options = {{ init_connect = {toml_str(value)} }}\n" + HEAD)
    assert problem.path == "server_options.init_connect"
    assert "one-line" in problem.expected or "control characters" in problem.expected
    with pytest.raises(ValueError, match="control character"):  # and the writer refuses it too
        mysqld.option_line("init_connect", value)


@pytest.mark.parametrize("name", ["a=b", "a b", "[x]", "#x", "x\n", "", "-x", "9x", "a.b", "é"])
def test_option_name_is_an_option_name(name: str) -> None:
    problem = only_problem(f"server_options = {{ {toml_str(name)} = 1 }}\n" + HEAD)
    assert problem.expected == "a server option name like sort_buffer_size"
    with pytest.raises(ValueError, match="not a server option name"):
        mysqld.option_line(name, 1)


@pytest.mark.parametrize(
    "name",
    ["datadir", "socket", "port", "bind-address", "pid_file", "log-error", "tmpdir", "user", "DATADIR", "Log_Error"],
)
def test_option_perflab_sets_itself(name: str) -> None:
    problem = only_problem(HEAD + f'[variants.v]\nx = {{ server_options = {{ {name} = "/x" }} }}\n')
    assert problem.path == f"variants.v.x.server_options.{name}"
    assert "perflab sets it" in problem.expected


@pytest.mark.parametrize("test", ["--mysql-host=evil.lua", "-h.lua", "a\nb.lua", "a\u0000.lua"])
def test_workload_script_cannot_become_a_sysbench_option(test: str) -> None:
    problem = only_problem(HEAD + f"[workload]\ntest = {toml_str(test)}\n")
    assert problem.path == "workload.test"
    assert "a path to a .lua script" in problem.expected


# --- environment -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["A=B", "A\n", "", "1A", "A B", "é", "A-B", "LD_LIBRARY_PATH"])
def test_env_name_is_validated(name: str) -> None:
    problem = only_problem(HEAD + f'[variants.v]\nx = {{ env = {{ {toml_str(name)} = "1" }} }}\n')
    assert problem.path.startswith("variants.v.x.env.")
    assert "environment variable name" in problem.expected or "no LD_LIBRARY_PATH" in problem.expected


def test_env_values_pass_through_exactly() -> None:
    values = {
        "A": "a=b",
        "B": "line1\nline2",
        "C": " spaced ",
        "D": "é#[x]",
        "GLIBC_TUNABLES": "glibc.malloc.arena_max=1",
    }
    table = ", ".join(f"{k} = {toml_str(v)}" for k, v in values.items())
    (cell, *_) = spec.parse(HEAD + f"[variants.v]\nx = {{ env = {{ {table} }} }}\n").cells()
    assert cell.env == values


def test_env_value_without_nul() -> None:
    problem = only_problem(HEAD + '[variants.v]\nx = { env = { A = "a\\u0000b" } }\n')
    assert problem.expected == "a value without NUL bytes"


# --- preload -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", ["my libs", "a:b", "a: b"])
def test_preload_path_with_spaces_works(tmp_path: Path, shared_object: Path, folder: str) -> None:
    """Accepted by the spec, and really preloaded: ld.so splits LD_PRELOAD at spaces and colons,
    so the server gets a symlink in its run directory (checked here on `cat`, not mariadbd)."""
    (tmp_path / folder).mkdir()
    lib = tmp_path / folder / "lib alloc.so"
    shutil.copyfile(shared_object, lib)
    exp = spec.parse(HEAD + f"[variants.allocator]\nglibc = {{}}\nmine = {{ preload = {toml_str(str(lib))} }}\n")
    assert [c.preload for c in exp.cells()] == [None, str(lib)] * 3

    rundir = tmp_path / "run"
    rundir.mkdir()
    server = mysqld.Mysqld(rundir, rundir / "data", {}, preload=lib)
    ld_preload = server.home.preloaded(str(server.preload))  # what Mysqld.start puts in LD_PRELOAD
    assert not any(c in ld_preload for c in " :")
    maps = subprocess.run(
        ["cat", "/proc/self/maps"], env={"LD_PRELOAD": ld_preload}, capture_output=True, text=True, check=True
    ).stdout
    assert str(lib) in maps
    # without the symlink, ld.so would split the path and preload nothing
    raw = subprocess.run(["cat", "/proc/self/maps"], env={"LD_PRELOAD": str(lib)}, capture_output=True, text=True)
    assert str(lib) not in raw.stdout


def test_plain_preload_path_is_used_as_is(tmp_path: Path, shared_object: Path) -> None:
    server = mysqld.Mysqld(tmp_path, tmp_path / "data", {}, preload=shared_object)
    assert server.home.preloaded(str(server.preload)) == str(shared_object)


def _patched(source: Path, target: Path, offset: int, data: bytes) -> Path:
    blob = bytearray(source.read_bytes())
    blob[offset : offset + len(data)] = data
    target.write_bytes(bytes(blob))
    return target


@pytest.fixture
def not_libraries(tmp_path: Path, shared_object: Path) -> dict[str, tuple[Path, str]]:
    """Files that exist but are no shared library this machine can preload, and what they are."""
    (text := tmp_path / "notes.so").write_text("this is not a library\n", encoding="utf-8")
    (empty := tmp_path / "empty.so").write_bytes(b"")
    (linker_script := tmp_path / "libc.so").write_text("/* GNU ld script */\nGROUP ( libc.so.6 )\n", encoding="utf-8")
    (truncated := tmp_path / "truncated.so").write_bytes(shared_object.read_bytes()[:30])
    (folder := tmp_path / "dir.so").mkdir()
    pie = Path(shutil.which("ls") or "/bin/ls")
    return {
        "text": (text, "a text file"),
        "empty": (empty, "an empty file"),
        "linker-script": (linker_script, "a text file"),
        "truncated": (truncated, "truncated or corrupt"),
        "directory": (folder, "a directory"),
        "device": (Path("/dev/null"), "not a regular file"),
        "executable": (_patched(shared_object, tmp_path / "exec.so", 16, struct.pack("<H", 2)), "an executable"),
        "object-file": (_patched(shared_object, tmp_path / "obj.so", 16, struct.pack("<H", 1)), "an object file"),
        "other-machine": (_patched(shared_object, tmp_path / "arm.so", 18, struct.pack("<H", 40)), "another machine"),
        "pie-executable": (pie, "position-independent executable"),
    }


@pytest.mark.parametrize(
    "kind",
    [
        "text",
        "empty",
        "linker-script",
        "truncated",
        "directory",
        "device",
        "executable",
        "object-file",
        "other-machine",
        "pie-executable",
    ],
)
def test_preload_must_be_a_shared_library(not_libraries: dict[str, tuple[Path, str]], kind: str) -> None:
    path, what = not_libraries[kind]
    problem = only_problem(HEAD + f'[variants.allocator]\nx = {{ preload = "{path}" }}\n')
    assert problem.path == "variants.allocator.x.preload"
    assert problem.expected == "a shared library (.so) to preload"
    assert repr(str(path)) in problem.found and what in problem.found
    assert problem.hint


def test_preload_real_library_is_accepted(shared_object: Path) -> None:
    exp = spec.parse(HEAD + f'[variants.allocator]\nx = {{ preload = "{shared_object}" }}\n')
    assert exp.cells()[0].preload == str(shared_object)


@pytest.mark.parametrize(
    ("preload", "expected"),
    [
        ("/nonexistent/lib.so", "an existing .so file"),
        ("/" + "a" * 5000, "a shared library (.so) to preload"),
        ("/lib\\n.so", "a path without control characters"),
        ("libjemalloc.so.2", "one of glibc, jemalloc"),
    ],
)
def test_preload_other_bad_paths(preload: str, expected: str) -> None:
    problem = only_problem(HEAD + f'[variants.allocator]\nx = {{ preload = "{preload}" }}\n')
    assert expected in problem.expected
    assert len(problem.found) < 300
