"""What the servers of MySQL's protocol share (the mariadb and mysql kinds): the `Kind` base both
packages build on.

A build's kind comes from its binary (`Build.server`: mariadb, mysql, percona). An experiment of
one of these kinds runs a build of the other through the build's own kind's modules: its datadir
is initialised and its option file written (a Flavor: servers/mysql_flavor.py) as that kind says
(servers/mysql_dialects.py: `plan`, `dialect`). The server process is one class for all of them
(servers/mysqld.py: Mysqld); what differs between them is its Flavor.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab.servers.kind import Kind, Tool
from perflab.servers.mysql_flavor import SHARES

if TYPE_CHECKING:
    from perflab.builds import Build
    from perflab.builds.source import Source
    from perflab.places import Place, RssSeries
    from perflab.places.procfs import ProcCounters
    from perflab.servers.dataset import Snapshot
    from perflab.servers.home import ServerHostPlace
    from perflab.servers.managed import Managed
    from perflab.servers.mysqld import Mysqld
    from perflab.spec.builds import BuildSpec
    from perflab.spec.matrix import Cell, Experiment
    from perflab.spec.problems import Problem
    from perflab.spec.schema import ExperimentFile


class MySQLProtocolKind(Kind):
    """A server kind of MySQL's protocol: sysbench's mysql driver, go-tpc, InnoDB's buffer pool,
    SHOW GLOBAL STATUS, one server process, cmake source builds."""

    mysql_protocol = True
    gotpc_driver = "mysql"
    memory_figure = "RSS"
    sysbench_driver = "mysql"

    def status(self, server: Managed, password: str | None, lean: bool = False) -> Any:
        """SHOW GLOBAL STATUS through this machine's `mariadb` client (its login: Mysqld.login); its
        stderr in the cell's directory here; the metrics' column as the server's dialect names it."""
        from perflab.observers.status import StatusSampler
        from perflab.servers import mysqld
        from perflab.tools import binary

        own = mysqld.of(server)
        client = [binary("mariadb"), *own.login(password), "--batch", "--skip-column-names", "--unbuffered"]
        return StatusSampler(client, own.rundir, lean=lean, enabled=own.flavor.metrics_enabled)

    def remote_server(
        self, place: ServerHostPlace, datadir: str, options: dict[str, Any], *, local: Path,
        env: dict[str, str] | None = None, alloc: Any = None, preload: str | None = None, build: Build | None = None,
    ) -> Managed:  # fmt: skip
        """mariadbd or mysqld on its host (Kind's): the host's installed MariaDB, its dialect by its
        version, or a build copied there (hosts/trees.py) behind its private root's loader there."""
        from perflab.servers import mysqld
        from perflab.servers.mysql_dialects import installed_dialect

        server = super().remote_server(place, datadir, options, local=local, env=env, alloc=alloc,
                                       preload=preload, build=build)  # fmt: skip
        if build is None or build.kind == "installed":
            mysqld.of(server).flavor = installed_dialect(place.version)  # "mariadbd  Ver 10.11.19-MariaDB-..."
        return server

    def host_programs(self, place: ServerHostPlace, build: Build | None) -> dict[str, Any]:
        return {"programs": {**place.binaries, "mariadbd": place.program}}  # a build's binary: its own

    def basedir_build(self, name: str, basedir: Path) -> Build:
        from perflab.builds import BuildError, describe
        from perflab.spec.builds import server_binary

        found = server_binary(basedir)
        if found is None:
            raise BuildError(name, "basedir", None, f"no mariadbd or mysqld under {basedir}")
        share = next((basedir / s for s in SHARES if (basedir / s / "english" / "errmsg.sys").is_file()), None)
        return describe(found, name=name, kind="basedir", share=share, recipe={"basedir": str(basedir)})

    def prepare(self, workdir: Path, *, spec: ExperimentFile, tool: Tool, log: Path, name: str, build: Build | None) -> Snapshot:
        from perflab.servers import mysqld_dataset

        return mysqld_dataset.prepare(
            workdir, tool, spec=spec, server_options=spec.server_options, log=log, build=build, name=name
        )

    def pool_options(self, snapshot: Snapshot) -> dict[str, Any]:
        return {"innodb_buffer_pool_size": snapshot.buffer_pool}

    def cache_size(self, snapshot: Snapshot) -> dict[str, str]:
        return {"buffer_pool": snapshot.buffer_pool}

    def cell_options(self, cell: Cell) -> dict[str, Any]:
        from perflab.servers.mysqld_dataset import PREWARM_OPTIONS

        return dict(PREWARM_OPTIONS) if cell.prewarm else {}

    def server(self, rundir: Path, datadir: Path | str, options: dict[str, Any], **kw: Any) -> Mysqld:
        """The server process of every MySQL-protocol kind; `build`'s own kind gives its Flavor."""
        from perflab.servers.mysqld import Mysqld

        return Mysqld(rundir, datadir, options, **kw)

    def durability_options(self) -> tuple[str, ...]:
        from perflab.servers.mysqld_io import DURABILITY_OPTIONS

        return DURABILITY_OPTIONS

    def io_counters(self, server: Managed) -> dict[str, float]:
        from perflab.servers.mysqld_io import counters

        return counters(server)

    def prewarm(self, server: Managed, database: str) -> float:
        from perflab.servers import mysqld
        from perflab.servers.mysqld_dataset import prewarm

        return prewarm(mysqld.of(server), database)

    def pss_bytes(self, server: Managed) -> int | None:
        from perflab.places.proctree import pss_bytes

        return pss_bytes([server.pid])

    def train(self, exp: ExperimentFile, build: Build, spec: BuildSpec, snapshot: Snapshot, rundir: Path, tool: Tool) -> str:
        """The experiment's workload (`tool`, largest thread count) for `train_duration`, then a
        clean shutdown: the instrumented server writes its profile at exit."""
        from perflab.servers import dataset
        from perflab.places.proc import call, clean_env
        from perflab.servers.managed import LOOPBACK

        options = {"innodb_buffer_pool_size": snapshot.buffer_pool, **exp.server_options}
        server = self.server(rundir, rundir / "data", options, build=build)
        server.as_root = True  # the profile is written into the build's tree, root's (the socket only, in root's dir)
        if tool.connects_by_tcp:
            self.listen_on(server, LOOPBACK)
        try:
            dataset.restore(snapshot, rundir / "data")
            with server:
                command = tool.training_argv(exp, server, round(spec.train_duration))
                out = call(command, what="PGO training run", env=clean_env(), timeout=spec.train_duration + 600)
                server.stop(clean=True)  # the profile is written at exit
            return out
        finally:
            server.stop()
            shutil.rmtree(rundir, ignore_errors=True)

    def source_recipe(self, spec: BuildSpec, src: Source, stage: str, profile: str | None) -> dict[str, Any]:
        from perflab.builds import source

        return source.cmake_recipe(spec, src, stage, profile)

    def source_build(self, name: str, spec: BuildSpec, src: Source, cache: Path, listen: Any, **kw: Any) -> Build:
        from perflab.builds import source

        return source.cmake_build(name, spec, src, cache, listen, **kw)

    def server_account(self) -> Any:
        from perflab.servers.mysqld import run_user

        return run_user()

    def listen_on(self, server: Managed, address: str) -> None:
        server.bind_address = address

    def remote_login(self, server: Managed, password: str) -> dict[str, str]:
        """User `perflab` from any address (the server listens on one only, for this cell's datadir)."""
        if not password.isalnum():
            raise ValueError("the password is made by perflab: hex digits only")
        server.sql(  # ALTER: a dataset prepared on a server host has the user already (another password)
            f"CREATE USER IF NOT EXISTS 'perflab'@'%' IDENTIFIED BY '{password}'; "
            f"ALTER USER 'perflab'@'%' IDENTIFIED BY '{password}'; GRANT ALL PRIVILEGES ON *.* TO 'perflab'@'%'"
        )
        return {
            "db-driver": "mysql",
            "mysql-host": server.bind_address or "",
            "mysql-port": str(server.port),
            "mysql-user": "perflab",
            "mysql-password": password,
            "mysql-db": "sbtest",
        }

    def file_problems(self, spec: ExperimentFile) -> list[Problem]:
        """The workload's own refusals (pgbench, pgbench's scale) come first: workloads/."""
        return self.build_problems(spec.builds)

    def build_problems(self, builds: dict[str, Any]) -> list[Problem]:
        """A build of PostgreSQL's kind (an install tree with bin/postgres, configure options)."""
        from perflab.spec.builds import server_binary
        from perflab.spec.problems import Problem

        problems: list[Problem] = []
        for name, spec in builds.items():
            key = f"builds.{name}"
            binary = server_binary(Path(spec.basedir)) if spec.basedir else None
            if binary is not None and binary.name == "postgres":
                tree = f"a {self.title} install tree (mariadbd or mysqld)"
                problems.append(
                    Problem(f"{key}.basedir", tree, str(binary), 'a PostgreSQL tree needs server = "postgresql"')
                )
            if spec.configure:
                problems.append(
                    Problem(
                        f"{key}.configure",
                        f"cmake = {{ ... }} on {self.title}",
                        "configure = [...]",
                        f"configure is PostgreSQL's (autoconf); {self.title}'s options go in cmake",
                    )
                )
        return problems

    def option_problems(self, exp: Experiment, binaries: dict[str | None, Build], cache: Path) -> list[Problem]:
        """Server option names the binary that runs them does not take (servers/mysqld_options.py)."""
        from perflab.servers.mysqld_options import option_problems

        return option_problems(exp, binaries, cache)

    def tool_problems(self) -> list[Problem]:
        from perflab.tools import tool_problems

        return tool_problems()

    def turn_counters(self, server: Managed, clock: Any, lean: bool, password: str | None = None) -> Any:
        """The server's own statement counters, `SHOW GLOBAL STATUS` over one connection made now:
        on its socket, or over TCP from here to a server on its host (`status`)."""
        return self.status(server, password, lean).connect()

    def process_counters(self, place: Place, pid: int, threads: bool = False) -> ProcCounters:
        return place.counters(pid, threads)  # one process: its threads are the server's

    def memory_sampler(self, place: Place, pid: int) -> RssSeries:
        return place.rss_sampler(pid)

    def dataset_estimate(self, exp: Experiment, own: int | None) -> int:
        """Bytes of a prepared datadir, roughly and on the high side: the tool's `own` estimate, else
        ~400 B per sysbench row (row, primary and secondary index); the redo log and the system tablespaces."""
        rows = exp.file.dataset.tables * exp.file.dataset.table_size
        return (rows * 400 if own is None else own) + (256 << 20) + (64 << 20)

    def connection_problems(self, exp: Experiment) -> list[Problem]:
        """Every cell's server must accept its threads' connections, and perflab's own ([observe] status)."""
        from perflab.errors import Problem
        from perflab.servers.mysqld import DEFAULT_OPTIONS

        found: dict[str, tuple[int, int]] = {}
        for cell in exp.cells():
            options = {k.replace("-", "_"): v for k, v in {**DEFAULT_OPTIONS, **cell.server_options}.items()}
            try:
                limit = int(options.get("max_connections", 151))
            except (TypeError, ValueError):
                continue  # the server judges a value it cannot parse
            if limit < cell.threads + 2:
                found.setdefault(cell.variant_key, (limit, cell.threads))
        return [
            Problem(
                f"server_options.max_connections ({variant})",
                f"at least {threads + 2} (threads + perflab's own connections)",
                str(limit),
                f"max_connections = {threads + 10}, or leave it out (perflab's default is "
                f"{DEFAULT_OPTIONS['max_connections']})",
            )
            for variant, (limit, threads) in found.items()
        ]
