"""MariaDB's and MySQL's server option names are checked against what the binary says it takes
(servers/mysqld_options.py), from a recorded `mariadbd --verbose --help` (regen_mysqld_help.py);
tests/integration/test_check_names.py holds the same rules against the real server."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from perflab.servers import mysqld_options as opts

HELP = gzip.decompress((Path(__file__).parents[1] / "data/mysqld/mariadbd-10.11-help.txt.gz").read_bytes())
NAMES = opts.parse_help(HELP.decode("utf-8"))
KNOWN = opts.Known("mariadbd 10.11.19", NAMES, prefixes=True)


def test_the_help_is_read_whole():
    """Both the option lines (with a short form: -h, --datadir) and the variables table."""
    assert len(NAMES) > 500
    for name in ("datadir", "innodb_flush_log_at_trx_commit", "general_log", "skip_name_resolve", "sort_buffer_size"):
        assert name in NAMES
    assert not any(n.startswith("-") or " " in n for n in NAMES)


@pytest.mark.parametrize(
    "name",
    [
        "innodb_flush_log_at_trx_commit",
        "innodb-flush-log-at-trx-commit",
        "GENERAL_LOG",
        "skip_name_resolve",
        "skip-general-log",
        "enable-general-log",
        "maximum-sort-buffer-size",
        "loose_not_an_option_at_all",
        "sort_buffer",  # a unique prefix: mariadbd warns and takes it
        "innodb-flush-log-at-trx-comm",
    ],
)
def test_what_mariadbd_takes_passes(name: str):
    assert opts.unknown(name, NAMES, prefixes=True) is None


def test_a_misspelled_or_ambiguous_name_is_refused():
    assert opts.unknown("innodb_flush_log_at_trx_comit", NAMES, prefixes=True) == "unknown"
    assert opts.unknown("innodb_flush", NAMES, prefixes=True).startswith("ambiguous: innodb_flush_log_at_timeout")


def test_mysql_8_takes_no_prefix():
    assert opts.unknown("sort_buffer", NAMES, prefixes=False) == "unknown"
    assert opts.unknown("sort-buffer-size", NAMES, prefixes=False) is None


def test_a_problem_names_the_key_and_the_option_meant():
    from perflab.servers.mariadb.flavor import INSTALLED  # writes the names as given

    found = opts._judge("variants.x.b.server_options", {"innodb_flush_log_at_trx_comit": 2}, KNOWN, INSTALLED, False)
    assert [p.path for p in found] == ["variants.x.b.server_options.innodb_flush_log_at_trx_comit"]
    assert found[0].hint.startswith("did you mean innodb_flush_log_at_trx_commit")
    assert "mariadbd 10.11.19" in found[0].found


def test_a_plugin_loaded_by_the_file_brings_names_help_does_not_list():
    options = {"server_audit_logging": "ON"}
    assert opts._judge("server_options", options, KNOWN, _Flavor(), True) == []
    assert len(opts._judge("server_options", options, KNOWN, _Flavor(), False)) == 1


class _Flavor:
    def translate(self, options):
        return dict(options)


def test_mysql_is_asked_for_its_own_name_of_a_mariadb_option():
    """MySQL 8.0.30+ sizes its redo log with innodb_redo_log_capacity (servers/mysql/flavor.py):
    a file's innodb_log_file_size is checked under that name, and MySQL takes no prefix."""
    from perflab.servers.mysql.flavor import MySQLFlavor

    mysql = opts.Known("mysqld 8.0.36", frozenset({"innodb_redo_log_capacity", "sort_buffer_size"}), prefixes=False)
    flavor = MySQLFlavor("mysql", (8, 0, 36))
    assert opts._judge("server_options", {"innodb_log_file_size": "256M"}, mysql, flavor, False) == []
    (refused,) = opts._judge("server_options", {"sort_buffer": "1M"}, mysql, flavor, False)
    assert refused.path == "server_options.sort_buffer" and refused.hint == "did you mean sort_buffer_size?"
