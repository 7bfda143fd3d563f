"""Real SSH hosts on this machine: network namespaces joined by veth pairs, each running Debian's
sshd (openssh-server) with its own host key and config, for the tests of perflab's remote hosts.

Host i gets the namespace `plt-PID-i`, the link 10.77.K.0/30 (this side .1, the host .2) and an sshd
started as a child of the test, by absolute path, in the foreground (-D), with its own config (-f):
the system's ssh service is never started, stopped or read. The test's client key, known_hosts and
ssh config (one `Host NAME` block per host) live in a temporary directory; perflab reads that config
through PERFLAB_SSH_CONFIG (docs/hosts.md). Traffic goes only to the namespaces' addresses. On the
way out every process left in each namespace is killed and the namespaces and links are removed.

    with ssh_hosts(tmp_path, ["db", "load"]) as lab:
        lab.hosts["db"].ssh      # "root@10.77.K.2"
        lab.config               # Path of the ssh config naming "db" and "load"
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import IN_PROCESS, perflab

SSHD = "/usr/sbin/sshd"
ROOT = Path(__file__).resolve().parents[2]
PRIVSEP = Path("/run/sshd")  # sshd's privilege separation directory, which it requires to exist
# labs side by side (make test's workers): every lab holds LAB_LOCK shared while it lives, the last to
# leave removes sshd's privilege-separation directory if a lab made it; SETUP_LOCK, exclusive, while a
# lab picks its free subnets and makes its namespaces (two labs would otherwise pick the same one)
LAB_LOCK = Path(tempfile.gettempdir()) / "perflab-test-sshlab.lock"
SETUP_LOCK = Path(tempfile.gettempdir()) / "perflab-test-sshlab-setup.lock"


@dataclass
class SshHost:
    name: str
    namespace: str
    link: str  # this side's veth
    address: str  # the host's address inside its namespace
    sshd: subprocess.Popen[bytes]
    log: Path

    @property
    def ssh(self) -> str:
        return f"root@{self.address}"

    def pids(self) -> list[int]:
        """Every process running inside this host's namespace (sshd, its sessions, what they started)."""
        done = subprocess.run(["ip", "netns", "pids", self.namespace], capture_output=True, text=True, check=False)
        return [int(p) for p in done.stdout.split()]

    def drop(self) -> None:
        """The host drops off: its sshd and every session it serves are killed."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                if _comm(pid) == "sshd":
                    os.kill(pid, signal.SIGKILL)
        self.sshd.wait(timeout=10)


@dataclass
class SshLab:
    dir: Path
    config: Path  # the ssh config perflab is pointed at (PERFLAB_SSH_CONFIG)
    known_hosts: Path
    key: Path  # the client's private key
    hosts: dict[str, SshHost] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """The environment of a perflab run that reaches these hosts."""
        return {**os.environ, "PERFLAB_SSH_CONFIG": str(self.config)}


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def _free_subnets(count: int) -> list[int]:
    """Third octets K with no 10.77.K.* address on this machine yet."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    free = [k for k in range(1, 255) if f"10.77.{k}." not in used]
    return random.sample(free, count)


def _keygen(path: Path) -> str:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "perflab-test", "-f", str(path))
    return path.with_suffix(".pub").read_text(encoding="ascii").strip()


def _sshd_config(home: Path, address: str, authorized: Path) -> Path:
    config = home / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"ListenAddress {address}:22",
                f"HostKey {home / 'host_key'}",
                f"AuthorizedKeysFile {authorized}",
                f"PidFile {home / 'sshd.pid'}",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",  # the keys live in a pytest temporary directory
                "MaxSessions 100",
                "MaxStartups 100",
                "Subsystem sftp internal-sftp",
                # bash sources ~/.bashrc for a command sshd runs only in a top-level shell (SHLVL
                # below 2): with SHLVL=1 set, these hosts' sessions skip this machine's root rc
                # files, whose `pyenv init` rehashes under a lock that a session killed by a test
                # (a host dropping off) can leave behind: every later login then waited 60 s
                "SetEnv SHLVL=1",
                "",
            ]
        ),
        encoding="ascii",
    )
    return config


def _wait_listening(address: str, sshd: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        if sshd.poll() is not None:
            raise RuntimeError(f"sshd exited {sshd.returncode}: {log.read_text(errors='replace')[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection((address, 22), timeout=1):
            return
        time.sleep(0.05)
    raise RuntimeError(f"sshd on {address} not listening: {log.read_text(errors='replace')[-2000:]}")


def _start_host(lab: SshLab, name: str, index: int, k: int, authorized: Path) -> SshHost:
    namespace, link = f"plt-{os.getpid()}-{index}", f"plt{os.getpid() % 100000}h{index}"
    local, address = f"10.77.{k}.1", f"10.77.{k}.2"
    try:
        return _link_and_sshd(lab, name, (namespace, link, local, address), authorized)
    except BaseException:
        subprocess.run(["ip", "link", "del", link], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
        raise


def _link_and_sshd(lab: SshLab, name: str, where: tuple[str, str, str, str], authorized: Path) -> SshHost:
    namespace, link, local, address = where
    _run("ip", "netns", "add", namespace)
    _run("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", namespace)
    _run("ip", "addr", "add", f"{local}/30", "dev", link)
    _run("ip", "link", "set", link, "up")
    for argv in (
        ["addr", "add", f"{address}/30", "dev", "eth0"],
        ["link", "set", "eth0", "up"],
        ["link", "set", "lo", "up"],
    ):
        _run("ip", "-n", namespace, *argv)
    home = lab.dir / name
    home.mkdir()
    host_pub = _keygen(home / "host_key")
    with lab.known_hosts.open("a", encoding="ascii") as f:
        f.write(f"{address} {' '.join(host_pub.split()[:2])}\n")
    config, log = _sshd_config(home, address, authorized), home / "sshd.log"
    with log.open("wb") as err:
        sshd = subprocess.Popen(
            ["ip", "netns", "exec", namespace, SSHD, "-D", "-e", "-f", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    host = SshHost(name, namespace, link, address, sshd, log)
    lab.hosts[name] = host
    _wait_listening(address, sshd, log, time.monotonic() + 30)
    return host


def _client_config(lab: SshLab) -> None:
    blocks = [
        f"Host {name} {h.address}\n  HostName {h.address}\n  User root\n  IdentityFile {lab.key}\n"
        f"  IdentitiesOnly yes\n  UserKnownHostsFile {lab.known_hosts}\n  StrictHostKeyChecking yes\n"
        for name, h in lab.hosts.items()
    ]
    lab.config.write_text("\n".join(blocks), encoding="ascii")


def _remove(host: SshHost) -> None:
    for pid in host.pids():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        host.sshd.wait(timeout=10)
    subprocess.run(["ip", "link", "del", host.link], capture_output=True, check=False)
    subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True, check=False)


@contextlib.contextmanager
def ssh_hosts(tmp: Path, names: list[str]) -> Iterator[SshLab]:
    """Start one namespace with its sshd per name; everything is removed on the way out. Labs of
    other tests may live beside it (make test runs modules in parallel): see LAB_LOCK."""
    lab = SshLab(tmp / "ssh", tmp / "ssh" / "config", tmp / "ssh" / "known_hosts", tmp / "ssh" / "id_ed25519")
    lab.dir.mkdir(parents=True)
    with open(LAB_LOCK, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)  # released when the file closes, after the removal
        try:
            yield from _lab(lab, names)
        finally:
            _last_out(lock)


def _last_out(lock: Any) -> None:
    """The last lab to leave removes the privilege-separation directory, if a lab made it."""
    marker = LAB_LOCK.with_suffix(".privsep")  # a lab made PRIVSEP: it was not the machine's
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return  # another lab still lives
    if marker.exists():
        with contextlib.suppress(OSError):
            PRIVSEP.rmdir()
        marker.unlink(missing_ok=True)


def _lab(lab: SshLab, names: list[str]) -> Iterator[SshLab]:
    try:
        with open(SETUP_LOCK, "a+b") as setup:
            fcntl.flock(setup, fcntl.LOCK_EX)
            if not PRIVSEP.exists():
                PRIVSEP.mkdir(mode=0o755)
                LAB_LOCK.with_suffix(".privsep").touch()
            authorized = lab.dir / "authorized_keys"
            authorized.write_text(_keygen(lab.key) + "\n", encoding="ascii")
            for index, (name, k) in enumerate(zip(names, _free_subnets(len(names)), strict=True)):
                _start_host(lab, name, index, k, authorized)
        _client_config(lab)
        yield lab
    finally:
        for host in lab.hosts.values():
            _remove(host)


def wire(lab: SshLab, a: str, b: str) -> None:
    """A network of their own between hosts `a` and `b` (a veth pair from one namespace to the other, a
    /30 in 10.78.K), with a route from each to the other's address: a client host reaches its server
    host's address directly, as on a lab's own switch (the namespaces are not routed to each other
    otherwise). Removed with the namespaces."""
    one, other = lab.hosts[a], lab.hosts[b]
    with open(SETUP_LOCK, "a+b") as setup:
        fcntl.flock(setup, fcntl.LOCK_EX)
        used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
        used += "".join(
            subprocess.run(
                ["ip", "-n", h.namespace, "-4", "-o", "addr"], capture_output=True, text=True, check=False
            ).stdout
            for h in lab.hosts.values()
        )
        k = random.choice([k for k in range(1, 255) if f"10.78.{k}." not in used])
        ends = ((one, f"to-{b}"[:15], f"10.78.{k}.1", other), (other, f"to-{a}"[:15], f"10.78.{k}.2", one))
        _run("ip", "link", "add", ends[0][1], "netns", one.namespace, "type", "veth",
             "peer", "name", ends[1][1], "netns", other.namespace)  # fmt: skip
        for host, dev, address, peer in ends:
            _run("ip", "-n", host.namespace, "addr", "add", f"{address}/30", "dev", dev)
            _run("ip", "-n", host.namespace, "link", "set", dev, "up")
            _run("ip", "-n", host.namespace, "route", "add", f"{peer.address}/32", "dev", dev, "src", address)


def perflab_via(lab: SshLab, tmpfs: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`perflab ARGS` with this lab's ssh config, its runs under `tmpfs`. A verb that reads a results
    directory (tests/conftest.IN_PROCESS) reaches no host: it runs in this process, as elsewhere (a
    subprocess's start is ~1 CPU-s, most of a remote test's own CPU after its run)."""
    if args and args[0] in IN_PROCESS:
        return perflab(*args)
    env = {**lab.env(), "PERFLAB_TMPFS": str(tmpfs)}
    return subprocess.run([sys.executable, "-m", "perflab", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300, check=False)  # fmt: skip


def namespace_commands(lab: SshLab, name: str) -> list[str]:
    """The command names of the processes in host `name`'s namespace (one that just exited is left out)."""
    names = []
    for pid in lab.hosts[name].pids():
        with contextlib.suppress(OSError):
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
    return names


SYSBENCH_OWN = ("sysbench", "libmariadb.so.3", "libluajit-5.1.so.2")  # sysbench's own code, not the kernel's


def check_client_profile(lab: SshLab, tmp_path: Path, out: Path, source: str) -> None:
    """`perflab profile --target client` of `source` names sysbench's own frames, and none of the server's."""
    import json

    shown = perflab_via(
        lab, tmp_path, "profile", str(out), "--source", source, "--target", "client", "--format", "json", "--top", "0"
    )
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)
    assert any(r["dso"] in SYSBENCH_OWN and r["function"] != "[unknown]" for r in rows), (source, rows[:10])
    assert not any(r["dso"] == "mariadbd" for r in rows), (source, rows[:10])  # the client's stacks alone


# two PostgreSQL variants for an interleaved group's two seats (the tests' [variants.log] replaced)
SB_VARIANTS = (
    "[variants.sb]\n"
    '"64MB" = { server_options = { shared_buffers = "64MB" } }\n'
    '"128MB" = { server_options = { shared_buffers = "128MB" } }\n'
)


def run_pg_seats(lab: SshLab, shm: Path, tmp_path: Path, body: str) -> tuple[Path, dict[str, dict]]:
    """`body` (its [variants.log] made SB_VARIANTS) run interleaved on `lab`: (the results, the two
    cells by shared_buffers), both ok, each in its own turn of the one group."""
    import json

    from tests.integration.helpers import used, write_experiment

    body = body.replace("[variants.log]\nOFF = {}\n", SB_VARIANTS)
    spec, out = write_experiment(tmp_path / "pg-seats.toml", body), tmp_path / "results"
    shm.parent.chmod(0o755)  # the postgres account reaches its directories
    done = perflab_via(lab, shm, "run", str(spec), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = json.loads(perflab_via(lab, tmp_path, "export", str(out), "--format", "json").stdout)
    cells = {c["variant"]["sb"]: c for c in used(exported["cells"])}
    assert set(cells) == {"64MB", "128MB"} and all(c["status"] == "ok" for c in cells.values()), cells
    assert exported["experiment"]["design"] == "interleaved" and {c["design"]["turn"] for c in cells.values()} == {0, 1}
    return out, cells


def check_pgbench_seat(out: Path, cell: dict) -> None:
    """A pgbench seat's turns counted from its log: each second of its own turns, everything pgbench
    processed counted over them (connecting and its tail aside: a log read on the wrong clock would
    count none, or all of it in one second), and its password in no file."""
    import json
    import re

    assert cell["design"]["counts"] == {"source": "client log", "queries_per_event": 1.0, "failed": 0}
    summary = cell["summary"]
    assert summary["transactions"] > 50 and summary["queries"] == summary["transactions"], summary
    assert 1.9 <= summary["total_time_s"] <= 3, summary  # its own running seconds, not the group's
    series = [iv for iv in cell["intervals"] if not iv["warmup"]]
    assert len(series) == 2 and all(iv["tps"] > 0 for iv in series), series
    text = (out / "logs" / f"cell-{cell['id']:04d}" / "pgbench.txt").read_text()
    processed = int(re.search(r"number of transactions actually processed: (\d+)", text)[1])  # type: ignore[index]
    counted = sum(iv["tps"] for iv in cell["intervals"]) * cell["design"]["active_s"] / len(cell["intervals"])
    assert 0.9 <= counted / processed <= 1.005, (counted, processed, text[-400:])
    # its latency: pgbench's own (under the tests' paced -R, from its schedule); what spanned a pause is left out
    assert summary["latency_ms"]["p95"] > 0 and 0 <= cell["design"]["latency_spanned"] < 1, cell["design"]
    assert not re.search(r"\b[0-9a-f]{32}\b", text + json.dumps(cell)), "the password was recorded"
