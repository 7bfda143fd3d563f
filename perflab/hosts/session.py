"""The remote hosts of one run: connected, each with its run directory, its clock measured at the
start and the end of the run, and its fingerprint; everything started there stopped on the way out.

    with Hosts({"load": parse_target("root@load1")}, workdir) as hosts:
        hosts.rundir("load").start(["sysbench", ...])
        hosts.meta()   # {"version": 1, "hosts": {"load": {"ssh": ..., "clock": {...}, "fingerprint": {...}}}}
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from perflab import hostinfo
from perflab.errors import ClockAlignmentError, HostLostError, ToolMissingError
from perflab.hosts import clock, own_cpu, rundir
from perflab.hosts.target import SshTarget
from perflab.hosts.transport import Connection

META_VERSION = 1  # meta `hosts` (docs/results.md)


class RemoteProbe:
    """hostinfo's Probe over SSH: the fingerprint of a remote host is gathered by the same code as this machine's."""

    def __init__(self, link: Connection) -> None:
        self.link = link

    def read(self, path: str) -> str | None:
        done = self.link.run(["cat", path])
        return done.stdout if done.status == 0 else None

    def run(self, argv: list[str]) -> str | None:
        done = self.link.run(argv)
        return done.stdout if done.status == 0 else None


@dataclass
class Host:
    name: str
    link: Connection
    rundir: rundir.RunDir
    clock_start: clock.ClockReading
    clock_end: clock.ClockReading | None = None
    fingerprint: dict[str, Any] = field(default_factory=dict)
    lost: str | None = None  # why the host dropped off, once it has
    cpu: own_cpu.RunCpu | None = None  # perflab's own CPU there over the run, from its opening
    storage: dict[str, Any] | None = None  # a server host's [experiment] storage, as run/storage.describe_on says


def _open(name: str, target: SshTarget, workdir: Path) -> Host:
    link = Connection.open(name, target)
    try:
        # what dead runs of this machine left there, found from the host's side: a reboot here (this
        # machine's record of them, hosts.json, on its tmpfs) must not leave their servers running there
        rundir.said(name, rundir.sweep(link))
        place = rundir.RunDir.create(link, workdir)
        cpu = own_cpu.RunCpu(link, place.path)  # from here: the clock, the fingerprint, the run
        return Host(
            name, link, place, clock.measure(link), fingerprint=hostinfo.fingerprint(RemoteProbe(link)), cpu=cpu
        )
    except BaseException:
        link.close()
        raise


def _aligned(name: str, host: Host) -> dict[str, Any]:
    """The run's alignment of a host's clock (its start and end readings): the shift and its error,
    or why it is refused (over 50 ms); none before the end reading."""
    if host.clock_end is None:
        return {"shift_s": None, "error_s": None, "refused": None}
    try:
        return {**clock.align(name, host.clock_start, host.clock_end).to_dict(), "refused": None}
    except ClockAlignmentError as exc:
        return {"shift_s": None, "error_s": None, "refused": exc.message}


class Hosts:
    def __init__(self, targets: dict[str, SshTarget], workdir: Path) -> None:
        self.targets, self.workdir = targets, workdir
        self.hosts: dict[str, Host] = {}

    def __enter__(self) -> Self:
        try:
            for name, target in self.targets.items():
                self.hosts[name] = _open(name, target, self.workdir)
                rundir.record(self.workdir, [h.rundir.placement() for h in self.hosts.values()])
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def rundir(self, name: str) -> rundir.RunDir:
        return self.hosts[name].rundir

    def link(self, name: str) -> Connection:
        return self.hosts[name].link

    def require(self, name: str, tools: dict[str, str]) -> None:
        """ToolMissingError (exit 3) naming the package to install on `name` when a tool is missing there."""
        for tool, package in tools.items():
            if self.link(name).run(["sh", "-c", 'command -v "$0" || test -x "$0"', tool]).status != 0:
                raise ToolMissingError(
                    f"host {name} has no {tool}",
                    f"install it there: `apt-get install {package}` on {self.targets[name]}",
                )

    def measure_end(self) -> None:
        """The clocks at the end of the run, and perflab's own CPU on each host over it (a host that
        dropped off keeps neither)."""
        for host in self.hosts.values():
            try:
                host.clock_end = clock.measure(host.link)
                if host.cpu is not None:
                    host.cpu.finish()
            except HostLostError as exc:
                host.lost = host.lost or exc.message

    def close(self) -> None:
        """Stop and remove what the run left on each host; a host that cannot be reached stays recorded
        in the work directory's hosts.json for `perflab doctor --clean`."""
        left = []
        for host in self.hosts.values():
            try:
                host.rundir.remove()
            except HostLostError as exc:
                host.lost = host.lost or exc.message
                left.append(host.rundir.placement())
            host.link.close()
        with contextlib.suppress(OSError):
            if left:
                rundir.record(self.workdir, left)
            else:
                (self.workdir / rundir.RECORD).unlink(missing_ok=True)

    def meta(self) -> dict[str, Any]:
        """The run's meta `hosts`: each host's address, run directory, clocks and fingerprint, and the
        fingerprint fields that differ between this machine and the hosts."""
        prints = {"local": hostinfo.fingerprint(hostinfo.LocalProbe())}
        prints.update({name: h.fingerprint for name, h in self.hosts.items()})
        return {
            "version": META_VERSION,
            "hosts": {
                name: {
                    "ssh": str(self.targets[name]),
                    "dir": h.rundir.path,
                    "clock": {
                        "start": asdict(h.clock_start),
                        "end": asdict(h.clock_end) if h.clock_end else None,
                        **_aligned(name, h),
                    },
                    "fingerprint": h.fingerprint,
                    "perflab_cpu": h.cpu.result if h.cpu is not None else None,  # at the end of the run
                    "storage": h.storage,
                    "lost": h.lost,
                }
                for name, h in self.hosts.items()
            },
            "local": prints["local"],
            "differences": hostinfo.differences(prints),
        }
