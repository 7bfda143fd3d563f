"""Copy a tree on this machine with reflinks where the filesystem shares extents (FICLONE: btrfs,
xfs with reflink=1, bcachefs), else byte for byte, and say which: a dataset snapshot's restore
(servers/dataset.py) and the storage checks (run/storage.py, bench/storage_restore.py).

    copy_tree(snapshot_dir, cell_datadir)   -> {"reflink"} | {"copy"} | both
    copy_tree(snapshot_dir, kept, sparse=True)  # whole MiBs of zeros left as holes (a kept snapshot)
    copy_tree(snapshot_dir, cell_datadir, in_memory=True)  # tmpfs: the data copied, the rest allocated
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


def clone_file(source: str, dest: str, sparse: bool = False, in_memory: bool = False) -> str:
    """Copy one file as a reflink (FICLONE) where the filesystem shares extents, else byte for byte
    (`sparse`: a whole MiB of zeros left as a hole; `in_memory`: see _data_copy); returns "reflink"
    or "copy". Metadata (mode, times) as shutil.copy2."""
    with open(source, "rb") as src, open(dest, "wb") as dst:
        try:
            fcntl.ioctl(dst.fileno(), FICLONE, src.fileno())
            method = "reflink"
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL, errno.ENOTTY, errno.EBADF):
                raise
            if sparse:
                _sparse_copy(src, dst)
            elif in_memory:
                _data_copy(src.fileno(), dst.fileno())
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


def _data_copy(src: int, dst: int) -> None:
    """The source's data ranges (SEEK_DATA) copied in the kernel, then the whole length allocated
    (fallocate), as the server had made it. On tmpfs a fallocated page that was never written reads
    as a hole: InnoDB's redo log (256 MiB by default, fallocated) is mostly such pages, and filling
    them with zeros was most of a cell's restore (0.14 -> 0.04 CPU-s with the 256 MiB redo log, a
    third of the time: bench/storage_restore.py, 2026-12-01).
    Only where the storage is memory: on a disk, allocated but unwritten extents would make the
    server's first write to each change the file's extent map (ext4, xfs), which a byte copy's
    written zeros do not."""
    size = os.fstat(src).st_size
    at = copied = 0
    while at < size:
        try:
            at = os.lseek(src, at, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no data after `at`
                raise
            break
        end = os.lseek(src, at, os.SEEK_HOLE)
        os.lseek(dst, at, os.SEEK_SET)
        copied += end - at
        while at < end:  # sendfile: in the kernel, between any two filesystems (copy_file_range: one)
            sent = os.sendfile(dst, src, at, end - at)
            if not sent:
                raise OSError(errno.EIO, f"the source ended at byte {at}, before {end}: it changed while copied")
            at += sent
    os.ftruncate(dst, size)
    if copied < size:  # some holes (ramfs has none: it cannot fallocate, and glibc would write each page)
        os.posix_fallocate(dst, 0, size)


def copy_tree(source: Path, dest: Path, sparse: bool = False, in_memory: bool = False) -> set[str]:
    """copytree with reflinks where the filesystem has them (clone_file; `sparse`: whole MiBs of
    zeros as holes; `in_memory`: a tmpfs's data only, the rest allocated), with a full disk reported
    as one OSError(ENOSPC) instead of shutil.Error's list of every file that failed; returns how the
    files were copied ({"reflink"}, {"copy"} or both)."""
    methods: set[str] = set()

    def clone(src: str, dst: str) -> str:
        methods.add(clone_file(src, dst, sparse, in_memory))
        return dst

    try:
        shutil.copytree(source, dest, symlinks=True, copy_function=clone)
        return methods
    except shutil.Error as exc:
        if any(f"[Errno {errno.ENOSPC}]" in str(why) for _, _, why in exc.args[0]):
            raise OSError(errno.ENOSPC, f"no space left on device while copying the dataset to {dest}") from None
        raise
