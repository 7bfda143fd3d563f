"""Restore time per GiB of dataset, on tmpfs and on disk ([experiment] storage, issue 35).

What: the time perflab's per-cell restore takes (perflab.servers.dataset.restore_with_method: a
reflink where the filesystem shares extents, else a byte copy; on tmpfs the data ranges only,
the rest allocated: places/copy._data_copy), divided by the snapshot's size, on the tmpfs
(/dev/shm) and on a directory on disk (--disk, default /var/tmp), each from a snapshot on the
same filesystem, as a run keeps it; on tmpfs also the byte copy it made before 2026-12-01, as the
baseline of the ratio printed last. On disk, each restore is timed twice: with the
snapshot in the page cache (what a run's cells meet) and after `sync; echo 3 > drop_caches`
(`[experiment] drop_caches = true`: that drops the whole machine's cache, so run it on an idle one).
The restore ends when the files are written to the page cache (perflab does not sync them): the
disk's own writeback comes later, during the cell, and [observe] io counts it there.

How: one MariaDB snapshot (sysbench oltp_read_only prepare, --tables x --table-size rows: about
1 GiB by default) prepared on tmpfs and copied to the disk directory; then N rounds (10; 3 with
--quick), each restoring on tmpfs (both ways), on disk warm and on disk cold in an order that rotates by round.
Printed: seconds per GiB (mean, min-max, CV, 95% CI) and the method per filesystem.

Run: python3 bench/storage_restore.py [--disk /var/tmp] [--quick]
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as C

from perflab.run import storage

from perflab.places.copy import copy_tree
from perflab.servers import dataset, mysqld_dataset
from perflab.workloads import sysbench

GiB = 1 << 30


def settings(quick: bool, tables: int, table_size: int) -> dict[str, Any]:
    return {"rounds": 3 if quick else 10, "tables": 1 if quick else tables, "table_size": 20_000 if quick else table_size}


def prepared(cfg: dict[str, Any], work: Path) -> dataset.Snapshot:
    (work / "logs").mkdir()
    return mysqld_dataset.prepare(
        work,
        sysbench.Prepare("oltp_read_only", cfg["tables"], cfg["table_size"], {}),
        server_options={},
        log=work / "logs" / "prepare.txt",
    )


def timed(snapshot: dataset.Snapshot, dest: Path, cold: bool, in_memory: bool) -> tuple[float, str]:
    if cold:
        storage.drop_caches()
    seconds, method = dataset.restore_with_method(snapshot, dest, in_memory=in_memory)
    shutil.rmtree(dest)
    return seconds, method


def run(args: argparse.Namespace) -> None:
    cfg = settings(args.quick, args.tables, args.table_size)
    machine = C.Machine()
    results: dict[str, list[float]] = {"tmpfs": [], "tmpfs, byte copy": [], "disk, cached": [], "disk, cold cache": []}
    methods: dict[str, str] = {}
    with C.workdir(machine) as shm, tempfile.TemporaryDirectory(prefix="plbench-", dir=args.disk) as disk_dir:
        snap = prepared(cfg, shm)
        size = dataset.tree_bytes(snap.datadir)
        on_disk = dataset.Snapshot(Path(disk_dir) / "snapshot", snap.data_bytes, 0.0)
        copy_tree(snap.datadir, on_disk.datadir)
        C.say(f"snapshot {size / GiB:.2f} GiB; disk: {storage.describe(Path(disk_dir)).record()}")
        steps = [("tmpfs", snap, shm / "copy", False, True), ("tmpfs, byte copy", snap, shm / "copy", False, False),
                 ("disk, cached", on_disk, Path(disk_dir) / "copy", False, False),
                 ("disk, cold cache", on_disk, Path(disk_dir) / "copy", True, False)]  # fmt: skip
        for i in range(cfg["rounds"]):
            for name, source, dest, cold, in_memory in steps[i % 4 :] + steps[: i % 4]:
                seconds, methods[name] = timed(source, dest, cold, in_memory)
                results[name].append(seconds / (size / GiB))
            C.say(f"  round {i + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s/GiB" for k, v in results.items()))
    info = machine.finish()
    rows = [[k, len(v), f"{C.mean(v):.3f}", f"{min(v):.3f}-{max(v):.3f}", C.pct(C.cv(v)),
             "-" if not C.ci95(v) else "{:.3f}-{:.3f}".format(*C.ci95(v)), methods[k]] for k, v in results.items()]  # fmt: skip
    C.say(C.table(["restore", "n", "s/GiB", "min-max", "CV", "95% CI", "method"], rows))
    C.say(f"tmpfs: {C.mean(results['tmpfs']) / C.mean(results['tmpfs, byte copy']):.3f} of the byte copy's time")
    C.say(C.Machine.describe(info))
    if args.quick:
        C.say("(quick mode: a small snapshot and 3 rounds; a smoke test, not the figures to quote)")
    C.final_json({"bench": "storage_restore", "quick": args.quick, "settings": cfg, "snapshot_bytes": size,
                  "s_per_gib": results, "methods": methods, "machine": info})  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--disk", default="/var/tmp", help="a directory on the disk to measure (default /var/tmp)")
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--table-size", type=int, default=1_000_000, help="rows per table (4 x 1M: about 1 GiB)")
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 x 20k rows, 3 rounds")
    args = parser.parse_args()
    started = time.monotonic()
    C.main_guard(lambda: run(args))
    C.say(f"wall {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
