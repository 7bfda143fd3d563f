"""A dataset's snapshot: prepared once per on-disk format by its server kind (Kind.prepare:
servers/mysqld_dataset.py for MariaDB and MySQL, servers/postgresql/dataset.py), kept stopped, and
restored into every cell (seconds faster than preparing again: bench/restore.py). The buffer pool
is sized from the prepared data so every cell is in memory. run/datasets.py keeps one per format.

    snapshot = kind.prepare(workdir, spec=spec, tool=workloads.of(spec), log=log, name="snapshot", build=None)
    seconds, method = restore_with_method(snapshot, rundir / "data")   # "reflink" or "copy"
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from perflab.places.copy import copy_tree

MiB = 1 << 20


@dataclass(frozen=True)
class Snapshot:
    datadir: Path
    data_bytes: int  # size of the sbtest schema on disk
    prepare_s: float  # wall time of init + prepare + shutdown
    format: str = ""  # the on-disk format of the servers that open it: "mariadb-10.11"
    init: str = ""  # what initialised the datadir: "mariadb-install-db", "mysqld --initialize-insecure"
    # a snapshot prepared on the server host (hosts/dataset.py): its datadir's path there (the
    # local `datadir` is then an empty placeholder); None: prepared here
    on_host: str | None = None

    @property
    def buffer_pool(self) -> str:
        """A buffer pool that holds the whole dataset with room to spare (>= 256M)."""
        need = max(256 * MiB, self.data_bytes * 1.5)
        return f"{math.ceil(need / (128 * MiB)) * 128}M"

    @property
    def shared_buffers(self) -> str:
        """PostgreSQL's shared_buffers, sized like the buffer pool: the dataset with room (>= 128MB)."""
        need = max(128 * MiB, self.data_bytes * 1.5)
        return f"{math.ceil(need / (64 * MiB)) * 64}MB"


def tree_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                continue
    return total


def restore(snapshot: Snapshot, dest: Path) -> float:
    """Copy the snapshot to `dest` (which must not exist); returns seconds taken."""
    return restore_with_method(snapshot, dest)[0]


def restore_with_method(snapshot: Snapshot, dest: Path, in_memory: bool = False) -> tuple[float, str]:
    """Copy the snapshot to `dest`: (seconds taken, "reflink" or "copy": how its files were
    copied; one file that could not be shared makes it "copy"). `in_memory`: `dest` is on tmpfs
    (places/copy.py: its data copied, the rest allocated)."""
    start = time.monotonic()
    methods = copy_tree(snapshot.datadir, dest, in_memory=in_memory)
    return time.monotonic() - start, "reflink" if methods == {"reflink"} else "copy"
