"""MariaDB, and MySQL and Percona Server through its Flavor (flavor.py): the server process
(server.py), its datadir initialisation (datadir.py), and what perflab asks of the kind.

    from perflab.servers import kind
    kind("mariadb").installed_binary()   -> /usr/sbin/mariadbd
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from perflab.servers import Kind

if TYPE_CHECKING:
    from perflab.run.builds import Build
    from perflab.run.dataset import Snapshot
    from perflab.servers.mariadb.server import MariaDB
    from perflab.spec import Cell, Experiment
    from perflab.spec.problems import Problem

SHARES = ("share/mysql", "share/mariadb", "share", "sql/share", "usr/share/mysql")  # errmsg.sys's language dirs


class MariaDBKind(Kind):
    name = "mariadb"
    title = "MariaDB"
    mysql_protocol = True
    memory_figure = "RSS"
    sysbench_driver = "mysql"
    host_field = "mariadbd"
    dbgsym: ClassVar[dict[str, str]] = {"mariadbd": "mariadb-server-core-dbgsym"}
    build_estimate_s = 40 * 60.0  # mariadbd from Debian's source (docs/builds.md)
    debian_source = "mariadb"
    debian_binary = "mariadb-server-core"

    flavors = ("mariadb", "mysql", "percona")

    def flavor(self, version: str) -> str:
        """MariaDB, Percona Server, else MySQL (the version line of a binary no other kind claims)."""
        return "mariadb" if "MariaDB" in version else "percona" if "Percona" in version else "mysql"

    def datadir_format(self, datadir: Path) -> str | None:
        # MariaDB always has Aria's control file; MySQL 8.0 and later keep the data dictionary in
        # mysql.ibd, MySQL 5.x its grant tables as mysql/user.frm (and no Aria)
        if (datadir / "aria_log_control").is_file():
            return "mariadb"
        if (datadir / "mysql.ibd").is_file() or (datadir / "mysql" / "user.frm").is_file():
            return "mysql"
        return None

    def installed_binary(self) -> Path:
        from perflab.servers.mariadb.server import binary

        return Path(binary("mariadbd"))

    def basedir_build(self, name: str, basedir: Path) -> Build:
        from perflab.run.builds import BuildError, describe
        from perflab.spec.builds import server_binary

        found = server_binary(basedir)
        if found is None:
            raise BuildError(name, "basedir", None, f"no mariadbd or mysqld under {basedir}")
        share = next((basedir / s for s in SHARES if (basedir / s / "english" / "errmsg.sys").is_file()), None)
        return describe(found, name=name, kind="basedir", share=share, recipe={"basedir": str(basedir)})

    def prepare(self, workdir: Path, *, spec: Any, log: Path, name: str, build: Build | None) -> Snapshot:
        from perflab.run import dataset, workloads

        workload = workloads.of(spec)
        return dataset.prepare(
            workdir,
            workload=workload,
            spec=spec,
            test=spec.workload.test,
            tables=spec.dataset.tables,
            table_size=spec.dataset.table_size,
            options=spec.workload.options,
            server_options=spec.server_options,
            log=log,
            build=build,
            name=name,
        )

    def pool_options(self, snapshot: Snapshot) -> dict[str, Any]:
        return {"innodb_buffer_pool_size": snapshot.buffer_pool}

    def cache_size(self, snapshot: Snapshot) -> dict[str, str]:
        return {"buffer_pool": snapshot.buffer_pool}

    def cell_options(self, cell: Cell) -> dict[str, Any]:
        from perflab.run.prewarm import MARIADB_OPTIONS

        return dict(MARIADB_OPTIONS) if cell.prewarm else {}

    def server(self, rundir: Path, datadir: Path, options: dict[str, Any], **kw: Any) -> MariaDB:
        from perflab.servers.mariadb.server import MariaDB

        return MariaDB(rundir, datadir, options, **kw)

    def durability_options(self) -> tuple[str, ...]:
        from perflab.servers.mariadb.io import DURABILITY_OPTIONS

        return DURABILITY_OPTIONS

    def io_counters(self, server: Any) -> dict[str, float]:
        from perflab.servers.mariadb.io import counters

        return counters(server)

    def prewarm(self, server: Any, tool: str) -> float:
        from perflab.run import prewarm, workloads

        return prewarm.mariadb(server, workloads.get(tool).database)

    def pss_bytes(self, server: Any) -> int | None:
        from perflab.run.proctree import pss_bytes

        return pss_bytes([server.pid])

    def train(self, runner: Any, build: Build, spec: Any, snapshot: Snapshot, rundir: Path) -> str:
        """The experiment's workload (largest thread count) for `train_duration`, then a
        clean shutdown: the instrumented server writes its profile at exit."""
        from perflab.run import dataset, workloads
        from perflab.run.proc import call, clean_env

        exp = runner.exp.file
        options = {"innodb_buffer_pool_size": snapshot.buffer_pool, **exp.server_options}
        server = self.server(rundir, rundir / "data", options, build=build)
        try:
            dataset.restore(snapshot, rundir / "data")
            with server:
                command = workloads.of(exp).training_argv(exp, server, round(spec.train_duration))
                out = call(command, what="PGO training run", env=clean_env(), timeout=spec.train_duration + 600)
                server.stop(clean=True)  # the profile is written at exit
            return out
        finally:
            server.stop()
            shutil.rmtree(rundir, ignore_errors=True)

    def source_recipe(self, spec: Any, src: Any, stage: str, profile: str | None) -> dict[str, Any]:
        from perflab.run.builds import source

        return source.cmake_recipe(spec, src, stage, profile)

    def source_build(self, name: str, spec: Any, src: Any, cache: Path, listen: Any, **kw: Any) -> Build:
        from perflab.run.builds import source

        return source.cmake_build(name, spec, src, cache, listen, **kw)

    remote_client_refusal = None

    def listen_on(self, server: Any, address: str) -> None:
        server.bind_address = address

    def remote_login(self, server: Any, password: str) -> dict[str, str]:
        """User `perflab` from any address (the server listens on one only, for this cell's datadir)."""
        if not password.isalnum():
            raise ValueError("the password is made by perflab: hex digits only")
        server.sql(  # ALTER: a dataset prepared on a server host has the user already (another password)
            f"CREATE USER IF NOT EXISTS 'perflab'@'%' IDENTIFIED BY '{password}'; "
            f"ALTER USER 'perflab'@'%' IDENTIFIED BY '{password}'; GRANT ALL PRIVILEGES ON *.* TO 'perflab'@'%'"
        )
        return {
            "db-driver": "mysql",
            "mysql-host": server.bind_address,
            "mysql-port": str(server.port),
            "mysql-user": "perflab",
            "mysql-password": password,
            "mysql-db": "sbtest",
        }

    remote_server_refusal = None
    server_packages: ClassVar[dict[str, str]] = {
        "mariadbd": "mariadb-server",
        "mariadb": "mariadb-client",
        "mariadb-install-db": "mariadb-server",  # a dataset prepared on the host (run/remote_dataset.py)
    }

    def remote_status(self, server: Any, password: str) -> Any:
        from perflab.servers.mariadb.remote import RemoteStatusSampler

        return RemoteStatusSampler(server, password)

    def remote_init(self, place: Any, datadir: str) -> str:
        from perflab.servers.mariadb.remote import init_datadir

        return init_datadir(place, datadir)

    def remote_server(self, place: Any, datadir: str, options: dict[str, Any], **kw: Any) -> Any:
        from perflab.servers.mariadb.remote import RemoteMariaDB

        return RemoteMariaDB(place, datadir, options, **kw)

    def host_versions(self) -> dict[str, list[str]]:
        import os

        found = shutil.which("mariadbd") or ("/usr/sbin/mariadbd" if os.path.exists("/usr/sbin/mariadbd") else None)
        return {"mariadbd": [found, "--version"]} if found else {}

    def short_version(self, host: dict[str, Any]) -> str:
        from perflab.report.phrases import short_server

        return short_server(host)

    def file_problems(self, spec: Any) -> list[Problem]:
        from perflab.servers.mariadb import spec as rules

        return rules.file_problems(spec)

    def build_problems(self, builds: dict[str, Any]) -> list[Problem]:
        from perflab.servers.mariadb import spec as rules

        return rules.build_problems(builds)

    def tool_problems(self) -> list[Problem]:
        from perflab import preflight

        return preflight.tool_problems()

    def turn_counters(self, server: Any, clock: Any, lean: bool) -> Any:
        """The server's own statement counters, `SHOW GLOBAL STATUS` over one connection made now."""
        from perflab.run.observers.status import StatusSampler

        return StatusSampler(server.socket, lean=lean).connect()

    def process_counters(self, pid: int, threads: bool = False) -> Any:
        from perflab.run.observers.resources import ProcCounters

        return ProcCounters.read(pid, threads)

    def memory_sampler(self, pid: int) -> Any:
        from perflab.run.observers.resources import RssSampler

        return RssSampler(pid)

    def dataset_estimate(self, exp: Experiment) -> int:
        from perflab import preflight

        return preflight.dataset_estimate(exp)

    def connection_problems(self, exp: Experiment) -> list[Problem]:
        from perflab.concurrency import connection_problems

        return connection_problems(exp)


KIND = MariaDBKind()
