"""Who may reach perflab's servers (issue 48), the parts checked without a server: PostgreSQL's
pg_hba.conf and pg_ident.conf (peer on the socket, mapped accounts only; scram over TCP), and the
network namespace a TCP client's server runs in (places/netns.py), with real processes."""

from __future__ import annotations

import os
import subprocess
import time

from perflab.places import netns
from perflab.servers.postgresql.server import SUPERUSER, auth_files


def test_the_socket_takes_mapped_accounts_by_peer_only():
    files = auth_files(False, ["root", "postgres", "root"])
    hba = [ln for ln in files["pg_hba.conf"].splitlines() if not ln.startswith("#")]
    assert hba == ["local all all peer map=perflab"]  # no trust, no TCP line without a client host
    ident = [ln.split() for ln in files["pg_ident.conf"].splitlines() if not ln.startswith("#")]
    assert ident == [["perflab", "root", SUPERUSER], ["perflab", "postgres", SUPERUSER]]


def test_a_client_host_gets_the_run_role_by_password_over_tcp_only():
    hba = auth_files(True, ["ubuntu"])["pg_hba.conf"].splitlines()
    assert "host all perflab all scram-sha-256" in hba
    assert not any("trust" in ln for ln in hba if not ln.startswith("#"))


def test_a_command_of_its_own_network_sees_only_its_loopback():
    shown = subprocess.run(netns.own(["cat", "/proc/net/dev"]), capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0, shown.stderr
    devices = [ln.split(":")[0].strip() for ln in shown.stdout.splitlines()[2:]]
    assert devices == ["lo"]
    up = subprocess.run(netns.own(["cat", "/sys/class/net/lo/operstate", "/sys/class/net/lo/flags"]),
                        capture_output=True, text=True, timeout=30)  # fmt: skip
    assert int(up.stdout.split()[1], 16) & 0x1, up.stdout  # IFF_UP: 127.0.0.1 is there to listen on


def test_a_client_joins_the_servers_network_and_execs_in_place():
    server = subprocess.Popen(netns.own(["sleep", "30"]))
    try:
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{server.pid}/exe").endswith(("python3", "python3.11", "python3.12")):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert os.readlink(f"/proc/{server.pid}/exe").endswith("sleep")  # the same pid: exec'd in place
        theirs = os.readlink(f"/proc/{server.pid}/ns/net")
        assert theirs != os.readlink("/proc/self/ns/net")
        joined = subprocess.run(netns.join(server.pid, ["readlink", "/proc/self/ns/net"]),
                                capture_output=True, text=True, timeout=30)  # fmt: skip
        assert joined.stdout.strip() == theirs
    finally:
        server.kill()
        server.wait()


def test_joining_a_process_that_is_gone_fails_with_its_reason():
    gone = subprocess.run(netns.join(2**22 + 1, ["true"]), capture_output=True, text=True, timeout=30)
    assert gone.returncode == 126 and "perflab netns" in gone.stderr and "/ns/net" in gone.stderr
