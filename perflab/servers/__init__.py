"""One package per server kind (perflab/servers/<kind>/), behind one interface, `Kind`.

Everything that differs between servers lives in its package: how its binary is found, how a
dataset is prepared for it, the server process itself (start, stop, options), how a cell is
measured when its tool is not sysbench, its memory figure, PGO training, its source-build recipe
and its preflight. The rest of perflab asks the experiment's kind, never compares its name:

    kind = servers.kind(exp.file.experiment.server)   # servers.KINDS["postgresql"]
    snapshot = kind.prepare(workdir, spec=spec, tool=workloads.of(spec), log=log, name="snapshot", build=None)
    server = kind.server(rundir, rundir / "data", {**kind.pool_options(snapshot), ...}, ...)

tests/unit/test_server_seam.py holds the rule: outside perflab/servers/, no comparison with a
server kind's name and no isinstance() on a server class. Adding a server is adding a package
here and its entry in KINDS. MariaDB and MySQL (Percona Server is a flavor of MySQL) share
what MySQL's protocol makes alike through mysql_protocol.py and their server process, Mysqld
(mysqld.py), modules beside the packages.
"""

from __future__ import annotations

from pathlib import Path

from perflab.servers.kind import Kind


def kind(name: str) -> Kind:
    """The kind named by [experiment] server (or a results file's meta)."""
    if name not in KINDS:
        raise KeyError(f"unknown server kind {name!r}; known: {', '.join(sorted(KINDS))}")
    return KINDS[name]


def every() -> list[Kind]:
    return [kind(name) for name in NAMES]


def datadir_format(datadir: Path) -> str | None:
    """What an existing datadir is, asking every kind; None when none claims it."""
    return next((found for k in every() if (found := k.datadir_format(datadir)) is not None), None)


def kind_of_flavor(flavor: str) -> Kind:
    return next(k for k in every() if flavor in k.flavors)


def opens(fmt: str, found: str) -> bool:
    """Does a binary of format `fmt` ("percona-8.0") open a datadir of `found` ("mysql")?"""
    return kind_of_flavor(fmt.split("-")[0]).opens(fmt, found)


def _registry() -> dict[str, Kind]:
    """Every kind, by name: one package each under perflab/servers/ (imported here, after Kind)."""
    from perflab.servers.mariadb import KIND as MARIADB
    from perflab.servers.mysql import KIND as MYSQL
    from perflab.servers.postgresql import KIND as POSTGRESQL

    return {k.name: k for k in (MARIADB, MYSQL, POSTGRESQL)}


KINDS: dict[str, Kind] = _registry()
NAMES = tuple(KINDS)  # [experiment] server's values (spec/schema.py)
