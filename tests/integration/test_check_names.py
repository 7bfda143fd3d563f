"""Names a user misspells are caught by `perflab run --check` (exit 2) with the name meant: a
sysbench test, and a MariaDB server option, against the real mariadbd (the installed one and a
[builds] basedir's); what perflab takes or refuses of option names is what mariadbd's own option
parser takes or refuses (servers/mysqld_options.py). Not quiet: nothing here is measured, and no
server is started (only `mariadbd --help`)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from perflab.servers import mysqld_options as opts
from tests.conftest import perflab
from tests.integration.helpers import write_experiment

MARIADBD = Path("/usr/sbin/mariadbd")
BODY = """\
[experiment]
name = "typo"
duration = "3s"
design = "sequential"
{builds}
[workload]
test = "oltp_point_select"
threads = [1]

[variants.flush]
"1" = {{ {build} }}
"2" = {{ {build}{comma} server_options = {{ {options} }} }}
"""


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PERFLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def experiment(tmp_path: Path, options: str, basedir: Path | None = None) -> Path:
    builds = f'\n[builds.tree]\nbasedir = "{basedir}"\n' if basedir else ""
    build = 'build = "tree"' if basedir else ""
    body = BODY.format(builds=builds, build=build, comma="," if basedir else "", options=options)
    return write_experiment(tmp_path / "typo.toml", body)


def test_a_misspelled_option_is_refused_with_the_name_meant(tmp_path: Path, cache: Path):
    checked = perflab("run", str(experiment(tmp_path, "innodb_flush_log_at_trx_comit = 2")), "--check")
    assert checked.returncode == 2, checked.stderr
    assert "variants.flush.2.server_options.innodb_flush_log_at_trx_comit" in checked.stderr
    assert "did you mean innodb_flush_log_at_trx_commit" in checked.stderr
    # the names were asked once, and kept by the binary's content
    sha = hashlib.sha256(MARIADBD.read_bytes()).hexdigest()
    stored = json.loads((cache / "server-options" / f"{sha}.json").read_text())
    assert stored["format"] == opts.FORMAT and "innodb_flush_log_at_trx_commit" in stored["names"]


def test_the_spellings_mariadbd_takes_pass(tmp_path: Path):
    options = '"innodb-flush-log-at-trx-commit" = 2, GENERAL_LOG = "OFF", sort_buffer = "1M", loose_nothing = 1'
    checked = perflab("run", str(experiment(tmp_path, options)), "--check")
    assert checked.returncode == 0, checked.stderr


def test_a_builds_binary_is_asked_too(tmp_path: Path):
    """A [builds] basedir's mariadbd (here a tree that links the installed one) checks its variants."""
    tree = tmp_path / "tree"
    (tree / "sbin").mkdir(parents=True)
    (tree / "sbin" / "mariadbd").symlink_to(MARIADBD)
    checked = perflab("run", str(experiment(tmp_path, "innodb_flush = 1", tree)), "--check")
    assert checked.returncode == 2, checked.stderr
    assert "variants.flush.2.server_options.innodb_flush" in checked.stderr
    assert "ambiguous" in checked.stderr and "write the option's whole name" in checked.stderr


NAMES = [
    "innodb_flush_log_at_trx_commit",
    "innodb-flush-log-at-trx-comm",
    "innodb_flush_log_at_trx_comit",
    "innodb_flush",
    "GENERAL_LOG",
    "sort_buffer",
    "skip_name_resolve",
    "skip-general-log",
    "enable-general-log",
    "maximum-sort-buffer-size",
    "maximum-sort-bufer-size",
    "loose_nothing_at_all",
    "query_cache_typ",
    "max_connection",
    "perflab_no_such_option",
]


def server_takes(name: str) -> bool:
    """What mariadbd's own parser says of `--name=1` (the option file's lines are parsed alike): an
    unknown loose- name is only a [Warning]; a refused one is an [ERROR]."""
    argv = [str(MARIADBD), "--no-defaults", f"--{name}=1", "--verbose", "--help"]
    said = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False).stderr
    errors = [line for line in said.splitlines() if "[ERROR]" in line]
    return not any(w in line for line in errors for w in ("unknown variable", "unknown option", "ambiguous option"))


def test_perflab_takes_what_mariadbd_takes_and_refuses_what_it_refuses():
    help_text = subprocess.run([str(MARIADBD), "--no-defaults", "--verbose", "--help"], capture_output=True,
                               text=True, check=True, timeout=60).stdout  # fmt: skip
    names = opts.parse_help(help_text)
    ours = {n: opts.unknown(n, names, prefixes=True) is None for n in NAMES}
    theirs = {n: server_takes(n) for n in NAMES}
    assert ours == theirs
    assert not theirs["innodb_flush_log_at_trx_comit"] and theirs["sort_buffer"]  # both kinds are in the list


def test_a_misspelled_sysbench_test_is_refused_with_the_test_meant(tmp_path: Path):
    body = BODY.format(builds="", build="", comma="", options="").replace("oltp_point_select", "oltp_read_onyl")
    checked = perflab("run", str(write_experiment(tmp_path / "test.toml", body)), "--check")
    assert checked.returncode == 2, checked.stderr
    assert "workload.test" in checked.stderr and "did you mean oltp_read_only" in checked.stderr
