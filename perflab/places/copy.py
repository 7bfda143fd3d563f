"""Copy a tree on this machine with reflinks where the filesystem shares extents (FICLONE: btrfs,
xfs with reflink=1, bcachefs), else byte for byte, and say which: a dataset snapshot's restore
(servers/dataset.py) and the storage checks (run/storage.py, bench/storage_restore.py).

    copy_tree(snapshot_dir, cell_datadir)   -> {"reflink"} | {"copy"} | both
"""

from __future__ import annotations

import errno
import fcntl
import shutil
from pathlib import Path

FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)


def clone_file(source: str, dest: str) -> str:
    """Copy one file as a reflink (FICLONE) where the filesystem shares extents, else byte for byte;
    returns "reflink" or "copy". Metadata (mode, times) as shutil.copy2."""
    with open(source, "rb") as src, open(dest, "wb") as dst:
        try:
            fcntl.ioctl(dst.fileno(), FICLONE, src.fileno())
            method = "reflink"
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL, errno.ENOTTY, errno.EBADF):
                raise
            shutil.copyfileobj(src, dst, 1 << 20)
            method = "copy"
    shutil.copystat(source, dest)
    return method


def copy_tree(source: Path, dest: Path) -> set[str]:
    """copytree with reflinks where the filesystem has them (clone_file), with a
    full disk reported as one OSError(ENOSPC) instead of shutil.Error's list of every file that
    failed; returns how the files were copied ({"reflink"}, {"copy"} or both)."""
    methods: set[str] = set()

    def clone(src: str, dst: str) -> str:
        methods.add(clone_file(src, dst))
        return dst

    try:
        shutil.copytree(source, dest, symlinks=True, copy_function=clone)
        return methods
    except shutil.Error as exc:
        if any(f"[Errno {errno.ENOSPC}]" in str(why) for _, _, why in exc.args[0]):
            raise OSError(errno.ENOSPC, f"no space left on device while copying the dataset to {dest}") from None
        raise
