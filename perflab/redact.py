"""Passwords out of what perflab shows (issue 48): messages, hints, logs and stored strings.

A URL's `user:PASSWORD@` and any `password=` (a URL's query, a libpq keyword string, a command line's
`--mysql-password=`), and SQL's `IDENTIFIED BY '...'` and `PASSWORD '...'`, become `***`;
redact_argv() also stars the value that follows a lone `--password`-like option.

    redact("postgresql://perf@db/h?password=s3cret")   # "postgresql://perf@db/h?password=***"
    redact_argv(["mariadb", "--password", "s3cret"])   # ["mariadb", "--password", "***"]
"""

from __future__ import annotations

import re
from collections.abc import Sequence

STARS = "***"
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^@\s/]*@")
# password=, passwd=, pwd= (also as the end of --mysql-password=, --pgsql-password=), to the next & or blank
_KEYWORD = re.compile(r"(?P<head>(?:password|passwd|pwd)=)[^&\s'\"]*", re.IGNORECASE)
_SQL = re.compile(r"(?P<head>\b(?:IDENTIFIED\s+BY|PASSWORD)\s*\(?\s*')(?:[^'\\]|\\.|'')*'", re.IGNORECASE)
_OPTION = re.compile(r"^--?[A-Za-z0-9-]*(?:password|passwd)$", re.IGNORECASE)


def redact(text: str) -> str:
    """`text` with every password it shows replaced by ***."""
    text = _USERINFO.sub(lambda m: m["head"] + STARS + "@", text)
    text = _KEYWORD.sub(lambda m: m["head"] + STARS, text)
    return _SQL.sub(lambda m: m["head"] + STARS + "'", text)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line to show: each argument redacted, and the argument after a lone `--password`
    (`--mysql-password`, `-password`...) starred whole."""
    out: list[str] = []
    for arg in argv:
        out.append(STARS if out and _OPTION.match(out[-1]) else redact(arg))
    return out
