"""The interface every workload tool implements (`Workload`; the registry: workloads/__init__.py),
in a module of its own so that the tools' modules import it and not the registry that imports them
(tests/unit/test_layers.py: no import cycle)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from perflab.errors import Problem
    from perflab.servers.managed import Managed
    from perflab.spec.matrix import Cell, Experiment
    from perflab.spec.schema import ExperimentFile
    from perflab.workloads.sysbench_output import Summary


class Workload:
    """A workload tool. Subclasses: sysbench.Sysbench, pgbench.Pgbench, tpcc.GoTpc."""

    name: str  # [workload] tool
    database: str  # the database (MariaDB: schema) its dataset lives in
    throughput: str  # what `qps` (the analysis's figure) counts, for people
    metric: str = "QPS"  # its name in the reports' tables (meta `throughput`)
    # why the interleaved design cannot run it (spec/design.py); None: it can
    interleaved_refusal: str | None = None
    # why `[workload] rate` (a fixed arrival rate, workloads/rate.py) cannot run it; None: it can
    rate_refusal: str | None = None
    # its client on a host -> where to get it there (a Debian package, or the instruction), and where
    # it may be off the PATH
    client_packages: ClassVar[dict[str, str]] = {}
    client_dirs: tuple[str, ...] = ()

    def host_refusal(self, kind: Any) -> str | None:
        """Why it cannot run with a server or a client on another host (spec/hosts.py); None: it can,
        its login's password in a file only its owner reads (sysbench's --config-file, libpq's
        PGPASSFILE), never on a command line."""
        return None

    def host_version(self, link: Any, binary: str) -> str | None:
        """Its client's version on a host (`binary` there), as meta `host` records this machine's; None:
        it says nothing. ToolMissingError when that version cannot run what perflab runs."""
        done = link.run([binary, "--version"])
        lines = (done.stdout or done.stderr).strip().splitlines()
        return lines[0].strip() if lines else None

    links_client_library: bool = False  # libmariadb, checked against a variant's client_library
    stamps_lines: bool = False  # perflab prefixes each output line with its arrival time (workloads/client.py)
    # True: it connects to a server here by TCP (go-tpc has no socket option), which then listens on
    # 127.0.0.1 (else on no address: the socket in the run's directory, which only root reaches)
    connects_by_tcp: bool = False

    def tcp_on(self, kind: Any) -> bool:
        """Whether it connects to a server of `kind` here by TCP (connects_by_tcp, unless the kind's
        driver takes its socket: go-tpc on PostgreSQL)."""
        return self.connects_by_tcp
    # the key that sizes its dataset, and how to make it smaller (preflight's "tmpfs too small")
    dataset_size: tuple[str, str] = ("", "fewer tables / a smaller table_size")

    @property
    def output_name(self) -> str:
        """The client's output file in a cell's logs/."""
        return f"{self.name}.txt"

    def start_watch(self, server: Managed, end: Any, cell: Cell, child: Any, out: Path, deadline_s: float) -> Any:
        """A workloads/client.StartWatch of the client's start, its clock's zero: the warm-up and the
        window are timed from it (sysbench: its "Threads started!"; pgbench: every client connected,
        counted where it runs by the client `end`); None: from its launch."""
        return None

    # the file, once valid: exit 2
    def file_problems(self, spec: ExperimentFile, kind: Any) -> list[Problem]:
        """[workload] and [dataset] keys this tool refuses, and servers of `kind` it cannot drive."""
        return []

    # the machine (preflight.py): exit 3 for a missing tool, exit 2 for the file
    def tool_problems(self) -> list[Problem]:
        return []

    def spec_problems(self, exp: Experiment) -> list[Problem]:
        """The test and its options, asked of the tool itself."""
        return []

    def dataset_estimate(self, exp: Experiment) -> int | None:
        """Bytes its dataset takes in a MariaDB datadir; None: the server kind estimates (sysbench rows)."""
        return None

    # the dataset and the run, on a MariaDB-protocol server (servers/mariadb)
    def setup_sql(self) -> str:
        """SQL run as root before `prepare_argv` (a user the tool connects as)."""
        return ""

    def prepare_argv(self, spec: ExperimentFile | None, server: Managed) -> list[str]:
        raise NotImplementedError

    def remote_prepare_argv(
        self, spec: ExperimentFile, server: Managed, login: dict[str, str], password: str
    ) -> tuple[list[str], dict[str, str]]:
        """The dataset's loader here against a server on another host (hosts/dataset.py): its
        argv and environment, the run's `login` (the kind's remote_login) and `password` in a file
        only its owner reads, never on the command line."""
        raise NotImplementedError

    def run_argv(
        self,
        spec: ExperimentFile,
        cell: Cell,
        server: Managed,
        seconds: int,
        checkpoint: int | None,
        jobs: int | None = None,
    ) -> list[str]:
        """A cell's client: `seconds` in all, its statistics reset after `checkpoint` where it can;
        `jobs`: its own threads where the tool runs them apart from its connections (the client's
        pinned CPUs), else one per connection."""
        raise NotImplementedError

    # a server or a client on another host (run/window.py's client ends): the run's `login` (the
    # kind's remote_login: address, port, user, password) kept off the command line
    def login_command(
        self, spec: ExperimentFile, cell: Cell, server: Managed, login: dict[str, str], seconds: int
    ) -> tuple[list[str], dict[str, str] | None]:
        """A cell's client here against a server on its host: (argv, its environment)."""
        raise NotImplementedError(f"{self.name} cannot reach a server on another host yet")

    def host_command(
        self, spec: ExperimentFile, cell: Cell, server: Managed, login: dict[str, str], remote: Any, seconds: int | None = None
    ) -> tuple[list[str], dict[str, str] | None, str | None]:
        """A cell's client on the client host (`remote`: hosts/client.RemoteClient): (argv there,
        its environment there, the workload's script's path there when it is a local file).
        `seconds`: its whole run (an interleaved seat's); None: the warm-up, the window and its tail."""
        raise NotImplementedError(f"{self.name} cannot run on another host yet")

    def fetch_log(self, remote: Any, cell: Cell, local: Path) -> None:
        """A client with a tail on a host: its per-transaction log copied into `local` once it ended."""

    def training_argv(self, spec: ExperimentFile, server: Managed, seconds: int) -> list[str]:
        """PGO training (servers' train): the workload at its largest thread count for `seconds`."""
        raise NotImplementedError

    def read_output(self, out: Path, code: int, warmup: int) -> tuple[Summary, list[dict[str, Any]]]:
        """The window's summary and every second, each marked warm-up or not; WorkloadError on failure."""
        raise NotImplementedError

    # a client that cannot reset its statistics and logs every transaction instead (pgbench on
    # PostgreSQL, run/window.py): its time limit reaches `tail_s` past the window, so
    # its connections still live when the window's end mark is taken, and perflab ends it then
    # (`end_now`); its window's figures are cut from its log at perflab's marks (`window_output`)
    tail_s: int = 0

    def wait(self, child: Any, seconds: float, margin: float) -> int:
        """The client's exit code once it has done `seconds` of work; killed `margin` later (a hung
        client or server: WorkloadError)."""
        from perflab.workloads import client

        return client.wait(child, round(seconds), margin, self.name)

    def end_now(self, child: Any) -> None:
        """End the client as its own time limit would (a client with `tail_s`)."""

    def window_output(
        self,
        spec: ExperimentFile,
        out: Path,
        code: int,
        warmup: int,
        server: Managed,
        launched: float,
        window: tuple[float, float],
        rate: int | None = None,
    ) -> tuple[Summary, list[dict[str, Any]]]:
        """`read_output`, for a client that can also be cut at perflab's window marks (epoch
        seconds; `launched`: its clock's zero, its start as `start_watch` saw it, else its launch; `rate`: the cell's arrival rate, or None)."""
        return self.read_output(out, code, warmup)

    def effective_options(self, spec: ExperimentFile, argv: list[str]) -> dict[str, str]:
        """What the client ran with (the row's `sysbench_options`)."""
        return {}

    # the interleaved design (run/seat.py), where interleaved_refusal is None
    turn_clock = False  # True: its seat's client runs through turns.lua (workloads/turn_latency.py)

    def seat_client(self, seat: Any, seconds: int) -> None:
        """Start `seat`'s client for up to `seconds` (seat.child, seat.command, its output in
        seat.out) and return once every connection is made."""
        raise NotImplementedError

    def seat_counts(self, seat: Any) -> Any | None:
        """What counts its transactions at every sample, when the client must (a StatusSampler
        -like object); None: the server kind's turn_counters."""
        return None

    def seat_end(self, seat: Any) -> None:
        """After the window, before `seat_counts(...).finish()`: nothing, or end the client so
        that its counts are complete."""
