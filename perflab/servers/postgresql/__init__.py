"""PostgreSQL 15 (Debian 12's): the server process (server.py), its dataset (dataset.py), a
cell measured with pgbench (cell.py), PGO training (train.py), its source build (source.py),
its preflight (preflight.py), and the check that every backend has the variant's allocator
(accounting.py).

    from perflab.servers import kind
    kind("postgresql").memory_figure   -> "PSS" (summed over the postmaster and its backends)
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from perflab.servers.kind import Kind, Tool
from perflab.servers.managed import free_port

if TYPE_CHECKING:
    from perflab.builds import Build
    from perflab.builds.source import Source
    from perflab.places import Place, RssSeries
    from perflab.places.procfs import ProcCounters
    from perflab.servers.dataset import Snapshot
    from perflab.servers.home import ServerHostPlace
    from perflab.servers.managed import Managed
    from perflab.servers.postgresql.server import PostgreSQL
    from perflab.spec.builds import BuildSpec
    from perflab.spec.matrix import Cell, Experiment
    from perflab.spec.problems import Problem
    from perflab.spec.schema import ExperimentFile


class PostgreSQLKind(Kind):
    name = "postgresql"
    title = "PostgreSQL"
    runs_pgbench = True
    gotpc_driver = "postgres"  # lib/pq, through the cell's socket (workloads/gotpc.py)
    gotpc_socket = True
    gotpc_passfile = True  # lib/pq 1.10 reads PGPASSFILE
    sysbench_writes = False  # sysbench's read-only and OLTP write tests only (workloads/sysbench.py)
    memory_figure = "PSS"
    profiles_tree = True  # its profiles are of a process tree (every backend's), here and on a server host
    sysbench_driver = "pgsql"
    host_field = "postgres"
    dbgsym: ClassVar[dict[str, str]] = {"postgres": "postgresql-15-dbgsym"}
    build_estimate_s = 10 * 60.0  # postgres 15 from Debian's source (docs/builds.md, "PostgreSQL")
    debian_binary = "postgresql-15"

    @property
    def debian_source(self) -> str:  # type: ignore[override]
        from perflab.servers.postgresql.source import DEBIAN_SOURCE

        return DEBIAN_SOURCE

    flavors = ("postgresql",)

    def datadir_format(self, datadir: Path) -> str | None:
        try:
            major = (datadir / "PG_VERSION").read_text(encoding="utf-8").strip()  # "15"
        except (OSError, UnicodeDecodeError):
            return None
        return f"postgresql-{major}" if major.isdigit() else None

    def installed_binary(self) -> Path:
        from perflab.servers.postgresql.server import pg_binary

        return Path(pg_binary("postgres"))

    def basedir_build(self, name: str, basedir: Path) -> Build:
        from perflab.builds import BuildError, describe

        missing = [t for t in ("postgres", "initdb") if not (basedir / "bin" / t).is_file()]
        if missing:
            raise BuildError(name, "basedir", None, f"no bin/{' nor bin/'.join(missing)} under {basedir}")
        return describe(basedir / "bin" / "postgres", name=name, kind="basedir", recipe={"basedir": str(basedir)})

    def prepare(self, workdir: Path, *, spec: ExperimentFile, tool: Tool, log: Path, name: str, build: Build | None) -> Snapshot:
        from perflab.servers.postgresql import dataset

        return dataset.prepare(workdir, spec=spec, tool=tool, log=log, name=name, build=build)

    def pool_options(self, snapshot: Snapshot) -> dict[str, Any]:
        return {"shared_buffers": snapshot.shared_buffers}

    def cache_size(self, snapshot: Snapshot) -> dict[str, str]:
        return {"shared_buffers": snapshot.shared_buffers}

    def server(self, rundir: Path, datadir: Path | str, options: dict[str, Any], **kw: Any) -> PostgreSQL:
        from perflab.servers.postgresql.server import PostgreSQL

        return PostgreSQL(rundir, datadir, options, **kw)

    def durability_options(self) -> tuple[str, ...]:
        from perflab.servers.postgresql.io import DURABILITY_OPTIONS

        return DURABILITY_OPTIONS

    def server_account(self) -> Any:
        from perflab.servers.postgresql.user import run_user

        return run_user()

    def io_counters(self, server: Managed) -> dict[str, float]:
        from perflab.servers.postgresql.io import counters

        return counters(server)

    def prewarm(self, server: Managed, database: str) -> float:
        from perflab.servers.postgresql import dataset, server as postgres

        return dataset.prewarm(postgres.of(server), database)

    def window_checks(self, server: Managed, cell: Cell, child: Any, workload: Any) -> dict[str, Any]:
        """Every backend of the client's connections maps the variant's allocator."""
        from perflab.servers.postgresql import server as postgres
        from perflab.servers.postgresql.accounting import verified

        return {"preload_verified_backends": verified(postgres.of(server), cell, child, workload.database)}

    def pss_bytes(self, server: Managed) -> int | None:
        from perflab.places.proctree import pss_bytes, tree

        return pss_bytes(tree(server.pid))

    def turn_counters(self, server: Managed, clock: Any, lean: bool, password: str | None = None) -> Any:
        """The client's own counts (workloads/turn_counts.py): PostgreSQL's statistics reach
        pg_stat_database at most once a second per backend, too late for a turn."""
        from perflab.workloads.turn_counts import ClientCounts

        return ClientCounts(clock)

    def process_counters(self, place: Place, pid: int, threads: bool = False) -> ProcCounters:
        """The postmaster's tree: every backend, and those it reaped."""
        return place.tree_counters(pid, threads)

    def memory_sampler(self, place: Place, pid: int) -> RssSeries:
        return place.rss_sampler(pid, tree=True)  # here with PSS beside RSS (places/proctree.py)

    def clients_connected(self, server: Managed, cell: Cell) -> dict[str, Any]:
        """Every backend maps the variant's allocator (sysbench's "Threads started!" follows
        its threads' connections, so each has its backend by then)."""
        from perflab.servers.postgresql.accounting import verify_backends

        return {"preload_verified_backends": verify_backends(server.pid, cell.preload, server.preload, cell.env)}

    def train(self, exp: ExperimentFile, build: Build, spec: BuildSpec, snapshot: Snapshot, rundir: Path, tool: Tool) -> str:
        """The workload on the instrumented server; its .gcda files by GCOV_PREFIX (train.py)."""
        from perflab.servers.postgresql import train

        try:
            return train.train(exp, build, spec, snapshot, rundir, tool)
        finally:
            shutil.rmtree(rundir, ignore_errors=True)

    def source_recipe(self, spec: BuildSpec, src: Source, stage: str, profile: str | None) -> dict[str, Any]:
        from perflab.servers.postgresql import source

        return source.recipe(spec, src, stage, profile)

    def source_build(self, name: str, spec: BuildSpec, src: Source, cache: Path, listen: Any, **kw: Any) -> Build:
        from perflab.servers.postgresql import source

        return source.build(name, spec, src, cache, listen, **kw)

    def file_problems(self, spec: ExperimentFile) -> list[Problem]:
        from perflab.servers.postgresql import spec as rules

        return rules.file_problems(spec)

    def build_problems(self, builds: dict[str, Any]) -> list[Problem]:
        from perflab.servers.postgresql import spec as rules

        return rules.build_problems(builds)

    # a server on another host (hosts/server.py, hosts/home.py): Debian's
    # postgresql-15 there, in its own bin directory (not on PATH); psql from postgresql-client-15
    # the counter preloaded into the postmaster there counts in every backend (a slot each), summed
    server_packages: ClassVar[dict[str, str]] = {
        "postgres": "postgresql-15",
        "initdb": "postgresql-15",
        "psql": "postgresql-client-15",
    }
    server_dirs = ("/usr/lib/postgresql/15/bin",)

    def host_programs(self, place: ServerHostPlace, build: Any) -> dict[str, Any]:
        """The host's postgresql-15, or a build copied there behind its private root's loader; the run's
        role logs in there by password only (pg_hba: scram-sha-256)."""
        programs = {**place.binaries, **({"postgres": str(build.binary)} if build is not None else {})}
        return {"programs": programs, "launcher": build.launcher if build is not None else ()}

    def remote_init(self, place: ServerHostPlace, datadir: str) -> str:
        """A new cluster at `datadir` on the host by its initdb, as the postgres account (peer auth)."""
        from perflab.hosts.home import init_as
        from perflab.servers.postgresql.server import INITDB_OPTIONS, RUN_USER, SUPERUSER

        argv = [place.binaries["initdb"], "-D", datadir, "-U", SUPERUSER, *INITDB_OPTIONS]
        init_as(place, datadir, argv, RUN_USER, f"postgresql-15 there provides initdb and the {RUN_USER} user")
        return "initdb"

    def listen_on(self, server: Managed, address: str) -> None:
        """TCP at `address` too, on a port free there (two servers here for one client host: an
        interleaved group's seats)."""
        server.bind_address = address
        server.port = free_port(address)

    def remote_login(self, server: Managed, password: str) -> dict[str, str]:
        """Role `perflab` with the run's password, over TCP only (pg_hba: scram-sha-256)."""
        if not password.isalnum():
            raise ValueError("the password is made by perflab: hex digits only")
        server.sql(
            "DO $$BEGIN CREATE ROLE perflab LOGIN SUPERUSER; EXCEPTION WHEN duplicate_object THEN NULL; END$$; "
            f"ALTER ROLE perflab PASSWORD '{password}'"
        )
        return {
            "db-driver": "pgsql",
            "pgsql-host": server.bind_address or "",
            "pgsql-port": str(server.port),
            "pgsql-user": "perflab",
            "pgsql-password": password,
            "pgsql-db": "sbtest",
        }

    def host_versions(self) -> dict[str, list[str]]:
        from perflab.servers.postgresql.server import PG_BIN

        # "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)", "pgbench (PostgreSQL) 15.18 ..."
        return {"postgres": [f"{PG_BIN}/postgres", "--version"], "pgbench": [f"{PG_BIN}/pgbench", "--version"]}

    def tool_problems(self) -> list[Problem]:
        from perflab.servers.postgresql import preflight

        return preflight.tool_problems()

    def dataset_estimate(self, exp: Experiment, own: int | None) -> int:
        from perflab.servers.postgresql import preflight

        return preflight.dataset_estimate(exp, own)

    def spec_problems(self, exp: Experiment) -> list[Problem]:
        from perflab.servers.postgresql import preflight

        return preflight.spec_problems(exp)

    def option_problems(self, exp: Experiment, binaries: dict[str | None, Build], cache: Path) -> list[Problem]:
        """None here: spec_problems checks the names against the installed postgres (preflight.py)."""
        return []


KIND = PostgreSQLKind()
