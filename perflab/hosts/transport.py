"""SSH to a named host with asyncssh, driven from perflab's synchronous code.

One asyncio loop runs in a daemon thread for the whole process; every call here submits a coroutine
to it and waits for the answer, so the scheduler, observers and tests stay plain functions. Keys come
from the user's agent or ssh config (PERFLAB_SSH_CONFIG, else ~/.ssh/config); the host key is always
checked against the known_hosts files hostkeys.py resolves: an unknown or changed key is refused
(HostKeyError), never accepted, and so is a host whose key nothing would check.

    link = Connection.open("db", parse_target("root@db1"))
    link.run(["uname", "-r"])           # Completed(status=0, stdout="6.1.0-...\\n", stderr="")
    proc = link.start(["sysbench", ...]) ; for line in proc.lines(): ...
"""

from __future__ import annotations

import asyncio
import shlex
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from perflab.errors import HostLostError, HostUnreachableError
from perflab.hosts import hostkeys
from perflab.hosts.target import SshTarget, ssh_config

if TYPE_CHECKING:  # asyncssh (with cryptography: 0.3 s to import) is imported when a host is reached
    import asyncssh

CONNECT_TIMEOUT_S = 10.0
T = TypeVar("T")
_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="perflab-ssh", daemon=True).start()
        return _loop


_HALTED = threading.Event()  # set while an interrupted run stops its threads (a host axis's lanes)


def halt_others() -> None:
    """From now on every call from another thread than the main one fails at once (HostLostError): an
    interrupted run's lanes start nothing more on a host while the main thread cleans the hosts up."""
    _HALTED.set()


def resume_others() -> None:
    _HALTED.clear()


def call(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run `coro` on the SSH loop and return its result (its exception is raised here); TimeoutError
    (the coroutine cancelled) when it takes longer than `timeout`."""
    future = asyncio.run_coroutine_threadsafe(coro, _background_loop())
    try:
        return future.result(timeout)
    except TimeoutError:
        future.cancel()
        raise


async def _awaited(awaitable: Awaitable[T]) -> T:
    """A coroutine of any awaitable (asyncssh returns some that are not coroutines)."""
    return await awaitable


async def _on_loop(function: Callable[[], object]) -> None:
    """Call `function` on the SSH loop: asyncssh's channels are not thread-safe."""
    function()


@dataclass(frozen=True)
class Completed:
    status: int | None  # None: killed by a signal, or the connection was lost
    stdout: str
    stderr: str


def _unreachable(name: str, target: SshTarget, exc: BaseException) -> HostUnreachableError:
    return HostUnreachableError(
        f"host {name} ({target}) is unreachable: {exc}",
        f"check that `ssh {target}` works from this machine (address, port, key in the agent or the "
        "ssh config; PERFLAB_SSH_CONFIG names another config); `perflab docs hosts`",
    )


async def _connect(name: str, target: SshTarget) -> asyncssh.SSHClientConnection:
    import asyncssh

    config = ssh_config()
    try:
        known = hostkeys.known_hosts_for(name, target)  # HostKeyUncheckedError: nothing would check the key
    except (OSError, asyncssh.Error, ValueError) as exc:  # the ssh config itself cannot be read
        raise _unreachable(name, target, exc) from None
    try:
        return await asyncssh.connect(
            target.address,
            port=target.port or (),
            username=target.user,
            config=config if config else (),
            known_hosts=known,  # explicit: the config's `UserKnownHostsFile none` would make asyncssh check nothing
            connect_timeout=CONNECT_TIMEOUT_S,
            keepalive_interval=5,
            keepalive_count_max=3,
        )
    except asyncssh.HostKeyNotVerifiable as exc:
        raise hostkeys.refusal(name, target, known, exc) from None
    except (TimeoutError, OSError, asyncssh.Error) as exc:
        raise _unreachable(name, target, exc) from None


class RemoteProcess:
    """A process started over SSH: its output read line by line as it comes, its exit status."""

    def __init__(self, link: Connection, process: asyncssh.SSHClientProcess[str]) -> None:
        self._link, self._process = link, process

    def readline(self, timeout: float | None = None) -> str:
        """The next line of stdout ("" at its end)."""
        return self._link.call(self._process.stdout.readline(), timeout)

    def lines(self) -> Iterator[str]:
        while line := self.readline():
            yield line

    def write(self, text: str) -> None:
        self._link.call(_on_loop(lambda: self._process.stdin.write(text)), 30)

    def wait(self, timeout: float | None = None) -> Completed:
        done = self._link.call(
            self._process.wait(check=False, timeout=timeout), None if timeout is None else timeout + 5
        )
        return Completed(
            done.exit_status if done.exit_status is not None and done.exit_status >= 0 else None,
            str(done.stdout or ""),
            str(done.stderr or ""),
        )

    def close(self) -> None:
        self._link.call(_on_loop(self._process.close), 30)


class Connection:
    """One SSH connection to a named host."""

    def __init__(self, name: str, target: SshTarget, conn: asyncssh.SSHClientConnection) -> None:
        self.name, self.target, self._conn = name, target, conn

    @classmethod
    def open(cls, name: str, target: SshTarget) -> Connection:
        return cls(name, target, call(_connect(name, target), CONNECT_TIMEOUT_S + 30))

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro`; a lost connection becomes HostLostError naming the host; so does a call from
        another thread than the main one while the run stops (halt_others)."""
        if _HALTED.is_set() and threading.current_thread() is not threading.main_thread():
            coro.close()
            raise HostLostError(f"host {self.name}: the run is stopping", "nothing to do: it was interrupted")
        import asyncssh  # loaded by the connection already

        try:
            return call(coro, timeout)
        except TimeoutError:
            raise HostLostError(
                f"host {self.name} ({self.target}) did not answer within {timeout:g} s",
                "check the host and the network; `perflab doctor --clean` stops what was left there",
            ) from None
        except (asyncssh.Error, OSError, EOFError) as exc:
            raise HostLostError(
                f"host {self.name} ({self.target}) dropped off: {exc or type(exc).__name__}",
                "check the host and its sshd; `perflab doctor --clean` stops what was left there",
            ) from None

    def run(self, argv: list[str], timeout: float = 60, stdin: str | None = None) -> Completed:
        """Run argv (quoted for the remote shell) to its end."""
        done = self.call(self._conn.run(shlex.join(argv), check=False, timeout=timeout, input=stdin), timeout + 5)
        return Completed(
            done.exit_status if done.exit_status is not None and done.exit_status >= 0 else None,
            str(done.stdout or ""),
            str(done.stderr or ""),
        )

    def start(self, argv: list[str]) -> RemoteProcess:
        """Start argv; read its stdout with the RemoteProcess as it runs."""
        return RemoteProcess(self, self.call(_awaited(self._conn.create_process(shlex.join(argv))), 30))

    def local_address(self) -> str:
        """This machine's address on this connection: where the host reaches us (a server's bind address)."""
        return str(self._conn.get_extra_info("sockname")[0])

    def peer_address(self) -> str:
        """The host's address on this connection: where this machine reaches it (a remote server's bind address)."""
        return str(self._conn.get_extra_info("peername")[0])

    def put(self, local: Path, remote: str) -> None:
        """Copy one local file to `remote` over SFTP."""
        self.call(self._put(local, remote), 300)

    async def _put(self, local: Path, remote: str) -> None:
        async with self._conn.start_sftp_client() as sftp:
            await sftp.put(str(local), remote, preserve=True)

    def get(self, remote: str, local: Path) -> None:
        """Copy one file of the host to `local` over SFTP."""
        self.call(self._get(remote, local), 300)

    async def _get(self, remote: str, local: Path) -> None:
        async with self._conn.start_sftp_client() as sftp:
            await sftp.get(remote, str(local))

    def close(self) -> None:
        import asyncssh  # loaded by the connection already

        conn = self._conn
        conn.close()
        try:
            call(conn.wait_closed(), 10)
        except (asyncssh.Error, OSError, TimeoutError):
            pass  # closing a dead link: nothing more to do
