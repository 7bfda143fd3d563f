"""Copy a tree on this machine with reflinks where the filesystem shares extents (FICLONE: btrfs,
xfs with reflink=1, bcachefs), else byte for byte, and say which: a dataset snapshot's restore
(servers/dataset.py) and the storage checks (run/storage.py, bench/storage_restore.py).

    copy_tree(snapshot_dir, cell_datadir)   -> {"reflink"} | {"copy"} | both
    copy_tree(snapshot_dir, kept, sparse=True)  # whole MiBs of zeros left as holes (a kept snapshot)
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
from pathlib import Path
from typing import BinaryIO

FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)


CHUNK = 1 << 20
ZEROS = bytes(CHUNK)


def clone_file(source: str, dest: str, sparse: bool = False) -> str:
    """Copy one file as a reflink (FICLONE) where the filesystem shares extents, else byte for byte
    (`sparse`: a whole MiB of zeros left as a hole); returns "reflink" or "copy". Metadata (mode,
    times) as shutil.copy2."""
    with open(source, "rb") as src, open(dest, "wb") as dst:
        try:
            fcntl.ioctl(dst.fileno(), FICLONE, src.fileno())
            method = "reflink"
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL, errno.ENOTTY, errno.EBADF):
                raise
            if sparse:
                _sparse_copy(src, dst)
            else:
                shutil.copyfileobj(src, dst, CHUNK)
            method = "copy"
    shutil.copystat(source, dest)
    return method


def _sparse_copy(src: BinaryIO, dst: BinaryIO) -> None:
    """InnoDB's redo log is fallocated (256 MiB by default) and mostly zeros: kept sparse, a
    snapshot's copy on disk writes its records only (a 1,000-row dataset: 274 MB written before)."""
    while chunk := src.read(CHUNK):
        if chunk == ZEROS:
            dst.seek(CHUNK, os.SEEK_CUR)
        else:
            dst.write(chunk)
    dst.truncate()  # a hole at the end: the file's full length


def copy_tree(source: Path, dest: Path, sparse: bool = False) -> set[str]:
    """copytree with reflinks where the filesystem has them (clone_file; `sparse`: whole MiBs of
    zeros as holes), with a full disk reported as one OSError(ENOSPC) instead of shutil.Error's
    list of every file that failed; returns how the files were copied ({"reflink"}, {"copy"} or both)."""
    methods: set[str] = set()

    def clone(src: str, dst: str) -> str:
        methods.add(clone_file(src, dst, sparse))
        return dst

    try:
        shutil.copytree(source, dest, symlinks=True, copy_function=clone)
        return methods
    except shutil.Error as exc:
        if any(f"[Errno {errno.ENOSPC}]" in str(why) for _, _, why in exc.args[0]):
            raise OSError(errno.ENOSPC, f"no space left on device while copying the dataset to {dest}") from None
        raise
