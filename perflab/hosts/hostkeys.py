"""Which known_hosts files check a host's key, resolved before perflab connects (issue 48).

asyncssh checks nothing when the ssh config says `UserKnownHostsFile none` (its known_hosts=None),
ignores `GlobalKnownHostsFile` when the user's file is not named, and has no StrictHostKeyChecking
of its own. perflab runs as root on its hosts, hands them passwords and runs what they answer: so it
resolves the files itself, as OpenSSH does, and passes them to asyncssh explicitly. A host is refused
(HostKeyUncheckedError, exit 3) when nothing would check its key: no readable known_hosts file with an
entry, or the config's `StrictHostKeyChecking no` (or `off`), which asks for no check at all.

    files = known_hosts_for("db", parse_target("root@db1"))   # ["/root/.ssh/known_hosts"]
    refusal("db", target, files)    # HostKeyError: the key unknown there, or another key (after a failed connect)
"""

from __future__ import annotations

import functools
import getpass
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab.errors import HostKeyError
from perflab.hosts.target import SshTarget, ssh_config

if TYPE_CHECKING:
    from asyncssh.config import SSHClientConfig

USER_DEFAULT = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")  # OpenSSH's, when the config names none
GLOBAL_DEFAULT = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
UNCHECKED = {"no", "off"}  # StrictHostKeyChecking values that accept any key ("accept-new" only new ones:
# perflab never accepts a new key either way, so it checks as with "yes")


class HostKeyUncheckedError(HostKeyError):
    """Nothing would check a host's key (no known_hosts entry, or StrictHostKeyChecking no): refused."""


@functools.cache
def _config_class() -> type[SSHClientConfig]:
    """asyncssh's client config, reading StrictHostKeyChecking too (asyncssh skips it); asyncssh
    imported when a host is reached (0.3 s with cryptography: not on every command's start)."""
    from asyncssh.config import SSHClientConfig, SSHConfig

    class _Config(SSHClientConfig):
        _handlers = {
            **SSHClientConfig._handlers,
            "stricthostkeychecking": ("StrictHostKeyChecking", SSHConfig._set_string),
        }

    return _Config


def _config_paths() -> list[Path]:
    """The files asyncssh reads: PERFLAB_SSH_CONFIG's, else ~/.ssh/config when readable."""
    given = ssh_config()
    if given is not None:
        return given
    default = Path("~/.ssh/config").expanduser()
    return [default] if os.access(default, os.R_OK) else []


def host_config(target: SshTarget) -> SSHClientConfig:
    """The ssh config as it applies to `target` (its Host and Match blocks)."""
    return _config_class().load(  # type: ignore[return-value]  # typed as its base class
        None, _config_paths(), False, False, False, getpass.getuser(), target.user, target.address,
        target.port if target.port else (),
    )  # fmt: skip


def _entries(path: str) -> bool:
    """A readable file with at least one known_hosts line."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines())


def _named(config: SSHClientConfig, option: str, default: tuple[str, ...]) -> list[str]:
    named: Any = config.get(option, None)  # a list of paths, "none" as [], or None
    return list(default) if named is None else [str(f) for f in named]  # [] for "none"


def _unchecked(
    name: str, target: SshTarget, why: str, first: str = "", into: str = USER_DEFAULT[0]
) -> HostKeyUncheckedError:
    """The refusal of a host whose key nothing would check; `first`: what to change in the ssh config
    before adding the key, `into`: the known_hosts file to add it to."""
    port = f"-p {target.port} " if target.port else ""
    return HostKeyUncheckedError(
        f"host {name} ({target}): refused: nothing would check its host key ({why}); perflab runs as root "
        "there and sends it commands and passwords, so a machine answering in its place must be told apart",
        f"{first}compare the host's key fingerprint with the one the host shows (`ssh-keygen -lf "
        f"/etc/ssh/ssh_host_ed25519_key.pub` on its console), then add it: `ssh-keyscan -H {port}{target.address} "
        f">> {into}` and check `ssh-keygen -lf {into}` against it; `perflab docs hosts#trust`",
    )


def known_hosts_for(name: str, target: SshTarget) -> list[str]:
    """The known_hosts files that check `target`'s key: the config's UserKnownHostsFile (default
    ~/.ssh/known_hosts, known_hosts2) and GlobalKnownHostsFile (default /etc/ssh/ssh_known_hosts,
    ssh_known_hosts2), those readable with an entry; HostKeyUncheckedError when none is, or when the
    config says StrictHostKeyChecking no."""
    config = host_config(target)
    strict = str(config.get("StrictHostKeyChecking", "") or "").lower()
    if strict in UNCHECKED:
        why = f"the ssh config says `StrictHostKeyChecking {strict}` for it, which accepts any key"
        raise _unchecked(name, target, why, f"remove `StrictHostKeyChecking {strict}` from its ssh config; ")
    user = _named(config, "UserKnownHostsFile", USER_DEFAULT)
    every = user + _named(config, "GlobalKnownHostsFile", GLOBAL_DEFAULT)
    files = [str(Path(f).expanduser()) for f in every if _entries(f)]
    if files:
        return files
    if user:
        raise _unchecked(name, target, f"{', '.join(every)}: missing, unreadable or empty", into=user[0])
    fix = "remove `UserKnownHostsFile none` from its ssh config (or name a file there); "
    if every:
        why = f"the ssh config says UserKnownHostsFile none, and {', '.join(every)} have no entry"
    else:
        why = "the ssh config says UserKnownHostsFile none and GlobalKnownHostsFile none"
    raise _unchecked(name, target, why, fix)


def refusal(name: str, target: SshTarget, files: list[str], exc: BaseException) -> HostKeyError:
    """Why asyncssh did not accept the host's key: its name has no entry in `files`, or another key."""
    from asyncssh.known_hosts import match_known_hosts

    config = host_config(target)
    host = str(config.get("HostKeyAlias", None) or config.get("Hostname", None) or target.address)
    known = match_known_hosts(files, host, "", target.port)
    if not any(known[:2]):
        return HostKeyError(
            f"host {name} ({target}): its host key is not in {', '.join(files)}: refused, never accepted as new",
            _unchecked(name, target, "", into=files[0]).hint,
        )
    return HostKeyError(
        f"host {name} ({target}): its host key is not the one known_hosts has for it ({exc}): refused (a changed "
        "key may be a machine answering in its place)",
        f"verify the host's key out of band, then record it: `ssh-keygen -R {target.address}` and `ssh {target}` "
        "once; perflab never accepts a new or changed key by itself (`perflab docs hosts`)",
    )
