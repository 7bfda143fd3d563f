"""Room for a cell, checked before it starts: one more copy of the dataset on the storage (the
tmpfs or the `[experiment] storage` directory), and its logs on the results disk.

    check = SpaceCheck(results.dir)
    check(snapshot, workdir)   # ResourceError (exit 3): "/dev/shm has 40 MiB free; a cell needs 180 MiB ..."
"""

from __future__ import annotations

import shutil
from pathlib import Path

from perflab.errors import ResourceError
from perflab.servers import dataset
from perflab.run.workdir import space_hint

SPACE_MARGIN = 64 << 20  # tmp tables, logs, the server's own files beside a cell's datadir


class SpaceCheck:
    """Before a cell: room on the storage for one more copy of the dataset, and on the results
    disk for its logs; else stop now, with the stored cells intact."""

    def __init__(self, results_dir: Path) -> None:
        self.results_dir = results_dir
        self._snapshot_bytes: dict[Path, int] = {}

    def __call__(self, snapshot: dataset.Snapshot, workdir: Path) -> None:
        if snapshot.datadir not in self._snapshot_bytes:
            self._snapshot_bytes[snapshot.datadir] = dataset.tree_bytes(snapshot.datadir)
        need = self._snapshot_bytes[snapshot.datadir] + SPACE_MARGIN
        free = shutil.disk_usage(workdir).free
        if free < need:
            raise ResourceError(
                f"{workdir.parent} has {free >> 20} MiB free; a cell needs {need >> 20} MiB (a copy of the "
                "dataset and room beside it)",
                space_hint(self.results_dir),
            )
        if shutil.disk_usage(self.results_dir).free < 16 << 20:
            raise ResourceError(f"{self.results_dir} has less than 16 MiB free", space_hint(self.results_dir))
