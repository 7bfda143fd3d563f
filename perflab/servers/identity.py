"""Which server a binary is, and which datadirs it opens, from its version line alone: what a Build
(builds/) says of its binary. A module of its own that imports nothing of perflab: builds/ asks it,
and every kind's package imports builds/ (tests/unit/test_layers.py: no import cycle). Each kind
lists its flavors (Kind.flavors); tests/unit/test_server_seam.py holds the two lists together.

    flavor_of("10.11.18-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)")   -> "mariadb"
    flavor_of("9.7.4 for Linux on x86_64 (MySQL Community Server - GPL)")               -> "mysql"
    format_of("postgresql", "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)", sha) -> "postgresql-15"
"""

from __future__ import annotations

import re

# what a version line names -> its flavor, asked in order; a mysqld's line names no server, so
# MySQL takes every line none of these claims
MARKERS = (("MariaDB", "mariadb"), ("PostgreSQL", "postgresql"), ("Percona", "percona"))
REST = "mysql"
FLAVORS = (*(flavor for _, flavor in MARKERS), REST)
# the flavors whose on-disk format changes only with the major version (PostgreSQL 10 and later:
# "15.18" is 15), and the pattern that finds it; the others' changes with major.minor
MAJOR_ONLY = {"postgresql": re.compile(r"\(PostgreSQL\) (\d+)")}
MAJOR_MINOR = re.compile(r"(\d+)\.(\d+)")


def flavor_of(version: str) -> str:
    """The server a binary is (mariadb, mysql, percona or postgresql), from its version line."""
    return next((flavor for marker, flavor in MARKERS if marker in version), REST)


def format_of(flavor: str, version: str, sha256: str) -> str:
    """Which datadirs a binary opens ("mariadb-10.11", "postgresql-15"): builds of one format share
    a dataset snapshot. A version line without a version: the binary's own (its hash)."""
    if flavor in MAJOR_ONLY:
        major = MAJOR_ONLY[flavor].search(version)
        return f"{flavor}-{major.group(1)}" if major else f"{flavor}-{sha256[:12]}"
    found = MAJOR_MINOR.search(version)
    return f"{flavor}-{found.group(1)}.{found.group(2)}" if found else f"{flavor}-{sha256[:12]}"
