"""Lock files another account cannot turn against perflab: the machine lock (run/lock.py), a
results directory's writer lock (store/writer_lock.py) and a work directory's liveness lock
(run/workdir.py) are all opened here.

perflab runs as root on machines other accounts share. A lock file opened by name in a directory
someone else can write is a way in: a symlink planted at its name makes perflab truncate any file,
and a file someone else owns (or can read) lets them hold its flock and stop every run. So a lock
file is opened only inside a directory checked to be ours and writable by nobody else, without
following a symlink (O_NOFOLLOW), never inherited by a child (O_CLOEXEC), and is trusted (read,
truncated, written) only once fstat says it is a regular file of ours with one link.

    fd = open_owned(private_dir(Path("/run/perflab")), "perflab.lock")
    if try_lock(fd): write_holder(fd, {"pid": os.getpid()})
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perflab.errors import UnsafePathError

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC


def private_dir(path: Path, create: bool = True) -> int:
    """An fd of the directory `path`, made 0700 when missing (with `create`), after checking that it
    is a directory of ours (not a symlink) that no other account can write in."""
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    try:
        fd = os.open(path, DIR_FLAGS)
    except OSError:
        if os.path.islink(path):
            raise UnsafePathError(f"{path} is a symbolic link", f"remove it: perflab makes {path} itself") from None
        raise
    problem = unsafe_dir(os.fstat(fd))
    if problem:
        os.close(fd)
        raise UnsafePathError(f"{path} {problem}", f"remove it (perflab makes {path} itself, 0700), or fix its owner")
    return fd


def unsafe_dir(st: os.stat_result) -> str | None:
    """Why a directory with this stat is not trusted (None: it is ours and nobody else writes in it)."""
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by this perflab's (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"is writable by other accounts (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def open_owned(dir_fd: int, name: str, create: bool = True, where: str = "") -> int:
    """An fd (read-write) of the lock file `name` in the checked directory `dir_fd`: made 0600 when
    missing (with `create`); refused unless it is a regular file of ours with one link.
    FileNotFoundError when it is missing and not to be made."""
    try:
        fd = os.open(name, FILE_FLAGS | (os.O_CREAT if create else 0), 0o600, dir_fd=dir_fd)
    except OSError:
        # ELOOP, or EACCES where fs.protected_symlinks stops root at another account's link
        if _is_link(dir_fd, name):
            raise UnsafePathError(f"{where or name}: a symbolic link where a lock file belongs", "remove it") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
        os.close(fd)
        raise UnsafePathError(
            f"{where or name}: not a lock file of this perflab's (uid {st.st_uid}, {st.st_nlink} link(s))",
            "remove it; perflab makes its lock files itself",
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.fchmod(fd, 0o600)  # another account that can open it could hold its flock
    return fd


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def take(dir_fd: int, name: str, where: str, holder: dict[str, Any], refused: Callable[[dict], Exception]) -> int:
    """The lock file `name` in the checked directory `dir_fd` (closed here), locked and saying who holds
    it (`holder`); when another holds it, `refused(its holder)` is raised. Its fd: the lock lives while
    it is open."""
    try:
        fd = open_owned(dir_fd, name, where=where)
    finally:
        os.close(dir_fd)
    if not try_lock(fd):
        other = read_holder(fd)
        os.close(fd)
        raise refused(other)
    write_holder(fd, holder)
    return fd


def try_lock(fd: int) -> bool:
    """Take the exclusive flock of `fd` without waiting; False when someone else holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def write_holder(fd: int, holder: dict[str, Any]) -> None:
    """Say who holds the lock (read by whoever is refused): the file's whole content."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(holder).encode(), 0)


def read_holder(fd: int) -> dict[str, Any]:
    try:
        found = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
