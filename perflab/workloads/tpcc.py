"""TPC-C through go-tpc behind perflab's Workload interface (workloads/__init__.py): what a
go-tpc experiment file may hold, go-tpc's checks against this machine, its dataset (`go-tpc tpcc
prepare`: as tpcc@127.0.0.1 on MariaDB and MySQL, as the superuser through the socket on
PostgreSQL) and a cell's command. The server kind names go-tpc's driver for it (Kind.gotpc_driver).
The command line and the parser of its output are gotpc.py's; docs/workloads.md says what is measured.

    from perflab import workloads
    workloads.get("go-tpc").prepare_argv(spec, server)   # [.../go-tpc, "tpcc", "prepare", ...]
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from perflab.errors import ToolMissingError
from perflab.workloads import gotpc
from perflab.workloads.base import Workload
from perflab.workloads.client import window_seconds
from perflab.workloads.gotpc import DATABASE, RESERVED, USER, VERSION, WAREHOUSE_BYTES
from perflab.workloads.pgbench_argv import host_passfile, passfile_env
from perflab.workloads.sysbench_output import Summary

if TYPE_CHECKING:
    from perflab.errors import Problem
    from perflab.servers.managed import Managed
    from perflab.spec.matrix import Cell, Experiment
    from perflab.spec.schema import ExperimentFile

WAIT_GRACE_S = 5.0  # a --wait run's last report comes at its --time: ended this long after it


class GoTpc(Workload):
    name = "go-tpc"
    database = DATABASE
    throughput = "new-order transactions per minute (NOPM; go-tpc prints it as tpmC)"
    metric = "NOPM"
    interleaved_refusal = "go-tpc's transactions are not counted per turn (sysbench's are)"
    rate_refusal = (
        "go-tpc v1.0.12 has no rate control: its workers loop as fast as they can (--wait adds TPC-C's "
        "keying and think time, a closed loop still); use sysbench or pgbench for a fixed rate"
    )
    stamps_lines = True  # its reports carry no time, and a second without a transaction prints nothing
    connects_by_tcp = True  # MySQL's protocol: --host/--port only (PostgreSQL's driver takes a socket: tcp_on)
    dataset_size = ("workload.warehouses", "fewer warehouses")
    # on a client host: `go install`'s, pinned (the Makefile's go-tpc target), on the PATH or in GOBIN
    client_packages: ClassVar[dict[str, str]] = {
        "go-tpc": f"GOBIN=/usr/local/bin go install github.com/pingcap/go-tpc/cmd/go-tpc@{VERSION}"
    }
    client_dirs = ("/usr/local/bin",)

    def host_refusal(self, kind: Any) -> str | None:
        """PostgreSQL's driver (lib/pq) reads its password from PGPASSFILE; MySQL's (go-sql-driver)
        takes it on go-tpc's command line only (--password), which every account on the host reads
        in /proc: perflab makes no login without a password there (docs/trust.md)."""
        if kind.gotpc_passfile:
            return None
        return (
            f"go-tpc {VERSION}'s MySQL driver takes its password on the command line only (--password), "
            "which every account on a host reads: with server_host or client_host, go-tpc drives PostgreSQL "
            "(its driver reads PGPASSFILE); use sysbench for a MariaDB or MySQL server there"
        )

    def host_version(self, link: Any, binary: str) -> str:
        """The go-tpc module version the host's binary was built from (`built_version`, read there)."""
        pattern = r"mod[[:space:]]+github\.com/pingcap/go-tpc[[:space:]]+v[0-9][0-9A-Za-z.+-]*"
        found = link.run(["grep", "-a", "-o", "-m", "1", "-E", pattern, binary]).stdout.split()
        built = found[-1] if found else None
        if built != VERSION:  # its flags and its output are pinned to this one
            raise ToolMissingError(
                f"host {link.name}: {binary} is go-tpc {built or 'of an unknown version'}, not {VERSION}",
                f"install it there: {self.client_packages['go-tpc']}",
            )
        return f"go-tpc {built} (go install)"

    def file_problems(self, spec: ExperimentFile, kind: Any) -> list[Any]:
        from perflab.errors import Problem

        problems = []
        if kind.gotpc_driver is None:
            problems.append(
                Problem(
                    "workload.tool",
                    f"a server go-tpc {VERSION} can drive (MySQL's protocol or PostgreSQL's)",
                    f'"go-tpc" on {kind.title}',
                    f"go-tpc {VERSION}, the version perflab installs, has no driver for it",
                )
            )
        if spec.workload.warehouses is None:
            problems.append(
                Problem(
                    "workload.warehouses",
                    "the number of TPC-C warehouses",
                    "none",
                    "warehouses = 4 (about 100 MiB each)",
                )
            )
        if "test" not in spec.workload.model_fields_set:
            problems.append(
                Problem(
                    "workload.test", 'test = "tpcc"', "none (sysbench's oltp_read_only is the default)", 'test = "tpcc"'
                )
            )
        for key in sorted(spec.dataset.model_fields_set & {"tables", "table_size", "scale"}):
            problems.append(
                Problem(
                    f"dataset.{key}",
                    "no [dataset] with go-tpc",
                    key,
                    "its dataset is [workload] warehouses = N (go-tpc tpcc prepare)",
                )
            )
        return problems + self._reserved(spec) + self._unsupported(spec)

    @staticmethod
    def _unsupported(spec: ExperimentFile) -> list[Any]:
        """What needs sysbench: PGO training runs it; client variants load into its libmariadb."""
        from perflab.errors import Problem

        found = [
            Problem(
                f"builds.{name}.pgo",
                "no pgo with go-tpc (its training runs sysbench)",
                "true",
                "train on a sysbench experiment, or leave pgo out",
            )
            for name, build in spec.builds.items()
            if build.pgo
        ]
        for axis, labels in spec.variants.items():
            for label, variant in labels.items():
                for key in ("client_preload", "client_library"):
                    if getattr(variant, key):
                        found.append(
                            Problem(
                                f"variants.{axis}.{label}.{key}",
                                f"no {key} with go-tpc",
                                key,
                                "go-tpc is a static Go binary: nothing is preloaded into it",
                            )
                        )
        return found

    def _reserved(self, spec: ExperimentFile) -> list[Any]:
        from perflab.errors import Problem

        places = [("workload.options", spec.workload.options)] + [
            (f"variants.{axis}.{label}.workload_options", v.workload_options)
            for axis, labels in spec.variants.items()
            for label, v in labels.items()
        ]
        return [
            Problem(
                f"{where}.{key}",
                f"no {key} (perflab sets it)",
                key,
                "use workload.warehouses, workload.threads and experiment.duration",
            )
            for where, options in places
            for key in options
            if key.replace("-", "_").lower() in RESERVED
        ]

    def tool_problems(self) -> list[Any]:
        from perflab.errors import Problem

        try:
            binary = gotpc.go_tpc_binary()
        except ToolMissingError as exc:
            return [Problem("(tool) go-tpc", f"go-tpc {VERSION} installed", "missing", exc.hint)]
        built = gotpc.built_version(binary)
        if built != VERSION:  # 1.0.7 has no postgres driver; its flags and output are pinned to this one
            found = f"{binary}: {built or 'an unknown version'}"
            return [Problem("(tool) go-tpc", f"go-tpc {VERSION}", found, gotpc.GET)]
        return []

    def spec_problems(self, exp: Experiment) -> list[Problem]:
        import difflib

        from perflab.errors import Problem

        known = gotpc.known_options()
        problems = []
        for where, options in [("workload.options", exp.file.workload.options)] + [
            (f"variants.{a}.{label}.workload_options", v.workload_options)
            for a, labels in exp.file.variants.items()
            for label, v in labels.items()
        ]:
            for key in options:
                if key.replace("-", "_") not in known:
                    close = difflib.get_close_matches(key.replace("-", "_"), sorted(known), n=3)
                    hint = f"did you mean {', '.join(close)}?" if close else "see `go-tpc tpcc run --help`"
                    problems.append(Problem(f"{where}.{key}", "an option of go-tpc tpcc run", "unknown option", hint))
        return problems

    def dataset_estimate(self, exp: Experiment) -> int:
        return (exp.file.workload.warehouses or 1) * WAREHOUSE_BYTES

    def tcp_on(self, kind: Any) -> bool:
        """Whether a cell's server of `kind` must listen on 127.0.0.1 for it: MySQL's driver only
        (PostgreSQL's takes the socket's directory, so that server listens on no address)."""
        return kind.gotpc_driver is not None and not kind.gotpc_socket

    def setup_sql(self) -> str:
        # its own database only: no FILE, no SUPER (reached only from the server's own network)
        return f"CREATE USER IF NOT EXISTS '{USER}'@'127.0.0.1'; GRANT ALL ON {DATABASE}.* TO '{USER}'@'127.0.0.1'"

    def prepare_argv(self, spec: ExperimentFile | None, server: Managed) -> list[str]:
        """go-tpc loads a warehouse's 10 districts in parallel: one thread per CPU, up to 10 a
        warehouse. Without its consistency checks (TPC-C clause 3.3.2, `--no-check`): they only
        read the rows just generated, and took 77 of the 80 s of a warehouse's prepare here."""
        assert spec is not None, "a workload prepares the dataset of its experiment file"
        warehouses = spec.workload.warehouses or 1
        threads = min(10 * warehouses, os.cpu_count() or 1)
        options = {"no_check": True}
        argv = gotpc.argv("prepare", warehouses=warehouses, threads=threads, options=options, **_target(spec, server))
        return server.client(argv)  # MariaDB's: in the server's own network (places/netns.py)

    def remote_prepare_argv(
        self, spec: ExperimentFile, server: Managed, login: dict[str, str], password: str
    ) -> tuple[list[str], dict[str, str]]:
        """`go-tpc tpcc prepare` here against the server on its host, as the run's role over TCP."""
        warehouses = spec.workload.warehouses or 1
        threads = min(10 * warehouses, os.cpu_count() or 1)
        argv = gotpc.argv("prepare", warehouses=warehouses, threads=threads, options={"no_check": True}, **_login(login))
        return argv, passfile_env(server, login["pgsql-password"])

    def login_command(
        self, spec: ExperimentFile, cell: Cell, server: Managed, login: dict[str, str], seconds: int
    ) -> tuple[list[str], dict[str, str]]:
        """The cell's go-tpc here against the server on its host, as the run's role over TCP."""
        options = {**spec.workload.options, **cell.workload_options}
        warehouses = spec.workload.warehouses or 1
        argv = gotpc.argv(
            "run", warehouses=warehouses, threads=cell.threads, seconds=seconds, options=options, **_login(login)
        )
        return argv, passfile_env(server, login["pgsql-password"])

    def host_command(
        self, spec: ExperimentFile, cell: Cell, server: Managed, login: dict[str, str], remote: Any, seconds: int | None = None
    ) -> tuple[list[str], dict[str, str], None]:
        """The cell's go-tpc on the client host (`remote`: hosts/client.RemoteClient): its password
        in a file only its owner reads there (PGPASSFILE)."""
        warmup, seconds = window_seconds(spec)
        options = {**spec.workload.options, **cell.workload_options}
        secret = host_passfile(remote, cell, login)
        argv = gotpc.argv(
            "run",
            warehouses=spec.workload.warehouses or 1,
            threads=cell.threads,
            seconds=warmup + seconds,
            options=options,
            binary=remote.binary,
            **_login(login),
        )
        return argv, {"PGPASSFILE": secret}, None

    def run_argv(
        self, spec: ExperimentFile, cell: Cell, server: Managed, seconds: int, checkpoint: int | None, jobs: int | None = None
    ) -> list[str]:
        options = {**spec.workload.options, **cell.workload_options}
        run = gotpc.argv(
            "run",
            **_target(spec, server),
            warehouses=spec.workload.warehouses or 1,
            threads=cell.threads,
            seconds=seconds,
            options=options,
        )
        return server.client(run)  # in the server's own network (places/netns.py)

    def wait(self, child: Any, seconds: float, margin: float) -> int:
        """With --wait, each client finishes its keying and think time after --time (up to 138 s:
        18 s of keying and a think time capped at 120 s for a new order) and go-tpc reports nothing
        after it: ended WAIT_GRACE_S after its --time as its --time would end it (its reports are
        complete; 0, without its closing [Summary] and tpmC lines)."""
        from perflab.workloads import client

        if "--wait=true" not in child.argv:
            return client.wait(child, round(seconds), margin, self.name)
        try:  # `seconds`: the client's in all, from its launch
            return child.wait(timeout=max(0.0, child.started + seconds + WAIT_GRACE_S - time.monotonic()))
        except TimeoutError:
            child.kill()
            return 0

    def read_output(self, out: Path, code: int, warmup: int) -> tuple[Summary, list[dict[str, Any]]]:
        return gotpc.read_output(out, code, warmup)

    def effective_options(self, spec: ExperimentFile, argv_used: list[str]) -> dict[str, str]:
        """Every --key=value perflab passed (go-tpc's defaults stand for the rest)."""
        return {
            a[2:].split("=", 1)[0].replace("-", "_"): a.split("=", 1)[1]
            for a in argv_used
            if a.startswith("--") and "=" in a
        }


def _target(spec: ExperimentFile, server: Managed) -> dict[str, Any]:
    """gotpc.argv's connection to a cell's `server`: its port (MySQL's protocol, over TCP), or its
    socket's directory and superuser (PostgreSQL's driver, Kind.gotpc_driver)."""
    from perflab import servers

    kind = servers.kind(spec.experiment.server)
    if not kind.gotpc_socket:
        return {"port": server.port}
    from perflab.servers.postgresql.server import SUPERUSER

    return {"port": server.port, "socket_dir": server.rundir, "user": SUPERUSER, "driver": kind.gotpc_driver}


def _login(login: dict[str, str]) -> dict[str, Any]:
    """gotpc.argv's connection as the run's role (the kind's remote_login) over TCP."""
    return {"address": login["pgsql-host"], "port": int(login["pgsql-port"]), "user": login["pgsql-user"]}


GO_TPC = GoTpc()
