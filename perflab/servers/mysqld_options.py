"""The server option names of a MariaDB or MySQL experiment, checked against the binary each cell
will run, before anything starts (`perflab run --check`: exit 2 with a "did you mean").

What a binary knows is what it says of itself, `mariadbd --no-defaults --verbose --help` (mysqld's
for MySQL): the options it lists and its variables table. That is read once per binary and kept
under the cache, by the binary's content hash:

    $PERFLAB_CACHE/server-options/SHA256.json  (else ~/.cache/perflab/server-options/)
    {"format": "perflab-server-options/1", "binary": "/usr/sbin/mariadbd", "version": "...",
     "names": ["allow_suspicious_udfs", ...]}

A name passes when the server would take it in its option file (mysys/my_getopt.c), so that a
name it accepts is never refused here and one it refuses is caught:
  - one of its names, with '-' or '_' and in any case;
  - after skip-, enable-, disable- or maximum- (its boolean and limit forms);
  - loose-anything (the server ignores an unknown loose- name with a warning);
  - MariaDB (and MySQL before 8.0): a prefix of exactly one name ("Using unique option prefix ...
    is error-prone", but taken); a prefix of several is refused ("ambiguous option").
Builds not made yet, servers on another host and options of plugins loaded by the file are left
to the server's own start: their names cannot be known here.

    unknown("innodb_flush_log_at_trx_comit", names, prefixes=True) -> "unknown"
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perflab.builds import Build
    from perflab.spec.matrix import Experiment
    from perflab.spec.problems import Problem

FORMAT = "perflab-server-options/1"
FORMS = ("skip_", "enable_", "disable_", "maximum_")  # my_getopt's special prefixes
PLUGIN_LOADS = ("plugin_load", "plugin_load_add")  # their plugins' options are not in --help
PREFIXES_UNTIL = (8, 0, 0)  # MySQL 8.0 took away unique prefixes (MariaDB keeps them)
MIN_NAMES = 100  # fewer read from --help: not an option list (an error, another program)

_OPTION = re.compile(r"^  (?:-\S, )?--([A-Za-z0-9][A-Za-z0-9_-]*)")
_VARIABLE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_-]*)\s")


def norm(name: str) -> str:
    return name.replace("-", "_").lower()


@dataclass(frozen=True)
class Known:
    """What one binary takes: its option names (normalised) and whether it takes prefixes."""

    label: str  # "mariadbd 10.11.19-MariaDB" for messages
    names: frozenset[str]
    prefixes: bool


def parse_help(text: str) -> frozenset[str]:
    """Option names (normalised) of `--verbose --help`: its option lines and variables table."""
    names: set[str] = set()
    in_table = False
    for line in text.splitlines():
        if line.startswith("Variables (--variable-name=value)"):
            in_table = True
            continue
        match = (_VARIABLE if in_table else _OPTION).match(line)
        if match and not line.startswith("---"):
            names.add(norm(match.group(1)))
    return frozenset(names)


def unknown(name: str, names: frozenset[str], prefixes: bool) -> str | None:
    """None when the server takes `name`; else why not ("unknown", "ambiguous: a, b")."""
    key = norm(name)
    if key.startswith("loose_"):
        return None
    for base in [key, *(key[len(f) :] for f in FORMS if key.startswith(f))]:
        if base in names:
            return None
        matches = sorted(n for n in names if n.startswith(base)) if prefixes and base else []
        if len(matches) == 1:
            return None
        if len(matches) > 1 and base == key:
            return f"ambiguous: {', '.join(matches[:4])}{' ...' if len(matches) > 4 else ''}"
    return "unknown"


def known_names(build: Build, cache: Path) -> Known | None:
    """What `build` takes, from `cache` (perflab's cache directory) or asked once; None: it cannot say."""
    from perflab.servers.mysql_flavor import version_tuple

    prefixes = build.server == "mariadb" or version_tuple(build.version) < PREFIXES_UNTIL
    number = re.match(r"[0-9.]+", build.version)
    label = f"{build.binary.name} {number.group(0) if number else ''}".strip()
    path = cache / "server-options" / f"{build.sha256}.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("format") == FORMAT:
            return Known(label, frozenset(doc["names"]), prefixes)
    except (OSError, ValueError, KeyError, TypeError):
        pass  # not cached yet (or unreadable): ask the binary
    names = _ask(build)
    if names is None:
        return None
    _store(path, {"format": FORMAT, "binary": str(build.binary), "version": build.version, "names": sorted(names)})
    return Known(label, names, prefixes)


def _ask(build: Build) -> frozenset[str] | None:
    from perflab.places.proc import clean_env
    from perflab.servers.mysqld import share_options

    share = [f"--{k}={v}" for k, v in share_options(build).items()]
    argv = [*build.launcher, str(build.binary), "--no-defaults", *share, "--verbose", "--help"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = parse_help(done.stdout)
    return names if done.returncode == 0 and len(names) >= MIN_NAMES else None


def _store(path: Path, doc: dict[str, Any]) -> None:
    """Keep the names for the next check; a cache that cannot be written only costs a second."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(doc) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError:
        return


def option_problems(exp: Experiment, binaries: dict[str | None, Build], cache: Path) -> list[Problem]:
    """Every server option name of the file that a binary which would run it does not take;
    `binaries`: the cells' builds that are here now (None: the installed server)."""
    problems: list[Problem] = []
    known = {name: _known(build, cache) for name, build in binaries.items()}
    for where, options, cells in _places(exp):
        loads_plugins = any(norm(k) in PLUGIN_LOADS for c in cells for k in c.server_options)
        for build_name in dict.fromkeys(c.build for c in cells if c.server_host is None):
            found = known.get(build_name)
            if found is not None:
                problems += _judge(where, options, *found, loads_plugins)
    return list({p.path: p for p in problems}.values())


def _known(build: Build, cache: Path) -> tuple[Known, Any] | None:
    """What `build` takes, with the Flavor that writes its option file (None: it cannot say)."""
    from perflab.servers.mysql_dialects import dialect

    known = known_names(build, cache)
    if known is None:
        return None
    return known, dialect(build if build.name is not None else None)


def _judge(where: str, options: dict[str, Any], known: Known, flavor: Any, plugins: bool) -> list[Problem]:
    from perflab.errors import Problem, did_you_mean

    out = []
    for name, value in options.items():
        try:
            names = list(flavor.translate({name: value}))  # MySQL's name for a MariaDB one
        except ValueError:  # a value it cannot convert: the server says what it thinks of it at start
            names = [name]
        for written in names:
            why = unknown(written, known.names, known.prefixes)
            if why is None or (why == "unknown" and plugins):
                continue
            hint = did_you_mean(norm(written), known.names, f"see `{known.label.split()[0]} --verbose --help`")
            if why != "unknown":
                hint = "write the option's whole name"
            found = f"{why} to {known.label}" if why == "unknown" else f"{why} ({known.label})"
            out.append(Problem(f"{where}.{name}", f"an option {known.label} takes", found, hint))
    return out


def _places(exp: Experiment) -> list[tuple[str, dict[str, Any], list[Any]]]:
    """(key path, the options written there, the cells they reach) for the file's server_options."""
    cells = exp.round(1)
    out = [("server_options", exp.file.server_options, cells)]
    for axis, entries in exp.file.variants.items():
        for label, variant in entries.items():
            reached = [c for c in cells if c.variant.get(axis) == label]
            out.append((f"variants.{axis}.{label}.server_options", variant.server_options, reached))
    return out
