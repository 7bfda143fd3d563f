"""A command's start imports no SSH library: asyncssh (with cryptography) is imported when a host is
reached (hosts/transport.py, hosts/hostkeys.py), not by every `perflab` command (bench/cli_start.py)."""

from __future__ import annotations

import subprocess
import sys


def test_the_cli_imports_no_ssh_library_until_a_host_is_reached() -> None:
    code = (
        "import sys, perflab.cli, perflab.hosts.transport, perflab.hosts.hostkeys\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('asyncssh', 'cryptography')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
    # and it is there once asked for: the config class that reads StrictHostKeyChecking
    code = "import sys\nfrom perflab.hosts import hostkeys\nhostkeys._config_class()\nprint('asyncssh' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True", done.stdout
