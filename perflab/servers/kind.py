"""The interface every server kind implements (`Kind`; the registry: servers/__init__.py), and what a
kind asks of the workload tool (`Tool`): a module of its own, so that the kinds' packages import it
and not the registry that imports them (tests/unit/test_layers.py: no import cycle)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from perflab.builds import Build
    from perflab.builds.source import Source
    from perflab.places import Place, RssSeries
    from perflab.places.procfs import ProcCounters
    from perflab.servers.dataset import Snapshot
    from perflab.servers.home import ServerHostPlace
    from perflab.servers.managed import Managed
    from perflab.spec.builds import BuildSpec
    from perflab.spec.matrix import Cell, Experiment
    from perflab.spec.problems import Problem
    from perflab.spec.schema import ExperimentFile


class Tool(Protocol):
    """What a kind asks of the experiment's workload tool (workloads/: `Workload`), which run/ hands
    it: servers/ import no workload (tests/unit/test_layers.py: no import cycle)."""

    name: str
    database: str  # the database (MariaDB: schema) its dataset lives in
    connects_by_tcp: bool

    def setup_sql(self) -> str: ...

    def prepare_argv(self, spec: ExperimentFile | None, server: Managed) -> list[str]: ...

    def training_argv(self, spec: ExperimentFile, server: Managed, seconds: int) -> list[str]: ...


class Kind:
    """A server kind. Subclasses: perflab/servers/mariadb, perflab/servers/mysql (MySQL and
    Percona Server), both on mysql_protocol.MySQLProtocolKind, and perflab/servers/postgresql."""

    name: str  # [experiment] server
    title: str  # for people: "MariaDB", "PostgreSQL"
    memory_figure: str  # the per-cell memory figure: "RSS" of one process, or "PSS" over a tree
    sysbench_driver: str  # sysbench's --db-driver
    build_estimate_s: float  # a source build's time on 2 cores, for the plan
    host_field: str  # the host record's field (hostinfo.py) holding the installed server's version
    dbgsym: ClassVar[dict[str, str]]  # binary name -> Debian's package of its debug symbols
    # why the interleaved design cannot run it (spec/design.py chooses sequential, or refuses
    # an explicit "interleaved"); None: it can
    interleaved_refusal: str | None = None
    # the Debian source package its source builds come from, and the binary package whose
    # installed version is preferred
    debian_source: str
    debian_binary: str

    flavors: tuple[str, ...]  # what a binary of this kind can be (Build.server): mysql, percona, ...
    # why this kind has no installed server, so every variant names a build; None: it has one
    installed_refusal: str | None = None
    # which workload tools can drive it (workloads/): MySQL's protocol (go-tpc), pgbench
    mysql_protocol: bool = False
    runs_pgbench: bool = False
    gotpc_driver: str | None = None  # go-tpc's --driver for it (workloads/tpcc.py); None: go-tpc cannot drive it
    gotpc_socket: bool = False  # True: that driver reaches a cell's server by its socket directory, else by TCP
    # True: that driver reads a login's password from a file (lib/pq: PGPASSFILE), so go-tpc can log in
    # over TCP to a server on another host (docs/hosts.md#go-tpc-on-hosts); False: only on its command line
    gotpc_passfile: bool = False
    sysbench_writes: bool = True  # False: sysbench's read-only and OLTP write tests only (PostgreSQL)

    def datadir_format(self, datadir: Path) -> str | None:
        """The format of an existing datadir as its own files say it ("postgresql-15"; "mysql" or
        "mariadb" where the files name no version), or None when it is not this kind's."""
        raise NotImplementedError

    def opens(self, fmt: str, found: str) -> bool:
        """Does a binary of format `fmt` ("mysql-9.7") open a datadir `datadir_format` says is
        `found` ("mysql", or "postgresql-15" where the files name their version)?"""
        return found == fmt or fmt.startswith(found + "-")

    def installed_binary(self) -> Path:
        """The installed server binary (what variants without a build run)."""
        raise NotImplementedError

    def basedir_build(self, name: str, basedir: Path) -> Build:
        """A build of `basedir`, an install tree (BuildError if it holds no server)."""
        raise NotImplementedError

    def prepare(
        self, workdir: Path, *, spec: ExperimentFile, tool: Tool, log: Path, name: str, build: Build | None
    ) -> Snapshot:
        """The experiment's dataset in `workdir/name`, made by the installed server or `build`, with `tool`."""
        raise NotImplementedError

    def pool_options(self, snapshot: Snapshot) -> dict[str, Any]:
        """The server options that size its data cache to hold the snapshot."""
        raise NotImplementedError

    def cache_size(self, snapshot: Snapshot) -> dict[str, str]:
        """The dataset record's cache size field (datasets.json)."""
        raise NotImplementedError

    def cell_options(self, cell: Cell) -> dict[str, Any]:
        """Options a cell's switches (prewarm) add under its variant's own."""
        return {}

    def server(self, rundir: Path, datadir: Path | str, options: dict[str, Any], **kw: Any) -> Managed:
        """The (not yet started) server process of a cell."""
        raise NotImplementedError

    def durability_options(self) -> tuple[str, ...]:
        """Server options that decide what reaches the disk and when (docs/storage.md): a variant
        setting one on tmpfs measures nothing of the disk, and is warned about."""
        return ()

    def server_account(self) -> Any:
        """The account its servers run as (a pwd entry: perflab is root and never runs a server as root),
        None when they run as perflab's own (servers/managed.account)."""
        return None

    def storage_problems(self, directory: Path) -> list[Problem]:
        """What keeps this kind's server from using `directory` ([experiment] storage): exit 3. Its
        account must search every directory on the way there (the datadir is given to it)."""
        from perflab.servers.managed import unsearchable
        from perflab.spec.problems import Problem

        user = self.server_account()
        above = unsearchable(directory, user)
        if above is None:
            return []
        return [
            Problem(
                "experiment.storage",
                f"a directory the {user.pw_name} user (who runs the server) can reach",
                f"{above} is not searchable by {user.pw_name}",
                f"chmod o+x {above}",
            )
        ]

    def io_counters(self, server: Managed) -> dict[str, float]:
        """The server's own I/O counters now ([observe] io, observers/io.py): log bytes,
        pages flushed and dirty, checkpoints; names prefixed by the kind ("innodb.", "pg.")."""
        return {}

    def prewarm(self, server: Managed, database: str) -> float:
        """Read the whole dataset (`database`: the workload tool's) into the server's cache; seconds it took."""
        raise NotImplementedError

    def window_checks(self, server: Managed, cell: Cell, child: Any, workload: Any) -> dict[str, Any]:
        """Checks of a server here once the window's clients have connected (run/window.py), as the
        row's `resources` fields: PostgreSQL's backends' allocator."""
        return {}

    def pss_bytes(self, server: Managed) -> int | None:
        """The server's proportional set size now, summed over its processes."""
        raise NotImplementedError

    # the interleaved design (run/interleave.py): what a seat reads of its server
    def turn_counters(self, server: Managed, clock: Any, lean: bool, password: str | None = None) -> Any:
        """What a seat samples at every turn that ends a second of its client's running time
        (`sample()`, `samples`, `statements`, `selects`, `finish()`: StatusSampler's interface; `lean`: the
        throughput counters only). `clock` is the seat's TurnClock (workloads/turn_latency.py);
        `password`: the run's login to a server on its host (over TCP), None for one here."""
        raise NotImplementedError

    def process_counters(self, place: Place, pid: int, threads: bool = False) -> ProcCounters:
        """The server's CPU and faults now at `place`, over all its processes (`threads`: its context
        switches too, which reads every thread's status file: never between turns).
        ProcessLookupError once it is gone."""
        raise NotImplementedError

    def memory_sampler(self, place: Place, pid: int) -> RssSeries:
        """The server's memory at `place` sampled once a second over a window."""
        raise NotImplementedError

    def clients_connected(self, server: Managed, cell: Cell) -> dict[str, Any]:
        """Checks once the cell's client threads have connected, as the row's resources fields."""
        return {}

    def train(
        self, exp: ExperimentFile, build: Build, spec: BuildSpec, snapshot: Snapshot, rundir: Path, tool: Tool
    ) -> str:
        """PGO training of an instrumented `build`: the workload (`tool`), a clean stop, its profile kept."""
        raise NotImplementedError

    def source_recipe(self, spec: BuildSpec, src: Source, stage: str, profile: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def source_build(self, name: str, spec: BuildSpec, src: Source, cache: Path, listen: Any, **kw: Any) -> Build:
        raise NotImplementedError

    # the file, once valid (spec/servers.py): exit 2
    def file_problems(self, spec: ExperimentFile) -> list[Problem]:
        """What this kind refuses in an experiment file: workload tool, dataset keys, observers."""
        raise NotImplementedError

    def build_problems(self, builds: dict[str, Any]) -> list[Problem]:
        """[builds] entries of another kind (a tree, package or recipe this kind cannot use)."""
        raise NotImplementedError

    # preflight (perflab/preflight.py): exit 3 for the machine, exit 2 for the file
    def tool_problems(self) -> list[Problem]:
        raise NotImplementedError

    def dataset_estimate(self, exp: Experiment, own: int | None) -> int:
        """Bytes the prepared dataset will take on the tmpfs; `own`: the workload tool's estimate
        (Workload.dataset_estimate; None: the kind estimates sysbench's rows)."""
        raise NotImplementedError

    def spec_problems(self, exp: Experiment) -> list[Problem]:
        return []

    def option_problems(self, exp: Experiment, binaries: dict[str | None, Build], cache: Path) -> list[Problem]:
        """Server option names of the file that `binaries` (the cells' builds here now, None: the
        installed server) do not take; what they take is kept under `cache` (perflab's cache)."""
        return []

    def connection_problems(self, exp: Experiment) -> list[Problem]:
        return []

    # a client on another host (hosts/client.py, docs/hosts.md)
    def listen_on(self, server: Managed, address: str) -> None:
        """Make the (not yet started) server listen on `address` only, where a remote client reaches it."""
        raise NotImplementedError(f"a client on another host is not supported with {self.title} yet")

    def remote_login(self, server: Managed, password: str) -> dict[str, str]:
        """A login for a remote client on the started server (a user with `password`, for this
        run's datadir only), as sysbench options: {"mysql-host": ..., "mysql-password": ...}."""
        raise NotImplementedError(f"a client on another host is not supported with {self.title} yet")

    # the server on another host (hosts/server.py, docs/hosts.md)
    server_packages: ClassVar[dict[str, str]] = {}  # a server host's tools -> their Debian packages
    profiles_tree = False  # its server target is a process tree (a postmaster and its backends): profile them all
    server_dirs: tuple[str, ...] = ()  # where a server host keeps them off the PATH, searched first

    def remote_init(self, place: ServerHostPlace, datadir: str) -> str:
        """A new datadir at `datadir` on the server host (its installed server's own tool), for a
        dataset prepared there (hosts/dataset.py); what initialised it."""
        raise NotImplementedError(f"preparing a dataset on another host is not supported with {self.title} yet")

    def status(self, server: Managed, password: str | None, lean: bool = False) -> Any:
        """[observe] status of `server`, read from here (on its socket; over TCP as the run's login,
        `password`, when it runs on its host): a StatusSampler, not yet connected."""
        raise NotImplementedError(f"[observe] status is not supported with {self.title}")

    def remote_server(
        self, place: ServerHostPlace, datadir: str, options: dict[str, Any], *, local: Path,
        env: dict[str, str] | None = None, alloc: Any = None, preload: str | None = None, build: Build | None = None,
    ) -> Managed:  # fmt: skip
        """The (not yet started) server of a cell on another host: `place` is the run's ServerHost
        (hosts/server.py: its run directory, address and binary there), `datadir` a path there, `local`
        the cell's directory here; `alloc` [observe] alloc's counter there, `preload` a variant's
        allocator there, `build` a build copied there (None: the host's installed server). Its home is
        its cell's directory there (hosts/home.py); it listens only on the address this machine reaches
        the host by, on a port free there."""
        from perflab.hosts.home import HostHome

        server = self.server(
            local, datadir, options, env={**(env or {}), **(alloc.env() if alloc else {})}, preload=preload,
            tracer=alloc.there if alloc else None, build=build, home=HostHome(place, local, datadir),
            **self.host_programs(place, build),
        )  # fmt: skip
        server.alloc = alloc
        self.listen_on(server, place.address)
        server.port = place.free_port()
        return server

    def host_programs(self, place: ServerHostPlace, build: Build | None) -> dict[str, Any]:
        """The server's keywords that name its programs on the host `place` (tool -> path there), `build`'s
        when it is one copied there."""
        raise NotImplementedError(f"a server on another host is not supported with {self.title} yet")

    def host_versions(self) -> dict[str, list[str]]:
        """The host record's fields (hostinfo.py) and the argv whose first line fills each: the
        installed server's version, and its own workload tool's."""
        raise NotImplementedError

    def short_version(self, host: dict[str, Any]) -> str:
        """The installed server as a report's subtitle names it, from the host record."""
        return str(host.get(self.host_field) or self.host_field)

    def facts(self, host: dict[str, Any]) -> dict[str, Any]:
        """What the reports need of this kind, recorded in the run's meta (`server_facts`,
        docs/results-format.md): report/, analyze/ and history/ read them, never a server package."""
        return {
            "kind": self.name,
            "title": self.title,
            "memory_figure": self.memory_figure,
            "host_field": self.host_field,
            "short_version": self.short_version(host),
            "interleaved_refusal": self.interleaved_refusal,
            "durability_options": list(self.durability_options()),
        }
