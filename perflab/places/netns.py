"""A network of a server's own, for a client that connects by TCP from this machine (issue 48).

go-tpc reaches its server by TCP only, and takes its password only on its command line, which
every account reads in /proc/PID/cmdline. So the server does not listen on this machine's
loopback at all: it starts in a network namespace of its own whose loopback is up (`own`), and
its clients join that namespace (`join`, through the server's pid). No other account can enter
it (setns needs CAP_SYS_ADMIN), so nothing but perflab's own processes can reach the port.

This file is also the program that does it: run by the interpreter itself in isolated mode
(`-I -S`: no site, no environment, no perflab import), it unshares or joins the namespace and
execs the command in place (same pid: a Child's pid and its death signal stay the server's).

    argv = netns.own(["mariadbd", ...])            # the server, on 127.0.0.1 of its own network
    client = netns.join(server.pid, ["go-tpc", ...])
"""

from __future__ import annotations

import sys

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


def own(argv: list[str]) -> list[str]:
    """argv run in a new network namespace whose loopback (127.0.0.1) is up."""
    return [sys.executable, "-I", "-S", __file__, "own", "--", *argv]


def join(pid: int, argv: list[str]) -> list[str]:
    """argv run in the network namespace of process `pid` (a server started by `own`)."""
    return [sys.executable, "-I", "-S", __file__, "join", str(pid), "--", *argv]


def _loopback_up() -> None:
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def main(args: list[str]) -> int:
    import ctypes
    import os

    if len(args) < 3 or args[0] not in ("own", "join") or "--" not in args:
        print("usage: netns.py own -- ARGV... | join PID -- ARGV...", file=sys.stderr)
        return 2
    command = args[args.index("--") + 1 :]
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        if args[0] == "own":
            if libc.unshare(CLONE_NEWNET) != 0:
                errno = ctypes.get_errno()
                raise OSError(errno, f"unshare(CLONE_NEWNET): {os.strerror(errno)}")
            _loopback_up()
        else:
            fd = os.open(f"/proc/{int(args[1])}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            if libc.setns(fd, CLONE_NEWNET) != 0:
                errno = ctypes.get_errno()
                raise OSError(errno, f"setns into process {args[1]}'s network: {os.strerror(errno)}")
            os.close(fd)
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"perflab netns: {exc.strerror or exc} ({exc.filename or args[0]})", file=sys.stderr)
        return 126
    return 0  # not reached: execvp does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
